use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use crate::SnapshotError;

/// A user's request for a point-in-time copy of a claim, or a claim on a pre-provisioned snapshot.
// Every printcolumn repeats `type_ = ...`, which clippy takes for a duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "snapshot.storage.k8s.io",
    version = "v1",
    kind = "VolumeSnapshot",
    doc = "A user's request for a snapshot of a PersistentVolumeClaim, or a claim on a pre-provisioned snapshot.",
    plural = "volumesnapshots",
    singular = "volumesnapshot",
    shortname = "vs",
    namespaced,
    status = "VolumeSnapshotStatus",
    derive = "PartialEq",
    printcolumn(
        name = "ReadyToUse",
        type_ = "boolean",
        json_path = ".status.readyToUse",
        description = "Whether the snapshot can be used to restore a volume."
    ),
    printcolumn(
        name = "SourcePVC",
        type_ = "string",
        json_path = ".spec.source.persistentVolumeClaimName",
        description = "The claim a dynamically created snapshot is taken from."
    ),
    printcolumn(
        name = "SourceSnapshotContent",
        type_ = "string",
        json_path = ".spec.source.volumeSnapshotContentName",
        description = "The pre-provisioned content this snapshot binds to."
    ),
    printcolumn(
        name = "RestoreSize",
        type_ = "string",
        json_path = ".status.restoreSize",
        description = "The minimum size of a volume restored from this snapshot."
    ),
    printcolumn(
        name = "SnapshotClass",
        type_ = "string",
        json_path = ".spec.volumeSnapshotClassName",
        description = "The VolumeSnapshotClass requested."
    ),
    printcolumn(
        name = "SnapshotContent",
        type_ = "string",
        json_path = ".status.boundVolumeSnapshotContentName",
        description = "The VolumeSnapshotContent this snapshot is bound to."
    ),
    printcolumn(
        name = "CreationTime",
        type_ = "date",
        json_path = ".status.creationTime",
        description = "When the storage system took the snapshot."
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct VolumeSnapshotSpec {
    /// What the snapshot is of. Set at creation and never changed.
    pub source: VolumeSnapshotSource,
    /// The VolumeSnapshotClass to create the snapshot with; unset means the driver's default class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("size(self) > 0").message("volumeSnapshotClassName must not be the empty string when set"))]
    pub volume_snapshot_class_name: Option<String>,
}

/// Exactly one of the two: a claim to snapshot, or an existing VolumeSnapshotContent.
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!has(oldSelf.persistentVolumeClaimName) || has(self.persistentVolumeClaimName)").message("persistentVolumeClaimName is required once set"),
    validation = Rule::new("!has(oldSelf.volumeSnapshotContentName) || has(self.volumeSnapshotContentName)").message("volumeSnapshotContentName is required once set"),
    validation = Rule::new("(has(self.volumeSnapshotContentName) && !has(self.persistentVolumeClaimName)) || (!has(self.volumeSnapshotContentName) && has(self.persistentVolumeClaimName))").message("exactly one of volumeSnapshotContentName and persistentVolumeClaimName must be set")
)]
pub struct VolumeSnapshotSource {
    /// A claim in the snapshot's namespace: the controllers create the snapshot and its content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self == oldSelf").message("persistentVolumeClaimName is immutable"))]
    pub persistent_volume_claim_name: Option<String>,
    /// A pre-provisioned VolumeSnapshotContent to bind to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self == oldSelf").message("volumeSnapshotContentName is immutable"))]
    pub volume_snapshot_content_name: Option<String>,
}

/// What the snapshot controller has learnt about the snapshot.
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeSnapshotStatus {
    /// The VolumeSnapshotContent bound to this snapshot; both must point at each other.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound_volume_snapshot_content_name: Option<String>,
    /// When the storage system took the snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_time: Option<Time>,
    /// Whether a volume can be restored from the snapshot now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_to_use: Option<bool>,
    /// The minimum size of a volume restored from the snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_size: Option<Quantity>,
    /// The last error creating the snapshot, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<SnapshotError>,
    /// The VolumeGroupSnapshot this snapshot belongs to, when it was taken as part of one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_group_snapshot_name: Option<String>,
}
