//! Which VolumeSnapshotClass a snapshot uses, on every sync of a VolumeSnapshot (external-snapshotter
//! pkg/common-controller: snapshot_controller_base.go, checkAndUpdateSnapshotClass; snapshot_controller.go,
//! SetDefaultSnapshotClass).
//!
//! A named class must exist. An unnamed dynamic snapshot (not a group member) gets its driver's default class: the
//! one class whose annotation `snapshot.storage.kubernetes.io/is-default-class` is exactly `"true"` and whose driver
//! is the CSI driver of the claim's volume. None, or several, is a status error and a Warning
//! `SetDefaultSnapshotClassFailed`; with several, the message names them (beyond upstream, which only counts them),
//! so that the user knows which annotations to fix.

use kube::ResourceExt;
use snapshot_api::names::ANN_IS_DEFAULT_CLASS;
use snapshot_api::{VolumeSnapshot, VolumeSnapshotClass};

use super::names::{not_found_text, parent_group_snapshot, snapshot_key};
use super::patch::SnapshotPatch;
use super::reasons::{GET_SNAPSHOT_CLASS_FAILED, SET_DEFAULT_SNAPSHOT_CLASS_FAILED};
use super::status_error::SnapshotFailure;

/// What the controller must look up before the rest of the sync.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClassLookup<'a> {
    /// The class the snapshot names: read it from the lister; if it is missing, [`class_missing`].
    Named(&'a str),
    /// Resolve the source volume ([`super::source_volume`]), then [`default_class`] with its CSI driver.
    Default,
    /// Pre-provisioned snapshots and group members need no class.
    NotNeeded,
}

pub fn class_lookup(snapshot: &VolumeSnapshot) -> ClassLookup<'_> {
    if let Some(name) = snapshot.spec.volume_snapshot_class_name.as_deref() {
        return ClassLookup::Named(name);
    }
    if snapshot.spec.source.volume_snapshot_content_name.is_some() || parent_group_snapshot(snapshot).is_some() {
        return ClassLookup::NotNeeded;
    }
    ClassLookup::Default
}

/// The named class is not in the lister. `readyToUse` is left alone. A snapshot being deleted goes on with its sync
/// anyway (the class may be gone for good), see [`sync_continues_without_class`].
pub fn class_missing(class_name: &str) -> SnapshotFailure {
    let error = not_found_text("volumesnapshotclass.snapshot.storage.k8s.io", class_name);
    SnapshotFailure::status_error(
        GET_SNAPSHOT_CLASS_FAILED,
        format!("Failed to get snapshot class with error {error}"),
        false,
        error,
    )
}

/// Whether the sync goes on after [`class_missing`]: only for a snapshot being deleted, so that its finalizers can
/// still come off.
pub fn sync_continues_without_class(snapshot: &VolumeSnapshot) -> bool {
    snapshot.metadata.deletion_timestamp.is_some()
}

/// The default class was chosen: write it into the snapshot.
#[derive(Clone, Debug, PartialEq)]
pub struct DefaultClass<'a> {
    pub class: &'a VolumeSnapshotClass,
    pub patch: SnapshotPatch,
}

/// Whether a class is marked as its driver's default (the annotation value is exactly `"true"`).
pub fn is_default_class(class: &VolumeSnapshotClass) -> bool {
    class.annotations().get(ANN_IS_DEFAULT_CLASS).map(String::as_str) == Some("true")
}

/// The default class of `driver` among `classes`.
pub fn default_class<'a>(
    classes: impl IntoIterator<Item = &'a VolumeSnapshotClass>,
    driver: &str,
) -> Result<DefaultClass<'a>, SnapshotFailure> {
    let defaults: Vec<&VolumeSnapshotClass> =
        classes.into_iter().filter(|c| is_default_class(c) && c.spec.driver == driver).collect();
    match defaults.as_slice() {
        [class] => Ok(DefaultClass {
            class,
            patch: SnapshotPatch { class_name: Some(class.name_any()), ..Default::default() },
        }),
        [] => Err(default_class_failed("cannot find default snapshot class".to_string())),
        several => {
            let mut names: Vec<String> = several.iter().map(|c| c.name_any()).collect();
            names.sort();
            Err(default_class_failed(format!(
                "{} default snapshot classes were found: {}",
                names.len(),
                names.join(", ")
            )))
        }
    }
}

/// Any failure on the way to the default class, including the source volume checks, is reported this way.
pub fn default_class_failed(error: String) -> SnapshotFailure {
    SnapshotFailure::status_error(
        SET_DEFAULT_SNAPSHOT_CLASS_FAILED,
        format!("Failed to set default snapshot class with error {error}"),
        false,
        error,
    )
}

/// Beyond upstream: when a class is added or changed, the snapshots waiting for it are retried at once instead of
/// at their next backoff step. A snapshot waits for the class it names, or — unnamed, dynamic, not a member, not
/// yet bound — for a default class (whose driver only the source volume tells; the retry finds out).
fn class_change_wakes(class: &VolumeSnapshotClass, snapshot: &VolumeSnapshot) -> bool {
    if snapshot.status.as_ref().and_then(|s| s.bound_volume_snapshot_content_name.as_ref()).is_some() {
        return false;
    }
    match class_lookup(snapshot) {
        ClassLookup::Named(name) => name == class.name_any(),
        ClassLookup::Default => is_default_class(class),
        ClassLookup::NotNeeded => false,
    }
}

