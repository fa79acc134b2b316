use std::collections::BTreeMap;

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use crate::DeletionPolicy;

/// How group snapshots of one driver are made: like a StorageClass, its fields sit at the top level.
// Every printcolumn repeats `type_ = ...`, which clippy takes for a duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "groupsnapshot.storage.k8s.io",
    version = "v1",
    kind = "VolumeGroupSnapshotClass",
    doc = "How VolumeGroupSnapshots of one CSI driver are taken: its parameters and deletion policy.",
    plural = "volumegroupsnapshotclasses",
    singular = "volumegroupsnapshotclass",
    shortname = "vgsclass",
    shortname = "vgsclasses",
    no_spec,
    derive = "PartialEq",
    printcolumn(name = "Driver", type_ = "string", json_path = ".driver"),
    printcolumn(
        name = "DeletionPolicy",
        type_ = "string",
        json_path = ".deletionPolicy",
        description = "Whether deleting a VolumeGroupSnapshot of this class deletes the storage group snapshot."
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct VolumeGroupSnapshotClassFields {
    /// The CSI driver that makes the group snapshots.
    #[x_kube(validation = Rule::new("self == oldSelf").message("driver is immutable once set"))]
    pub driver: String,
    /// Driver-specific parameters of CreateVolumeGroupSnapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self == oldSelf").message("parameters are immutable once set"))]
    pub parameters: Option<BTreeMap<String, String>>,
    /// Whether the storage group snapshot outlives the VolumeGroupSnapshotContent.
    #[x_kube(validation = Rule::new("self == oldSelf").message("deletionPolicy is immutable once set"))]
    pub deletion_policy: DeletionPolicy,
}
