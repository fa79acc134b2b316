use k8s_openapi::api::core::v1::TypedLocalObjectReference;
use snapshot_api::VolumeSnapshotStatus;

use super::*;
use crate::translate::common::fixtures::*;

const AS_SOURCE: &str = "snapshot.storage.kubernetes.io/volumesnapshot-as-source-protection";
const BOUND: &str = "snapshot.storage.kubernetes.io/volumesnapshot-bound-protection";
const IN_GROUP: &str = "snapshot.storage.kubernetes.io/volumesnapshot-in-group-protection";

fn deleting(finalizers: &[&str], bound: Option<&str>, group: Option<&str>) -> VolumeSnapshot {
    let mut vs = snapshot_of_claim("ns", "snap", "uid-1", "data");
    vs.metadata.deletion_timestamp = Some(time(1));
    vs.metadata.finalizers = Some(finalizers.iter().map(|f| f.to_string()).collect());
    vs.status = Some(VolumeSnapshotStatus {
        bound_volume_snapshot_content_name: bound.map(str::to_string),
        volume_group_snapshot_name: group.map(str::to_string),
        ..Default::default()
    });
    vs
}

fn content(policy: DeletionPolicy, uid: &str) -> VolumeSnapshotContent {
    let mut content = content_for("c", "ns", "snap", uid, ContentSourceKind::Volume);
    content.spec.deletion_policy = policy;
    content
}

fn restore(snapshot: &str, kind: &str, group: Option<&str>, phase: &str) -> PersistentVolumeClaim {
    let mut claim = claim("ns", "restored", "c-9", "", phase);
    claim.spec.as_mut().unwrap().data_source = Some(TypedLocalObjectReference {
        api_group: group.map(str::to_string),
        kind: kind.into(),
        name: snapshot.into(),
    });
    claim
}

#[test]
fn which_content() {
    // (rule, snapshot, content name)
    let table = [
        ("the bound content", deleting(&[AS_SOURCE], Some("c"), None), Some("c")),
        ("dynamic without status: the dynamic name", deleting(&[AS_SOURCE], None, None), Some("snapcontent-uid-1")),
        ("pre-provisioned without status: none", snapshot_of_content("ns", "snap", "uid-1", "c"), None),
    ];
    for (rule, vs, want) in table {
        assert_eq!(deletion_content_name(&vs).as_deref(), want, "{rule}");
    }
}

