//! A volume's CSI health as the claim's conditions, and what each check reports on the claim (external-health-monitor
//! pkg/csi-handler/pv_checker.go CheckControllerVolumeStatus, CheckControllerListVolumeStatuses,
//! sendRecoveryEventToPVC).
//!
//! - Abnormal (any adverse condition): a Warning `VolumeConditionAbnormal` with the driver's message, at every check.
//! - Healthy again after an abnormal report: one Normal `VolumeConditionNormal`. Upstream sends it while its
//!   abnormal event has not expired, found in a cluster-wide Event cache; this monitor remembers what it reported per
//!   claim instead (no Event watch), starting from the conditions the claims carry in `status.healthStatus`, so a
//!   claim an earlier leader reported abnormal gets its recovery event only where that field is kept.
//! - `status.healthStatus`, where the API server keeps it: written when the set of conditions changes.

use csi_client::proto::{VolumeHealth, VolumeHealthErrorType};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use sidecar_runtime::PlannedEvent;

use super::names::{REASON_ABNORMAL, REASON_NORMAL, RECOVERY_MESSAGE};
use super::patch::HealthStatusPatch;

/// At most this many conditions on a claim (the API's limit).
pub const MAX_CONDITIONS: usize = 16;
/// A condition's reason, at most (bytes).
pub const MAX_REASON_BYTES: usize = 256;
/// A condition's message, at most (bytes).
pub const MAX_MESSAGE_BYTES: usize = 1024;

/// One adverse condition, in the claim's terms (core/v1 VolumeHealthCondition).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    /// `Inaccessible`, `DataLoss` or `Degraded`.
    pub status: &'static str,
    pub reason: String,
    pub message: String,
}

/// The claim's status value of a CSI health category; unknown categories are ignored, as CSI asks of a CO.
fn status_of(value: i32) -> Option<&'static str> {
    match VolumeHealthErrorType::try_from(value).ok()? {
        VolumeHealthErrorType::Degraded => Some("Degraded"),
        VolumeHealthErrorType::Inaccessible => Some("Inaccessible"),
        VolumeHealthErrorType::DataLoss => Some("DataLoss"),
        VolumeHealthErrorType::UnknownVolumeHealthType => None,
    }
}

/// `text` cut to at most `max` bytes on a character boundary.
fn truncated(text: &str, max: usize) -> String {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

/// The conditions of a CSI VolumeHealth (`None`: no entry, healthy): known categories only, each (status, reason)
/// once, a missing reason replaced by the status, reason and message within the API's limits, at most 16.
pub fn conditions(health: Option<&VolumeHealth>) -> Vec<Condition> {
    let mut out: Vec<Condition> = Vec::new();
    for entry in health.map(|h| h.health_statuses.as_slice()).unwrap_or_default() {
        let Some(status) = status_of(entry.status) else { continue };
        let reason = match entry.reason.is_empty() {
            true => status.to_string(),
            false => truncated(&entry.reason, MAX_REASON_BYTES),
        };
        if out.iter().any(|c| c.status == status && c.reason == reason) {
            continue;
        }
        out.push(Condition { status, reason, message: truncated(&entry.message, MAX_MESSAGE_BYTES) });
        if out.len() == MAX_CONDITIONS {
            break;
        }
    }
    out
}

/// The abnormal event's message: the one condition's message (its reason when it has none); several conditions as
/// `reason: message` joined by `; `.
pub fn abnormal_message(conditions: &[Condition]) -> String {
    match conditions {
        [one] if !one.message.is_empty() => one.message.clone(),
        [one] => one.reason.clone(),
        many => many
            .iter()
            .map(|c| match c.message.is_empty() {
                true => c.reason.clone(),
                false => format!("{}: {}", c.reason, c.message),
            })
            .collect::<Vec<_>>()
            .join("; "),
    }
}

/// What one check reports on the claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    pub event: Option<PlannedEvent>,
    /// `status.healthStatus` to write; `None`: nothing to write.
    pub status: Option<HealthStatusPatch>,
}

/// The report of a check that found `now`, after `previous` (what was last reported on this claim; `None`: nothing
/// since this monitor started), with status writes `writing` or not; `at` is the check's time.
pub fn report(previous: Option<&[Condition]>, now: &[Condition], writing: bool, at: &Time) -> Report {
    let was_abnormal = previous.is_some_and(|p| !p.is_empty());
    let event = match (now.is_empty(), was_abnormal) {
        (false, _) => Some(PlannedEvent::warning(REASON_ABNORMAL, abnormal_message(now))),
        (true, true) => Some(PlannedEvent::normal(REASON_NORMAL, RECOVERY_MESSAGE)),
        (true, false) => None,
    };
    let changed = previous.unwrap_or_default() != now;
    let status = (writing && changed).then(|| HealthStatusPatch { conditions: now.to_vec(), at: at.clone() });
    Report { event, status }
}

#[cfg(test)]
mod tests {
    use csi_client::proto::volume_health::VolumeHealthEntry;
    use sidecar_runtime::EventType;

    use super::*;

    fn entry(status: VolumeHealthErrorType, reason: &str, message: &str) -> VolumeHealthEntry {
        VolumeHealthEntry { status: status as i32, reason: reason.into(), message: message.into() }
    }

    fn health(entries: Vec<VolumeHealthEntry>) -> VolumeHealth {
        VolumeHealth { volume_id: "vol-1".into(), health_statuses: entries }
    }

