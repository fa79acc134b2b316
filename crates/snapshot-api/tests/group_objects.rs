//! Group snapshot objects as upstream's controllers write them read back unchanged.

use serde_json::{Value, json};
use snapshot_api::{DeletionPolicy, VolumeGroupSnapshot, VolumeGroupSnapshotClass, VolumeGroupSnapshotContent};

fn round_trip<T: serde::de::DeserializeOwned + serde::Serialize>(object: Value) -> T {
    let typed: T = serde_json::from_value(object.clone()).unwrap();
    assert_eq!(serde_json::to_value(&typed).unwrap(), object);
    typed
}

#[test]
fn dynamic_group_snapshot_and_its_content() {
    let group: VolumeGroupSnapshot = round_trip(json!({
        "apiVersion": "groupsnapshot.storage.k8s.io/v1",
        "kind": "VolumeGroupSnapshot",
        "metadata": {"name": "g", "namespace": "ns", "uid": "u-1"},
        "spec": {
            "source": {"selector": {"matchLabels": {"app": "db"}, "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["a", "b"]}
            ]}},
            "volumeGroupSnapshotClassName": "fast"
        },
        "status": {
            "boundVolumeGroupSnapshotContentName": "groupsnapcontent-u-1",
            "creationTime": "2026-11-24T10:00:00Z",
            "readyToUse": true
        }
    }));
    assert_eq!(group.spec.volume_group_snapshot_class_name.as_deref(), Some("fast"));

    let content: VolumeGroupSnapshotContent = round_trip(json!({
        "apiVersion": "groupsnapshot.storage.k8s.io/v1",
        "kind": "VolumeGroupSnapshotContent",
        "metadata": {"name": "groupsnapcontent-u-1"},
        "spec": {
            "deletionPolicy": "Retain",
            "driver": "hostpath.csi.k8s.io",
            "source": {"volumeHandles": ["vol-1", "vol-2"]},
            "volumeGroupSnapshotClassName": "fast",
            "volumeGroupSnapshotRef": {"kind": "VolumeGroupSnapshot", "name": "g", "namespace": "ns", "uid": "u-1"}
        },
        "status": {
            "volumeGroupSnapshotHandle": "gs-1",
            "creationTime": "2026-11-24T10:00:00Z",
            "readyToUse": false,
            "error": {"message": "not yet", "time": "2026-11-24T10:00:01Z"},
            "volumeSnapshotInfoList": [
                {"volumeHandle": "vol-1", "snapshotHandle": "s-1", "creationTime": 1_764_000_000_000_000_000_i64,
                 "readyToUse": true, "restoreSize": 1024},
                {"volumeHandle": "vol-2", "snapshotHandle": "s-2", "readyToUse": false}
            ]
        }
    }));
    assert_eq!(content.spec.deletion_policy, DeletionPolicy::Retain);
    let infos = content.status.unwrap().volume_snapshot_info_list.unwrap();
    assert_eq!(infos[0].creation_time, Some(1_764_000_000_000_000_000));
    assert_eq!(infos[1].restore_size, None);
}

#[test]
fn pre_provisioned_content_and_class() {
    let content: VolumeGroupSnapshotContent = round_trip(json!({
        "apiVersion": "groupsnapshot.storage.k8s.io/v1",
        "kind": "VolumeGroupSnapshotContent",
        "metadata": {"name": "imported"},
        "spec": {
            "deletionPolicy": "Delete",
            "driver": "d",
            "source": {"groupSnapshotHandles": {"volumeGroupSnapshotHandle": "gs", "volumeSnapshotHandles": ["a", "b"]}},
            "volumeGroupSnapshotRef": {"name": "g", "namespace": "ns"}
        }
    }));
    let handles = content.spec.source.group_snapshot_handles.unwrap();
    assert_eq!(handles.volume_snapshot_handles, ["a", "b"]);

    let class: VolumeGroupSnapshotClass = round_trip(json!({
        "apiVersion": "groupsnapshot.storage.k8s.io/v1",
        "kind": "VolumeGroupSnapshotClass",
        "metadata": {"name": "fast", "annotations": {"groupsnapshot.storage.kubernetes.io/is-default-class": "true"}},
        "driver": "d",
        "parameters": {"type": "consistent"},
        "deletionPolicy": "Delete"
    }));
    assert_eq!(class.spec.driver, "d");
}