#[test]
fn deletion_by_policy() {
    let delete = content(DeletionPolicy::Delete, "uid-1");
    let retain = content(DeletionPolicy::Retain, "uid-1");
    let elsewhere = content(DeletionPolicy::Delete, "uid-2");
    let mut marked = delete.clone();
    marked.metadata.annotations =
        Some([("snapshot.storage.kubernetes.io/volumesnapshot-being-deleted".to_string(), "yes".to_string())].into());
    let both = deleting(&[AS_SOURCE, BOUND], Some("c"), None);
    // (rule, snapshot, content, (annotated, deleted, finalizers left) or not processed)
    type Want = Option<(bool, bool, Vec<&'static str>)>;
    let table: Vec<(&str, VolumeSnapshot, Option<&VolumeSnapshotContent>, Want)> = vec![
        (
            "Delete: content deleted, bound finalizer waits",
            both.clone(),
            Some(&delete),
            Some((true, true, vec![BOUND])),
        ),
        ("Retain: annotated, kept, finalizers off", both.clone(), Some(&retain), Some((true, false, vec![]))),
        ("content of another snapshot untouched", both.clone(), Some(&elsewhere), Some((false, false, vec![]))),
        ("no content: finalizers off", both.clone(), None, Some((false, false, vec![]))),
        ("annotation already there", both.clone(), Some(&marked), Some((false, true, vec![BOUND]))),
        (
            "other finalizers kept",
            deleting(&["x", AS_SOURCE, BOUND], Some("c"), None),
            Some(&retain),
            Some((true, false, vec!["x"])),
        ),
        ("no finalizer of ours: not processed", deleting(&["x"], Some("c"), None), Some(&delete), None),
    ];
    for (rule, vs, content, want) in table {
        let got = snapshot_deletion(&vs, content, [], false).unwrap().map(|d| {
            let left = match &d.finalizers {
                Some(patch) => patch.apply(&vs).metadata.finalizers.unwrap_or_default(),
                None => vs.metadata.finalizers.clone().unwrap_or_default(),
            };
            (d.content_annotation.is_some(), d.delete_content.is_some(), left)
        });
        let want = want.map(|(a, d, l)| (a, d, l.iter().map(|f| f.to_string()).collect::<Vec<_>>()));
        assert_eq!(got, want, "{rule}");
    }
    let deletion = snapshot_deletion(&both, Some(&delete), [], false).unwrap().unwrap();
    assert_eq!(deletion.delete_content.as_deref(), Some("c"));
    assert_eq!(
        deletion.content_annotation.unwrap().apply(&delete).annotations()["snapshot.storage.kubernetes.io/volumesnapshot-being-deleted"],
        "yes"
    );
}

#[test]
fn pending_restores_hold_the_deletion() {
    let vs = deleting(&[AS_SOURCE, BOUND], Some("c"), None);
    let delete = content(DeletionPolicy::Delete, "uid-1");
    let group = Some("snapshot.storage.k8s.io");
    // (rule, claim, content present, refused)
    let table = [
        ("pending restore", restore("snap", "VolumeSnapshot", group, "Pending"), true, true),
        ("restore done", restore("snap", "VolumeSnapshot", group, "Bound"), true, false),
        ("another snapshot", restore("other", "VolumeSnapshot", group, "Pending"), true, false),
        ("other kind", restore("snap", "PersistentVolumeClaim", None, "Pending"), true, false),
        ("other group", restore("snap", "VolumeSnapshot", Some("example.com"), "Pending"), true, false),
        ("only checked when the content exists", restore("snap", "VolumeSnapshot", group, "Pending"), false, false),
    ];
    for (rule, claim, with_content, refused) in table {
        let content = with_content.then_some(&delete);
        let result = snapshot_deletion(&vs, content, [&claim], false);
        assert_eq!(result.is_err(), refused, "{rule}");
        if let Err(failure) = result {
            assert_eq!(
                failure.event(),
                PlannedEvent::warning("SnapshotDeletePending", "Snapshot is being used to restore a PVC")
            );
            assert_eq!(
                failure.error.as_deref(),
                Some("snapshot ns/snap is in use (being used to restore a PVC), will retry deletion")
            );
        }
    }
}

#[test]
fn group_members() {
    let member = deleting(&[AS_SOURCE, IN_GROUP], Some("c"), Some("group"));
    let retain = content(DeletionPolicy::Retain, "uid-1");
    let refused = snapshot_deletion(&member, Some(&retain), [], true).unwrap_err();
    assert_eq!(refused.reason, "SnapshotDeletePending", "group still there");
    assert_eq!(
        refused.message,
        "deletion of the individual volume snapshot ns/snap is not allowed as it belongs to group snapshot ns/group. \
         Deleting the group snapshot will trigger the deletion of all the individual volume snapshots that are part of \
         the group."
    );
    let deletion = snapshot_deletion(&member, Some(&retain), [], false).unwrap().unwrap();
    assert_eq!(deletion.finalizers.unwrap().apply(&member).metadata.finalizers, None, "group gone: all off");
}

#[test]
fn content_delete_failure() {
    let (event, error) = content_delete_failed("c", "forbidden");
    assert_eq!(
        event,
        PlannedEvent::warning("SnapshotContentObjectDeleteError", "Failed to delete snapshot content API object")
    );
    assert_eq!(error, r#"failed to delete VolumeSnapshotContent c from API server: "forbidden""#);
}