    fn condition(status: &'static str, reason: &str, message: &str) -> Condition {
        Condition { status, reason: reason.into(), message: message.into() }
    }

    #[test]
    fn conditions_from_csi_health() {
        use VolumeHealthErrorType::*;
        let unknown = VolumeHealthEntry { status: 99, reason: "Multipath".into(), message: String::new() };
        let rows: Vec<(&str, Option<VolumeHealth>, Vec<Condition>)> = vec![
            ("no entry: healthy", None, vec![]),
            ("an empty list: healthy", Some(health(vec![])), vec![]),
            (
                "each category in the claim's words",
                Some(health(vec![
                    entry(Degraded, "Slow", "a"),
                    entry(Inaccessible, "Gone", "b"),
                    entry(DataLoss, "Lost", ""),
                ])),
                vec![
                    condition("Degraded", "Slow", "a"),
                    condition("Inaccessible", "Gone", "b"),
                    condition("DataLoss", "Lost", ""),
                ],
            ),
            (
                "unknown and UNKNOWN categories are ignored",
                Some(health(vec![unknown, entry(UnknownVolumeHealthType, "X", ""), entry(Degraded, "Slow", "")])),
                vec![condition("Degraded", "Slow", "")],
            ),
            (
                "a (status, reason) pair once",
                Some(health(vec![
                    entry(Degraded, "Slow", "a"),
                    entry(Degraded, "Slow", "b"),
                    entry(DataLoss, "Slow", "c"),
                ])),
                vec![condition("Degraded", "Slow", "a"), condition("DataLoss", "Slow", "c")],
            ),
            (
                "a missing reason is the status",
                Some(health(vec![entry(Inaccessible, "", "gone")])),
                vec![condition("Inaccessible", "Inaccessible", "gone")],
            ),
        ];
        for (rule, health, want) in rows {
            assert_eq!(conditions(health.as_ref()), want, "{rule}");
        }
    }

    #[test]
    fn conditions_within_the_api_limits() {
        let many: Vec<_> = (0..20).map(|i| entry(VolumeHealthErrorType::Degraded, &format!("R{i}"), "")).collect();
        assert_eq!(conditions(Some(&health(many))).len(), MAX_CONDITIONS, "at most 16");
        let long = entry(VolumeHealthErrorType::Degraded, &"r".repeat(300), &"é".repeat(600));
        let got = conditions(Some(&health(vec![long])));
        assert_eq!(got[0].reason.len(), MAX_REASON_BYTES);
        assert_eq!(got[0].message.len(), MAX_MESSAGE_BYTES, "cut on a character boundary");
    }

    #[test]
    fn abnormal_messages() {
        assert_eq!(abnormal_message(&[condition("Degraded", "Slow", "disk is slow")]), "disk is slow");
        assert_eq!(abnormal_message(&[condition("Degraded", "Slow", "")]), "Slow");
        assert_eq!(
            abnormal_message(&[condition("Degraded", "Slow", "disk is slow"), condition("DataLoss", "Lost", "")]),
            "Slow: disk is slow; Lost"
        );
    }

    #[test]
    fn what_a_check_reports() {
        let at = sidecar_runtime::time::now();
        let bad = vec![condition("Inaccessible", "Gone", "volume data is missing")];
        let worse = vec![condition("DataLoss", "Lost", "")];
        let warning = Some(PlannedEvent::warning(REASON_ABNORMAL, "volume data is missing"));
        let normal = Some(PlannedEvent::normal(REASON_NORMAL, RECOVERY_MESSAGE));
        let patch = |c: &[Condition]| Some(HealthStatusPatch { conditions: c.to_vec(), at: at.clone() });
        // (rule, reported before, found now, status writes on, the report)
        type Row<'a> = (&'a str, Option<&'a [Condition]>, &'a [Condition], bool, Report);
        let rows: Vec<Row> = vec![
            (
                "abnormal, first seen: Warning and the status",
                None,
                &bad,
                true,
                Report { event: warning.clone(), status: patch(&bad) },
            ),
            (
                "abnormal again: the Warning at every check, the status unchanged",
                Some(&bad),
                &bad,
                true,
                Report { event: warning.clone(), status: None },
            ),
            (
                "other conditions: the status rewritten",
                Some(&bad),
                &worse,
                true,
                Report { event: Some(PlannedEvent::warning(REASON_ABNORMAL, "Lost")), status: patch(&worse) },
            ),
            (
                "healthy after abnormal: recovery event, the status cleared",
                Some(&bad),
                &[],
                true,
                Report { event: normal.clone(), status: patch(&[]) },
            ),
            ("healthy, first seen: nothing", None, &[], true, Report { event: None, status: None }),
            ("healthy again: nothing", Some(&[]), &[], true, Report { event: None, status: None }),
            ("status writes off: events only", None, &bad, false, Report { event: warning.clone(), status: None }),
            (
                "status writes off, recovery: the event only",
                Some(&bad),
                &[],
                false,
                Report { event: normal, status: None },
            ),
        ];
        for (rule, previous, now, writing, want) in rows {
            assert_eq!(report(previous, now, writing, &at), want, "{rule}");
        }
        assert_eq!(report(None, &bad, true, &at).event.unwrap().event_type, EventType::Warning);
    }
}
