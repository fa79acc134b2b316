//! The claim's `status.healthStatus` as a write value, and whether the API server keeps it.
//!
//! The field is Kubernetes 1.37's (core/v1 PersistentVolumeClaimStatus `healthStatus`, a VolumeHealthStatus:
//! `healthConditions`, a list keyed by status and reason, each with `status`, `reason` and `message`, and
//! `lastTransitionTime`), behind the CSIVolumeHealth feature gate. This workspace's k8s-openapi (1.34) has no such
//! field, so it is written as JSON: a merge patch of the `status` subresource, and the answer read as JSON.
//!
//! A server without the field (older, or the gate off) drops it silently; so does one answering 403 (a role without
//! `persistentvolumeclaims/status`). The first abnormal write tells which: after a drop or a 403 the monitor sends
//! events only, as upstream does.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};

use super::health::Condition;

/// `status.healthStatus` to write: the conditions (empty: healthy, the field removed) since `at`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HealthStatusPatch {
    pub conditions: Vec<Condition>,
    pub at: Time,
}

impl HealthStatusPatch {
    /// The merge patch of the claim's `status` subresource.
    pub fn merge_patch(&self) -> Value {
        if self.conditions.is_empty() {
            return json!({"status": {"healthStatus": null}});
        }
        let conditions: Vec<Value> = self
            .conditions
            .iter()
            .map(|c| {
                let mut condition = json!({"status": c.status, "reason": c.reason});
                if !c.message.is_empty() {
                    condition["message"] = json!(c.message);
                }
                condition
            })
            .collect();
        let at = serde_json::to_value(&self.at).unwrap_or(Value::Null);
        json!({"status": {"healthStatus": {"healthConditions": conditions, "lastTransitionTime": at}}})
    }

    /// The claim (as JSON) after the patch, as a server with the field stores it (RFC 7386).
    pub fn apply(&self, claim: &mut Value) {
        merge(claim, &self.merge_patch());
    }
}

fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    let object = target.as_object_mut().expect("an object");
    for (key, value) in patch {
        match value {
            Value::Null => {
                object.remove(key);
            }
            value => merge(object.entry(key.clone()).or_insert(Value::Null), value),
        }
    }
}

/// The conditions a claim (as JSON) carries in `status.healthStatus`, as an earlier monitor wrote them; `None`
/// without the field. Statuses this monitor does not know are left out.
pub fn carried_conditions(claim: &Value) -> Option<Vec<Condition>> {
    let health = claim.pointer("/status/healthStatus").filter(|h| !h.is_null())?;
    let listed = health.get("healthConditions").and_then(Value::as_array).cloned().unwrap_or_default();
    let known = |status: &str| ["Degraded", "Inaccessible", "DataLoss"].into_iter().find(|s| *s == status);
    let text = |c: &Value, key: &str| c.get(key).and_then(Value::as_str).unwrap_or_default().to_string();
    let conditions = listed
        .iter()
        .filter_map(|c| {
            let status = known(c.get("status").and_then(Value::as_str)?)?;
            Some(Condition { status, reason: text(c, "reason"), message: text(c, "message") })
        })
        .collect();
    Some(conditions)
}

/// Whether status writes are made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatusWrites {
    /// Not known yet: written until an answer tells.
    Untried,
    /// The server kept an abnormal write.
    Kept,
    /// The server dropped the field, or the role does not allow it: events only.
    Off,
}

impl StatusWrites {
    pub fn allowed(self) -> bool {
        self != StatusWrites::Off
    }

    /// After the server answered `patch` with the claim `answer`: an abnormal write that comes back without the field
    /// was dropped; a removal tells nothing.
    pub fn after_answer(self, patch: &HealthStatusPatch, answer: &Value) -> StatusWrites {
        if patch.conditions.is_empty() {
            return self;
        }
        match answer.pointer("/status/healthStatus").is_some_and(|v| !v.is_null()) {
            true => StatusWrites::Kept,
            false => StatusWrites::Off,
        }
    }