/// The snapshots (`namespace/name` keys) to sync at once when `class` is added or changed: those
/// `class_change_wakes` says wait for it.
pub fn snapshots_woken_by_class<'a>(
    class: &VolumeSnapshotClass,
    snapshots: impl IntoIterator<Item = &'a VolumeSnapshot>,
) -> Vec<String> {
    snapshots.into_iter().filter(|snapshot| class_change_wakes(class, snapshot)).map(snapshot_key).collect()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use snapshot_api::VolumeSnapshotStatus;

    use super::*;
    use crate::translate::common::fixtures::*;

    fn member() -> VolumeSnapshot {
        let mut vs = snapshot_of_claim("ns", "snap", "uid-1", "data");
        vs.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "groupsnapshot.storage.k8s.io/v1".into(),
            kind: "VolumeGroupSnapshot".into(),
            name: "group".into(),
            uid: "g".into(),
            ..Default::default()
        }]);
        vs
    }

    #[test]
    fn what_to_look_up() {
        let mut named = snapshot_of_claim("ns", "snap", "uid-1", "data");
        named.spec.volume_snapshot_class_name = Some("gold".into());
        // (rule, snapshot, lookup)
        let table = [
            ("named class", named, ClassLookup::Named("gold")),
            ("unnamed dynamic: default", snapshot_of_claim("ns", "snap", "uid-1", "data"), ClassLookup::Default),
            ("pre-provisioned: none", snapshot_of_content("ns", "snap", "uid-1", "c"), ClassLookup::NotNeeded),
            ("group member: none", member(), ClassLookup::NotNeeded),
        ];
        for (rule, vs, want) in table {
            assert_eq!(class_lookup(&vs), want, "{rule}");
        }
    }

    #[test]
    fn named_class_missing() {
        let vs = snapshot_of_claim("ns", "snap", "uid-1", "data");
        let failure = class_missing("gold");
        assert_eq!(failure.reason, "GetSnapshotClassFailed");
        assert_eq!(
            failure.message,
            r#"Failed to get snapshot class with error volumesnapshotclass.snapshot.storage.k8s.io "gold" not found"#
        );
        assert_eq!(
            failure.record,
            crate::translate::common::status_error::Record::StatusError { ready_to_false: false }
        );
        assert!(!sync_continues_without_class(&vs));
        let mut deleting = vs;
        deleting.metadata.deletion_timestamp = Some(time(1));
        assert!(sync_continues_without_class(&deleting), "a snapshot being deleted is still processed");
    }

    #[test]
    fn default_class_selection() {
        let other = "other.csi.k8s.io";
        // (rule, classes, chosen class or error text)
        let table: Vec<(&str, Vec<VolumeSnapshotClass>, Result<&str, &str>)> = vec![
            (
                "the one default of the driver",
                vec![class("a", DRIVER, Some("true"), &[]), class("b", DRIVER, None, &[])],
                Ok("a"),
            ),
            (
                "default of another driver ignored",
                vec![class("a", other, Some("true"), &[]), class("b", DRIVER, Some("true"), &[])],
                Ok("b"),
            ),
            (
                "value must be exactly true",
                vec![class("a", DRIVER, Some("True"), &[])],
                Err("cannot find default snapshot class"),
            ),
            (
                "annotation false",
                vec![class("a", DRIVER, Some("false"), &[])],
                Err("cannot find default snapshot class"),
            ),
            ("no class at all", vec![], Err("cannot find default snapshot class")),
            (
                "several defaults are named",
                vec![class("z", DRIVER, Some("true"), &[]), class("a", DRIVER, Some("true"), &[])],
                Err("2 default snapshot classes were found: a, z"),
            ),
        ];
        for (rule, classes, want) in table {
            match (default_class(&classes, DRIVER), want) {
                (Ok(chosen), Ok(name)) => {
                    assert_eq!(chosen.class.name_any(), name, "{rule}");
                    let vs = snapshot_of_claim("ns", "snap", "uid-1", "data");
                    assert_eq!(
                        chosen.patch.apply(&vs).spec.volume_snapshot_class_name.as_deref(),
                        Some(name),
                        "{rule}"
                    );
                }
                (Err(failure), Err(text)) => {
                    assert_eq!(failure.reason, "SetDefaultSnapshotClassFailed", "{rule}");
                    assert_eq!(
                        failure.message,
                        format!("Failed to set default snapshot class with error {text}"),
                        "{rule}"
                    );
                    assert_eq!(failure.error.as_deref(), Some(text), "{rule}");
                }
                (got, want) => panic!("{rule}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn a_new_class_wakes_the_snapshots_waiting_for_it() {
        let mut named = snapshot_of_claim("ns", "snap", "uid-1", "data");
        named.spec.volume_snapshot_class_name = Some("gold".into());
        let mut bound = snapshot_of_claim("ns", "snap", "uid-1", "data");
        bound.status =
            Some(VolumeSnapshotStatus { bound_volume_snapshot_content_name: Some("c".into()), ..Default::default() });
        let unnamed = snapshot_of_claim("ns", "snap", "uid-1", "data");
        let gold = class("gold", DRIVER, None, &[]);
        let default = class("silver", DRIVER, Some("true"), &[]);
        // (rule, class, snapshot, wakes)
        let table = [
            ("beyond: the class a snapshot names", &gold, &named, true),
            ("beyond: another class", &default, &named, false),
            ("beyond: a default class for an unnamed snapshot", &default, &unnamed, true),
            ("beyond: a non-default class for an unnamed snapshot", &gold, &unnamed, false),
            ("beyond: a bound snapshot waits for nothing", &default, &bound, false),
        ];
        for (rule, class, vs, want) in table {
            assert_eq!(class_change_wakes(class, vs), want, "{rule}");
        }
        let mut other_named = named.clone();
        other_named.metadata.name = Some("other".into());
        let snapshots = [named, unnamed, bound, other_named];
        assert_eq!(snapshots_woken_by_class(&gold, &snapshots), ["ns/snap", "ns/other"], "the keys of those it wakes");
    }
}
