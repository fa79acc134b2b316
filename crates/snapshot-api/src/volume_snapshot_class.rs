use std::collections::BTreeMap;

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use crate::DeletionPolicy;

/// How snapshots of one driver are made: like a StorageClass, its fields sit at the top level.
// Every printcolumn repeats `type_ = ...`, which clippy takes for a duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "snapshot.storage.k8s.io",
    version = "v1",
    kind = "VolumeSnapshotClass",
    doc = "How VolumeSnapshots of one CSI driver are taken: its parameters and deletion policy.",
    plural = "volumesnapshotclasses",
    singular = "volumesnapshotclass",
    shortname = "vsclass",
    shortname = "vsclasses",
    no_spec,
    derive = "PartialEq",
    printcolumn(name = "Driver", type_ = "string", json_path = ".driver"),
    printcolumn(
        name = "DeletionPolicy",
        type_ = "string",
        json_path = ".deletionPolicy",
        description = "Whether deleting a VolumeSnapshot of this class deletes the storage snapshot."
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct VolumeSnapshotClassFields {
    /// The CSI driver that makes the snapshots.
    pub driver: String,
    /// Driver-specific parameters of CreateSnapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<BTreeMap<String, String>>,
    /// Whether the storage snapshot outlives the VolumeSnapshotContent.
    pub deletion_policy: DeletionPolicy,
}
