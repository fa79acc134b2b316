//! Objects the sidecar's tests start from: a dynamic content of the driver `hostpath.csi.k8s.io`, bound to the
//! VolumeSnapshot `default/snap` (UID `3f1c5e2a-6b7d-4e8f-9a0b-1c2d3e4f5a6b`), and its class.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference;
use snapshot_api::{
    DeletionPolicy, VolumeSnapshotClass, VolumeSnapshotContent, VolumeSnapshotContentSource, VolumeSnapshotContentSpec,
};

use super::Snapshotter;

pub const DRIVER: &str = "hostpath.csi.k8s.io";
pub const SNAPSHOT_UID: &str = "3f1c5e2a-6b7d-4e8f-9a0b-1c2d3e4f5a6b";

pub fn snapshotter() -> Snapshotter {
    Snapshotter::new(DRIVER)
}

pub fn content() -> VolumeSnapshotContent {
    let mut content = VolumeSnapshotContent::new(
        "snapcontent-1",
        VolumeSnapshotContentSpec {
            volume_snapshot_ref: ObjectReference {
                name: Some("snap".into()),
                namespace: Some("default".into()),
                uid: Some(SNAPSHOT_UID.into()),
                ..Default::default()
            },
            deletion_policy: DeletionPolicy::Delete,
            driver: DRIVER.into(),
            volume_snapshot_class_name: Some("class".into()),
            source: VolumeSnapshotContentSource { volume_handle: Some("vol-1".into()), snapshot_handle: None },
            source_volume_mode: None,
        },
    );
    content.metadata.resource_version = Some("7".into());
    content
}

/// The same content, pre-provisioned: it names the snapshot handle and no class.
pub fn pre_provisioned() -> VolumeSnapshotContent {
    let mut content = content();
    content.spec.source = VolumeSnapshotContentSource { volume_handle: None, snapshot_handle: Some("snap-7".into()) };
    content.spec.volume_snapshot_class_name = None;
    content
}

/// The class `class` of [`DRIVER`]; no `parameters` field at all when `parameters` is empty.
pub fn class(parameters: &[(&str, &str)]) -> VolumeSnapshotClass {
    let mut class = serde_json::json!({
        "apiVersion": "snapshot.storage.k8s.io/v1",
        "kind": "VolumeSnapshotClass",
        "metadata": {"name": "class"},
        "driver": DRIVER,
        "deletionPolicy": "Delete",
    });
    if !parameters.is_empty() {
        let parameters: BTreeMap<&str, &str> = parameters.iter().copied().collect();
        class["parameters"] = serde_json::json!(parameters);
    }
    serde_json::from_value(class).expect("a valid VolumeSnapshotClass")
}

pub fn annotate(mut content: VolumeSnapshotContent, key: &str, value: &str) -> VolumeSnapshotContent {
    content.metadata.annotations.get_or_insert_with(BTreeMap::new).insert(key.into(), value.into());
    content
}
