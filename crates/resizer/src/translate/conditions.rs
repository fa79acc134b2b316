//! How the resizer writes claim conditions. Expansion and modification follow two different upstream rules:
//!
//! - expansion replaces a resize condition whole (its `lastTransitionTime` is "now" on every write), and either keeps
//!   or drops the other resize conditions (Resizing, FileSystemResizePending, ControllerResizeError,
//!   NodeResizeError); conditions of other kinds are never touched;
//! - modification stamps `lastProbeTime` = now on every write and moves `lastTransitionTime` only when the status or
//!   the reason changes (a new condition takes its `lastProbeTime`): external-resizer pkg/util/util.go,
//!   MergePVCConditions.

use k8s_openapi::api::core::v1::PersistentVolumeClaimCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::translate::names::{CONDITION_TRUE, RESIZE_CONDITIONS};
use crate::translate::patch::ConditionChange;

/// A resize condition as expansion writes it: status True, `lastTransitionTime` = now, no reason.
pub fn resize_condition(type_: &str, message: Option<String>, now: &Time) -> PersistentVolumeClaimCondition {
    PersistentVolumeClaimCondition {
        type_: type_.to_string(),
        status: CONDITION_TRUE.to_string(),
        message,
        last_transition_time: Some(now.clone()),
        ..Default::default()
    }
}

/// The changes that write `new` resize conditions over `old`. With `keep_old` false, every other resize condition
/// present is removed.
pub fn merge_resize_conditions(
    old: &[PersistentVolumeClaimCondition],
    new: Vec<PersistentVolumeClaimCondition>,
    keep_old: bool,
) -> Vec<ConditionChange> {
    let mut changes = Vec::new();
    if !keep_old {
        for condition in old {
            let is_resize = RESIZE_CONDITIONS.contains(&condition.type_.as_str());
            if is_resize && !new.iter().any(|n| n.type_ == condition.type_) {
                changes.push(ConditionChange::Remove(condition.type_.clone()));
            }
        }
    }
    changes.extend(new.into_iter().map(ConditionChange::Set));
    changes
}

/// A condition as modification writes it: status True, `lastProbeTime` = now (`lastTransitionTime` is settled by
/// [`merge_modify_conditions`]).
pub fn modify_condition(
    type_: &str,
    reason: Option<String>,
    message: String,
    now: &Time,
) -> PersistentVolumeClaimCondition {
    PersistentVolumeClaimCondition {
        type_: type_.to_string(),
        status: CONDITION_TRUE.to_string(),
        reason,
        message: Some(message),
        last_probe_time: Some(now.clone()),
        last_transition_time: None,
    }
}

/// The changes that write `new` modification conditions over `old`, keeping `lastTransitionTime` when neither the
/// status nor the reason changed.
pub fn merge_modify_conditions(
    old: &[PersistentVolumeClaimCondition],
    new: Vec<PersistentVolumeClaimCondition>,
) -> Vec<ConditionChange> {
    new.into_iter()
        .map(|mut condition| {
            let previous = old.iter().find(|o| o.type_ == condition.type_);
            condition.last_transition_time = match previous {
                Some(o) if o.status == condition.status && reason(o) == reason(&condition) => {
                    o.last_transition_time.clone()
                }
                _ => condition.last_probe_time.clone(),
            };
            ConditionChange::Set(condition)
        })
        .collect()
}

/// The changes that remove the conditions of these types, for those present.
pub fn remove_conditions(old: &[PersistentVolumeClaimCondition], types: &[&str]) -> Vec<ConditionChange> {
    old.iter().filter(|c| types.contains(&c.type_.as_str())).map(|c| ConditionChange::Remove(c.type_.clone())).collect()
}

fn reason(condition: &PersistentVolumeClaimCondition) -> &str {
    condition.reason.as_deref().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    fn time(second: i64) -> Time {
        Time(Timestamp::from_second(second).unwrap())
    }

    fn old(type_: &str, reason: Option<&str>, transition: i64) -> PersistentVolumeClaimCondition {
        PersistentVolumeClaimCondition {
            type_: type_.into(),
            status: "True".into(),
            reason: reason.map(str::to_string),
            last_transition_time: Some(time(transition)),
            ..Default::default()
        }
    }

    #[test]
    fn resize_conditions_replace_and_drop() {
        let now = time(2_000);
        let existing = [
            old("Resizing", None, 1),
            old("NodeResizeError", None, 1),
            old("ModifyingVolume", None, 1),
            old("X", None, 1),
        ];
        let resizing = resize_condition("Resizing", None, &now);
        // (rule, keep_old, expected)
        let table = [
            (
                "rewriting the status drops every other resize condition, and only those",
                false,
                vec![ConditionChange::Remove("NodeResizeError".into()), ConditionChange::Set(resizing.clone())],
            ),
            ("not rewriting keeps the others", true, vec![ConditionChange::Set(resizing.clone())]),
        ];
        for (rule, keep_old, want) in table {
            assert_eq!(merge_resize_conditions(&existing, vec![resizing.clone()], keep_old), want, "{rule}");
        }
        assert_eq!(resizing.last_transition_time, Some(now), "resize conditions move on every write");
    }

    #[test]
    fn modify_conditions_keep_transition_time_unless_status_or_reason_changes() {
        let now = time(2_000);
        // (rule, old conditions, new condition reason, expected lastTransitionTime)
        let table = [
            ("new condition takes lastProbeTime", vec![], None, time(2_000)),
            (
                "same status and reason keep it",
                vec![old("ModifyVolumeError", Some("Aborted"), 5)],
                Some("Aborted"),
                time(5),
            ),
            (
                "a new reason moves it",
                vec![old("ModifyVolumeError", Some("Aborted"), 5)],
                Some("Internal"),
                time(2_000),
            ),
            ("nil and empty reasons are equal", vec![old("ModifyVolumeError", Some(""), 5)], None, time(5)),
        ];
        for (rule, existing, reason, want) in table {
            let new = modify_condition("ModifyVolumeError", reason.map(str::to_string), "m".into(), &now);
            let changes = merge_modify_conditions(&existing, vec![new]);
            let [ConditionChange::Set(set)] = changes.as_slice() else { panic!("{rule}: {changes:?}") };
            assert_eq!(set.last_transition_time, Some(want), "{rule}");
            assert_eq!(set.last_probe_time, Some(now.clone()), "{rule}: probe time is now");
        }
    }

    #[test]
    fn removal_names_only_present_conditions() {
        let existing = [old("ModifyingVolume", None, 1), old("Resizing", None, 1)];
        assert_eq!(
            remove_conditions(&existing, &["ModifyingVolume", "ModifyVolumeError"]),
            vec![ConditionChange::Remove("ModifyingVolume".into())]
        );
    }
}
