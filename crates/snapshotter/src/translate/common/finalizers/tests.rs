use snapshot_api::VolumeSnapshotStatus;

use super::*;
use crate::translate::common::fixtures::*;

const AS_SOURCE: &str = "snapshot.storage.kubernetes.io/volumesnapshot-as-source-protection";
const BOUND: &str = "snapshot.storage.kubernetes.io/volumesnapshot-bound-protection";
const PVC: &str = "snapshot.storage.kubernetes.io/pvc-as-source-protection";

fn snapshot(bound: bool, finalizers: &[&str], deleting: bool, ready: Option<bool>) -> VolumeSnapshot {
    let mut vs = snapshot_of_claim("ns", "snap", "uid-1", "data");
    vs.metadata.finalizers = (!finalizers.is_empty()).then(|| finalizers.iter().map(|f| f.to_string()).collect());
    vs.metadata.deletion_timestamp = deleting.then(|| time(1));
    vs.status = Some(VolumeSnapshotStatus {
        bound_volume_snapshot_content_name: bound.then(|| "snapcontent-uid-1".into()),
        ready_to_use: ready,
        ..Default::default()
    });
    vs
}

#[test]
fn snapshot_finalizers_added() {
    let delete = content_for("snapcontent-uid-1", "ns", "snap", "uid-1", ContentSourceKind::Volume);
    let mut retain = delete.clone();
    retain.spec.deletion_policy = DeletionPolicy::Retain;
    // (rule, snapshot, content, finalizers after or no write)
    type Row<'a> = (&'a str, VolumeSnapshot, Option<&'a VolumeSnapshotContent>, Option<Vec<&'a str>>);
    let table: Vec<Row> = vec![
        ("as-source always", snapshot(false, &[], false, None), None, Some(vec![AS_SOURCE])),
        ("bound + Delete: both", snapshot(true, &[], false, None), Some(&delete), Some(vec![AS_SOURCE, BOUND])),
        ("bound + Retain: as-source only", snapshot(true, &[], false, None), Some(&retain), Some(vec![AS_SOURCE])),
        ("bound, content not found: as-source only", snapshot(true, &[], false, None), None, Some(vec![AS_SOURCE])),
        ("not bound: no bound finalizer", snapshot(false, &[], false, None), Some(&delete), Some(vec![AS_SOURCE])),
        (
            "others kept, appended",
            snapshot(true, &["x"], false, None),
            Some(&delete),
            Some(vec!["x", AS_SOURCE, BOUND]),
        ),
        ("all present: no write", snapshot(true, &[AS_SOURCE, BOUND], false, None), Some(&delete), None),
        ("being deleted: nothing added", snapshot(true, &[], true, None), Some(&delete), None),
    ];
    for (rule, vs, content, want) in table {
        let patch = snapshot_finalizers(&vs, content);
        let got = patch.map(|p| p.apply(&vs).metadata.finalizers.unwrap_or_default());
        assert_eq!(got, want.map(|l| l.iter().map(|f| f.to_string()).collect::<Vec<_>>()), "{rule}");
    }
}

#[test]
fn claim_finalizer_before_a_content_is_created() {
    let vs = snapshot_of_claim("ns", "snap", "uid-1", "data");
    let plain = claim("ns", "data", "c-1", "pv-1", "Bound");
    let mut protected = plain.clone();
    protected.metadata.finalizers = Some(vec![PVC.into()]);
    let mut deleting = plain.clone();
    deleting.metadata.deletion_timestamp = Some(time(1));
    let mut deleting_protected = protected.clone();
    deleting_protected.metadata.deletion_timestamp = Some(time(1));
    // (rule, claim, Ok(adds) or Err(status error message))
    let table = [
        ("added", Some(&plain), Ok(true)),
        ("present: nothing", Some(&protected), Ok(false)),
        ("present on a claim being deleted: fine", Some(&deleting_protected), Ok(false)),
        (
            "claim being deleted",
            Some(&deleting),
            Err(
                "Failed to create snapshot content with error snapshot controller failed to update data on API server: cannot add finalizer on claim because it is being deleted",
            ),
        ),
        (
            "claim missing",
            None,
            Err(
                "Failed to create snapshot content with error snapshot controller failed to update snap on API server: cannot get claim from snapshot: persistentvolumeclaims \"data\" not found",
            ),
        ),
    ];
    for (rule, claim, want) in table {
        let got = claim_finalizer_before_create(&vs, claim);
        match (got, want) {
            (Ok(patch), Ok(adds)) => {
                assert_eq!(patch.is_some(), adds, "{rule}");
                if let (Some(patch), Some(claim)) = (patch, claim) {
                    assert_eq!(patch.apply(claim).metadata.finalizers, Some(vec![PVC.to_string()]), "{rule}");
                    assert_eq!(patch.metadata.resource_version.as_deref(), Some("11"), "{rule}: optimistic lock");
                }
            }
            (Err(failure), Err(message)) => {
                assert_eq!(failure.reason, "SnapshotContentCreationFailed", "{rule}");
                assert_eq!(failure.message, message, "{rule}");
            }
            (got, want) => panic!("{rule}: got {got:?}, want {want:?}"),
        }
    }
}

#[test]
fn claim_finalizer_removed_when_no_snapshot_is_being_cut() {
    let mut protected = claim("ns", "data", "c-1", "pv-1", "Bound");
    protected.metadata.finalizers = Some(vec!["other".into(), PVC.into()]);
    let plain = claim("ns", "data", "c-1", "pv-1", "Bound");
    let current = snapshot(true, &[], false, Some(false));
    let mut other_not_ready = snapshot(true, &[], false, Some(false));
    other_not_ready.metadata.name = Some("other".into());
    let mut other_ready = other_not_ready.clone();
    other_ready.status.as_mut().unwrap().ready_to_use = Some(true);
    let mut other_claim = other_not_ready.clone();
    other_claim.spec.source.persistent_volume_claim_name = Some("else".into());
    let preprovisioned = snapshot_of_content("ns", "pre", "uid-9", "c");
    let ready_current = snapshot(true, &[], false, Some(true));
    // (rule, claim, snapshots in the namespace, skip current, removed)
    let table: Vec<(&str, &PersistentVolumeClaim, Vec<&VolumeSnapshot>, bool, bool)> = vec![
        ("current not ready keeps it", &protected, vec![&current], false, false),
        ("current ready: removed", &protected, vec![&ready_current], false, true),
        ("current skipped while it is deleted", &protected, vec![&current], true, true),
        ("another unready snapshot of the claim keeps it", &protected, vec![&current, &other_not_ready], true, false),
        ("another ready snapshot does not", &protected, vec![&current, &other_ready], true, true),
        ("snapshots of other claims do not", &protected, vec![&current, &other_claim], true, true),
        ("pre-provisioned snapshots excluded", &protected, vec![&preprovisioned], false, true),
        ("no finalizer: nothing to write", &plain, vec![], false, false),
    ];
    for (rule, claim, snapshots, skip_current, removed) in table {
        let skip = skip_current.then_some(&current);
        let patch = claim_finalizer_removal(claim, snapshots.iter().copied(), skip);
        assert_eq!(patch.is_some(), removed, "{rule}");
        if let Some(patch) = patch {
            assert_eq!(patch.apply(claim).metadata.finalizers, Some(vec!["other".to_string()]), "{rule}: others kept");
        }
    }
    assert_eq!(
        claim_finalizer_removal_failed("conflict").event(),
        sidecar_runtime::events::PlannedEvent::warning(
            "ErrorPVCFinalizer",
            "Error check and remove PVC Finalizer for VolumeSnapshot"
        )
    );
}