    /// After the server refused a write: 403 turns writes off; any other error leaves them as they were.
    pub fn after_refusal(self, forbidden: bool) -> StatusWrites {
        match forbidden {
            true => StatusWrites::Off,
            false => self,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at() -> Time {
        serde_json::from_value(json!("2026-12-03T07:00:00Z")).unwrap()
    }

    fn patch(conditions: Vec<Condition>) -> HealthStatusPatch {
        HealthStatusPatch { conditions, at: at() }
    }

    fn gone() -> Condition {
        Condition { status: "Inaccessible", reason: "VolumeDataMissing".into(), message: "data is missing".into() }
    }

    #[test]
    fn merge_patches() {
        let no_message = Condition { status: "Degraded", reason: "Slow".into(), message: String::new() };
        assert_eq!(
            patch(vec![gone(), no_message]).merge_patch(),
            json!({"status": {"healthStatus": {
                "healthConditions": [
                    {"status": "Inaccessible", "reason": "VolumeDataMissing", "message": "data is missing"},
                    {"status": "Degraded", "reason": "Slow"},
                ],
                "lastTransitionTime": "2026-12-03T07:00:00Z",
            }}}),
            "the whole list replaced, a message only when there is one"
        );
        assert_eq!(
            patch(vec![]).merge_patch(),
            json!({"status": {"healthStatus": null}}),
            "healthy: the field removed"
        );
    }

    #[test]
    fn applied_to_a_claim() {
        let mut claim = json!({"metadata": {"name": "c"}, "status": {"phase": "Bound"}});
        patch(vec![gone()]).apply(&mut claim);
        assert_eq!(claim["status"]["phase"], "Bound", "the rest of the status stays");
        assert_eq!(claim["status"]["healthStatus"]["healthConditions"][0]["reason"], "VolumeDataMissing");
        patch(vec![]).apply(&mut claim);
        assert_eq!(claim, json!({"metadata": {"name": "c"}, "status": {"phase": "Bound"}}));
    }

    #[test]
    fn conditions_a_claim_carries() {
        let mut claim = json!({"metadata": {"uid": "u1"}, "status": {"phase": "Bound"}});
        assert_eq!(carried_conditions(&claim), None, "no field: nothing known");
        patch(vec![gone()]).apply(&mut claim);
        assert_eq!(carried_conditions(&claim), Some(vec![gone()]), "what a patch wrote is read back");
        let odd = json!({"status": {"healthStatus": {"healthConditions": [
            {"status": "Exploded", "reason": "X"}, {"status": "Degraded", "reason": "Slow"}
        ]}}});
        let slow = Condition { status: "Degraded", reason: "Slow".into(), message: String::new() };
        assert_eq!(carried_conditions(&odd), Some(vec![slow]), "unknown statuses left out");
        let empty = json!({"status": {"healthStatus": {"lastTransitionTime": "2026-12-03T07:00:00Z"}}});
        assert_eq!(carried_conditions(&empty), Some(vec![]), "the field without conditions: healthy");
    }

    #[test]
    fn whether_status_writes_are_made() {
        let abnormal = patch(vec![gone()]);
        let mut kept = json!({"status": {"phase": "Bound"}});
        abnormal.apply(&mut kept);
        let dropped = json!({"status": {"phase": "Bound"}});
        let rows = [
            ("untried, the server kept the field", StatusWrites::Untried, &abnormal, &kept, StatusWrites::Kept),
            (
                "untried, the server dropped it (gate off, older server)",
                StatusWrites::Untried,
                &abnormal,
                &dropped,
                StatusWrites::Off,
            ),
            ("kept before, dropped now (gate turned off)", StatusWrites::Kept, &abnormal, &dropped, StatusWrites::Off),
        ];
        for (rule, before, patch, answer, want) in rows {
            assert_eq!(before.after_answer(patch, answer), want, "{rule}");
        }
        let removal = patch(vec![]);
        assert_eq!(
            StatusWrites::Untried.after_answer(&removal, &dropped),
            StatusWrites::Untried,
            "a removal tells nothing"
        );
        assert_eq!(StatusWrites::Untried.after_refusal(true), StatusWrites::Off, "403: the role has no claims/status");
        assert_eq!(StatusWrites::Kept.after_refusal(false), StatusWrites::Kept, "another error: unchanged");
        assert!(StatusWrites::Untried.allowed() && StatusWrites::Kept.allowed() && !StatusWrites::Off.allowed());
    }
}
