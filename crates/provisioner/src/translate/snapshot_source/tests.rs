use std::collections::BTreeMap;

use csi_client::proto::volume_content_source::{SnapshotSource, Type};
use k8s_openapi::api::core::v1::{
    ObjectReference, PersistentVolumeClaimSpec, PersistentVolumeClaimStatus, TypedLocalObjectReference,
    TypedObjectReference, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use snapshot_api::{
    DeletionPolicy, VolumeSnapshotContentSource, VolumeSnapshotContentSpec, VolumeSnapshotContentStatus,
    VolumeSnapshotSource, VolumeSnapshotSpec, VolumeSnapshotStatus,
};

use super::*;
use crate::translate::refusal::ProvisioningState;

const DRIVER: &str = "hostpath.csi.k8s.io";

fn claim(size: &str, mode: Option<&str>) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: ObjectMeta { name: Some("restored".into()), namespace: Some("apps".into()), ..Default::default() },
        spec: Some(PersistentVolumeClaimSpec {
            volume_mode: mode.map(str::to_string),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([("storage".to_string(), Quantity(size.into()))])),
                ..Default::default()
            }),
            data_source: Some(TypedLocalObjectReference {
                kind: "VolumeSnapshot".into(),
                api_group: Some("snapshot.storage.k8s.io".into()),
                name: "snap".into(),
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn snapshot(ready: bool, restore_size: Option<&str>) -> VolumeSnapshot {
    let mut snapshot = VolumeSnapshot::new(
        "snap",
        VolumeSnapshotSpec {
            source: VolumeSnapshotSource { persistent_volume_claim_name: Some("origin".into()), ..Default::default() },
            volume_snapshot_class_name: None,
        },
    );
    snapshot.metadata.namespace = Some("apps".into());
    snapshot.metadata.uid = Some("snap-uid".into());
    snapshot.status = Some(VolumeSnapshotStatus {
        bound_volume_snapshot_content_name: Some("content".into()),
        ready_to_use: Some(ready),
        restore_size: restore_size.map(|s| Quantity(s.into())),
        ..Default::default()
    });
    snapshot
}

fn content(driver: &str, handle: Option<&str>, mode: Option<&str>) -> VolumeSnapshotContent {
    let mut content = VolumeSnapshotContent::new(
        "content",
        VolumeSnapshotContentSpec {
            volume_snapshot_ref: ObjectReference {
                name: Some("snap".into()),
                namespace: Some("apps".into()),
                uid: Some("snap-uid".into()),
                ..Default::default()
            },
            deletion_policy: DeletionPolicy::Delete,
            driver: driver.into(),
            volume_snapshot_class_name: None,
            source: VolumeSnapshotContentSource { volume_handle: Some("vol-1".into()), snapshot_handle: None },
            source_volume_mode: mode.map(str::to_string),
        },
    );
    content.status =
        Some(VolumeSnapshotContentStatus { snapshot_handle: handle.map(str::to_string), ..Default::default() });
    content
}

fn source() -> DataSource {
    DataSource {
        kind: "VolumeSnapshot".into(),
        name: "snap".into(),
        api_group: "snapshot.storage.k8s.io".into(),
        namespace: "apps".into(),
    }
}

fn with<T>(mut value: T, change: impl FnOnce(&mut T)) -> T {
    change(&mut value);
    value
}

fn deleting(mut snapshot: VolumeSnapshot, finalizer: bool) -> VolumeSnapshot {
    snapshot.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
    if finalizer {
        snapshot.metadata.finalizers = Some(vec![FINALIZER_SNAPSHOT_SOURCE_PROTECTION.into()]);
    }
    snapshot
}

fn allow_mode_change(value: &str) -> VolumeSnapshotContent {
    with(content(DRIVER, Some("snap-h"), Some("Filesystem")), |c| {
        c.metadata.annotations = Some(BTreeMap::from([(ANN_ALLOW_VOLUME_MODE_CHANGE.to_string(), value.to_string())]));
    })
}

/// (rule, claim, snapshot, content, prevent conversion, result: Ok(snapshot id) | Err(message))
type Row = (
    &'static str,
    PersistentVolumeClaim,
    Option<VolumeSnapshot>,
    Option<VolumeSnapshotContent>,
    bool,
    Result<String, String>,
);

#[test]
fn restore_checks() {
    let not_bound = Err("snapshot snap not bound".to_string());
    let ok = Ok("snap-h".to_string());
    let mode_denied =
        "requested volume apps/restored modifies the mode of the source volume but does not have permission to do so. ";
    let table: Vec<Row> = vec![
        ("52: ready snapshot", claim("1Gi", None), Some(snapshot(true, Some("1Gi"))), Some(content(DRIVER, Some("snap-h"), None)), true, ok.clone()),
        (
            "52: snapshot missing",
            claim("1Gi", None),
            None,
            None,
            true,
            Err("error getting snapshot snap from api server: volumesnapshots.snapshot.storage.k8s.io \"snap\" not found".into()),
        ),
        ("52: being deleted", claim("1Gi", None), Some(deleting(snapshot(true, None), false)), Some(content(DRIVER, Some("snap-h"), None)), true, Err("snapshot snap is being deleted".into())),
        ("52: being deleted with our finalizer continues", claim("1Gi", None), Some(deleting(snapshot(true, None), true)), Some(content(DRIVER, Some("snap-h"), None)), true, ok.clone()),
        ("52: not bound", claim("1Gi", None), Some(with(snapshot(true, None), |s| s.status = None)), None, true, not_bound.clone()),
        ("52: content missing", claim("1Gi", None), Some(snapshot(true, None)), None, true, not_bound.clone()),
        (
            "52: content bound to another snapshot",
            claim("1Gi", None),
            Some(snapshot(true, None)),
            Some(with(content(DRIVER, Some("snap-h"), None), |c| c.spec.volume_snapshot_ref.uid = Some("other".into()))),
            true,
            not_bound.clone(),
        ),
        ("52: content of another driver", claim("1Gi", None), Some(snapshot(true, None)), Some(content("other.csi", Some("snap-h"), None)), true, not_bound.clone()),
        ("52: not ready", claim("1Gi", None), Some(snapshot(false, None)), Some(content(DRIVER, Some("snap-h"), None)), true, Err("snapshot snap is not Ready".into())),
        ("52: no handle", claim("1Gi", None), Some(snapshot(true, None)), Some(content(DRIVER, None, None)), true, Err("snapshot handle snap is not available".into())),
        (
            "52: request below the restore size",
            claim("1Gi", None),
            Some(snapshot(true, Some("2Gi"))),
            Some(content(DRIVER, Some("snap-h"), None)),
            true,
            Err("requested volume size 1073741824 is less than the size 2147483648 for the source snapshot snap".into()),
        ),
        ("52: request above the restore size is fine", claim("3Gi", None), Some(snapshot(true, Some("2Gi"))), Some(content(DRIVER, Some("snap-h"), None)), true, ok.clone()),
        (
            "53: mode change without permission",
            claim("1Gi", Some("Block")),
            Some(snapshot(true, None)),
            Some(content(DRIVER, Some("snap-h"), Some("Filesystem"))),
            true,
            Err(format!("{mode_denied}{ANN_ALLOW_VOLUME_MODE_CHANGE} annotation is not present on snapshotcontent content")),
        ),
        ("53: mode change allowed by the content", claim("1Gi", Some("Block")), Some(snapshot(true, None)), Some(allow_mode_change("true")), true, ok.clone()),
        (
            "53: mode change refused by the content",
            claim("1Gi", Some("Block")),
            Some(snapshot(true, None)),
            Some(allow_mode_change("false")),
            true,
            Err(format!("{mode_denied}{ANN_ALLOW_VOLUME_MODE_CHANGE} is set to false on snapshotcontent content")),
        ),
        (
            "53: unparsable permission",
            claim("1Gi", Some("Block")),
            Some(snapshot(true, None)),
            Some(allow_mode_change("yes")),
            true,
            Err(format!("{mode_denied}failed to convert {ANN_ALLOW_VOLUME_MODE_CHANGE} annotation value to boolean with error: strconv.ParseBool: parsing \"yes\": invalid syntax")),
        ),
        ("53: same mode", claim("1Gi", Some("Filesystem")), Some(snapshot(true, None)), Some(content(DRIVER, Some("snap-h"), Some("Filesystem"))), true, ok.clone()),
        ("53: check off", claim("1Gi", Some("Block")), Some(snapshot(true, None)), Some(content(DRIVER, Some("snap-h"), Some("Filesystem"))), false, ok.clone()),
        ("53: claim without a mode is not held to it", claim("1Gi", None), Some(snapshot(true, None)), Some(content(DRIVER, Some("snap-h"), Some("Block"))), true, ok.clone()),
    ];
    for (rule, claim, snapshot, content, prevent, want) in table {
        let got = snapshot_restore(&claim, &source(), snapshot.as_ref(), content.as_ref(), DRIVER, prevent)
            .map(|restore| match restore.content_source.r#type {
                Some(Type::Snapshot(SnapshotSource { snapshot_id })) => snapshot_id,
                other => panic!("{rule}: {other:?}"),
            })
            .map_err(|refusal| {
                assert_eq!(refusal.state, ProvisioningState::NoChange, "{rule}: the snapshot may still get ready");
                refusal.message
            });
        assert_eq!(got, want, "{rule}");
    }
}

#[test]
fn larger_requests_are_noted() {
    let restore = snapshot_restore(
        &claim("3Gi", None),
        &source(),
        Some(&snapshot(true, Some("2Gi"))),
        Some(&content(DRIVER, Some("h"), None)),
        DRIVER,
        true,
    )
    .unwrap();
    assert!(restore.larger_than_snapshot.unwrap().contains("Volume plugin needs to handle volume expansion"));
    let restore = snapshot_restore(
        &claim("2Gi", None),
        &source(),
        Some(&snapshot(true, Some("2Gi"))),
        Some(&content(DRIVER, Some("h"), None)),
        DRIVER,
        true,
    )
    .unwrap();
    assert_eq!(restore.larger_than_snapshot, None);
}

fn restoring(name: &str, namespace: &str, phase: Option<&str>, by_ref: Option<Option<&str>>) -> PersistentVolumeClaim {
    let mut claim = claim("1Gi", None);
    claim.metadata.name = Some(name.into());
    claim.metadata.namespace = Some(namespace.into());
    claim.status = phase.map(|p| PersistentVolumeClaimStatus { phase: Some(p.into()), ..Default::default() });
    if let Some(ref_namespace) = by_ref {
        let spec = claim.spec.as_mut().unwrap();
        spec.data_source = None;
        spec.data_source_ref = Some(TypedObjectReference {
            kind: "VolumeSnapshot".into(),
            api_group: Some("snapshot.storage.k8s.io".into()),
            name: "snap".into(),
            namespace: ref_namespace.map(str::to_string),
        });
    }
    claim
}

#[test]
fn orphan_sweep() {
    let protected =
        with(snapshot(true, None), |s| s.metadata.finalizers = Some(vec![FINALIZER_SNAPSHOT_SOURCE_PROTECTION.into()]));
    // (rule, snapshot, claims, releasable)
    let table = [
        ("54: no finalizer, nothing to do", snapshot(true, None), vec![], false),
        ("54: no claim restores from it", protected.clone(), vec![], true),
        (
            "54: a pending restore keeps it",
            protected.clone(),
            vec![restoring("a", "apps", Some("Pending"), None)],
            false,
        ),
        ("54: a claim without a phase keeps it", protected.clone(), vec![restoring("a", "apps", None, None)], false),
        ("54: a bound restore does not", protected.clone(), vec![restoring("a", "apps", Some("Bound"), None)], true),
        (
            "54: a pending claim elsewhere does not",
            protected.clone(),
            vec![restoring("a", "other", Some("Pending"), None)],
            true,
        ),
        (
            "54: dataSourceRef counts",
            protected.clone(),
            vec![restoring("a", "apps", Some("Pending"), Some(None))],
            false,
        ),
        (
            "54: a cross-namespace dataSourceRef counts",
            protected.clone(),
            vec![restoring("a", "other", Some("Pending"), Some(Some("apps")))],
            false,
        ),
    ];
    for (rule, snapshot, claims, want) in table {
        assert_eq!(source_protection_releasable(&snapshot, claims.iter()), want, "{rule}");
    }
}
