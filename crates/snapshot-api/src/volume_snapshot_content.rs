use k8s_openapi::api::core::v1::ObjectReference;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::SnapshotError;

/// The snapshot as the storage system has it: the cluster-scoped half of a VolumeSnapshot.
// Every printcolumn repeats `type_ = ...`, which clippy takes for a duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "snapshot.storage.k8s.io",
    version = "v1",
    kind = "VolumeSnapshotContent",
    doc = "A snapshot taken by a CSI driver, as the storage system has it; bound to one VolumeSnapshot.",
    plural = "volumesnapshotcontents",
    singular = "volumesnapshotcontent",
    shortname = "vsc",
    shortname = "vscs",
    status = "VolumeSnapshotContentStatus",
    derive = "PartialEq",
    printcolumn(
        name = "ReadyToUse",
        type_ = "boolean",
        json_path = ".status.readyToUse",
        description = "Whether the snapshot can be used to restore a volume."
    ),
    printcolumn(
        name = "RestoreSize",
        type_ = "integer",
        json_path = ".status.restoreSize",
        description = "The minimum size in bytes of a volume restored from this snapshot."
    ),
    printcolumn(
        name = "DeletionPolicy",
        type_ = "string",
        json_path = ".spec.deletionPolicy",
        description = "Whether the storage snapshot is deleted with this object."
    ),
    printcolumn(
        name = "Driver",
        type_ = "string",
        json_path = ".spec.driver",
        description = "The CSI driver that owns the snapshot."
    ),
    printcolumn(
        name = "VolumeSnapshotClass",
        type_ = "string",
        json_path = ".spec.volumeSnapshotClassName",
        description = "The class the snapshot was created with."
    ),
    printcolumn(
        name = "VolumeSnapshot",
        type_ = "string",
        json_path = ".spec.volumeSnapshotRef.name",
        description = "The VolumeSnapshot bound to this content."
    ),
    printcolumn(
        name = "VolumeSnapshotNamespace",
        type_ = "string",
        json_path = ".spec.volumeSnapshotRef.namespace",
        description = "The namespace of that VolumeSnapshot."
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!has(oldSelf.sourceVolumeMode) || has(self.sourceVolumeMode)").message("sourceVolumeMode is required once set")
)]
pub struct VolumeSnapshotContentSpec {
    /// The VolumeSnapshot bound to this content.
    #[x_kube(validation = Rule::new("has(self.name) && has(self.namespace)").message("both spec.volumeSnapshotRef.name and spec.volumeSnapshotRef.namespace must be set"))]
    pub volume_snapshot_ref: ObjectReference,
    /// Whether deleting the bound VolumeSnapshot deletes the storage snapshot too.
    pub deletion_policy: DeletionPolicy,
    /// The CSI driver that owns the snapshot.
    pub driver: String,
    /// The class the snapshot was created with (unset for pre-provisioned snapshots).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_snapshot_class_name: Option<String>,
    /// The volume to snapshot, or the handle of an existing snapshot.
    pub source: VolumeSnapshotContentSource,
    /// The volume mode of the snapshotted volume, which restores may be held to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self == oldSelf").message("sourceVolumeMode is immutable"))]
    #[schemars(schema_with = "volume_mode_schema")]
    pub source_volume_mode: Option<String>,
}

/// `Filesystem` or `Block`, as a claim's `volumeMode`.
fn volume_mode_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "string", "enum": ["Filesystem", "Block"]})
}

/// Whether the storage snapshot outlives its VolumeSnapshotContent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum DeletionPolicy {
    #[default]
    Delete,
    Retain,
}

/// Exactly one of the two: the volume to snapshot (dynamic), or the handle of a snapshot (pre-provisioned).
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!has(oldSelf.volumeHandle) || has(self.volumeHandle)").message("volumeHandle is required once set"),
    validation = Rule::new("!has(oldSelf.snapshotHandle) || has(self.snapshotHandle)").message("snapshotHandle is required once set"),
    validation = Rule::new("(has(self.volumeHandle) && !has(self.snapshotHandle)) || (!has(self.volumeHandle) && has(self.snapshotHandle))").message("exactly one of volumeHandle and snapshotHandle must be set")
)]
pub struct VolumeSnapshotContentSource {
    /// The CSI volume id to snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self == oldSelf").message("volumeHandle is immutable"))]
    pub volume_handle: Option<String>,
    /// The CSI snapshot id of a snapshot that exists already.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self == oldSelf").message("snapshotHandle is immutable"))]
    pub snapshot_handle: Option<String>,
}

/// What the driver reported about the snapshot.
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeSnapshotContentStatus {
    /// The CSI snapshot id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_handle: Option<String>,
    /// When the storage system took the snapshot, in nanoseconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_time: Option<i64>,
    /// The minimum size in bytes of a volume restored from the snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub restore_size: Option<i64>,
    /// Whether a volume can be restored from the snapshot now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_to_use: Option<bool>,
    /// The last error from the driver, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<SnapshotError>,
    /// The group snapshot this snapshot was taken with, when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_group_snapshot_handle: Option<String>,
}
