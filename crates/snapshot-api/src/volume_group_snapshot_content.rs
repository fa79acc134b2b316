use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{DeletionPolicy, SnapshotError};

/// The group snapshot as the storage system has it: the cluster-scoped half of a VolumeGroupSnapshot.
// Every printcolumn repeats `type_ = ...`, which clippy takes for a duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "groupsnapshot.storage.k8s.io",
    version = "v1",
    kind = "VolumeGroupSnapshotContent",
    doc = "A group snapshot taken by a CSI driver, as the storage system has it; bound to one VolumeGroupSnapshot.",
    plural = "volumegroupsnapshotcontents",
    singular = "volumegroupsnapshotcontent",
    shortname = "vgsc",
    shortname = "vgscs",
    status = "VolumeGroupSnapshotContentStatus",
    derive = "PartialEq",
    printcolumn(
        name = "ReadyToUse",
        type_ = "boolean",
        json_path = ".status.readyToUse",
        description = "Whether every snapshot of the group can be used to restore a volume."
    ),
    printcolumn(
        name = "DeletionPolicy",
        type_ = "string",
        json_path = ".spec.deletionPolicy",
        description = "Whether the storage group snapshot is deleted with this object."
    ),
    printcolumn(
        name = "Driver",
        type_ = "string",
        json_path = ".spec.driver",
        description = "The CSI driver that owns the group snapshot."
    ),
    printcolumn(
        name = "VolumeGroupSnapshotClass",
        type_ = "string",
        json_path = ".spec.volumeGroupSnapshotClassName",
        description = "The class the group snapshot was created with."
    ),
    printcolumn(
        name = "VolumeGroupSnapshotNamespace",
        type_ = "string",
        json_path = ".spec.volumeGroupSnapshotRef.namespace",
        description = "The namespace of the VolumeGroupSnapshot bound to this content."
    ),
    printcolumn(
        name = "VolumeGroupSnapshot",
        type_ = "string",
        json_path = ".spec.volumeGroupSnapshotRef.name",
        description = "The VolumeGroupSnapshot bound to this content."
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct VolumeGroupSnapshotContentSpec {
    /// The VolumeGroupSnapshot bound to this content. Its uid may be filled in once, when a pre-provisioned content
    /// is bound.
    // `namespace` is a CEL keyword, so the rules spell it `__namespace__` (as upstream's do).
    #[x_kube(
        validation = Rule::new("has(self.name) && has(self.__namespace__)").message("both volumeGroupSnapshotRef.name and volumeGroupSnapshotRef.namespace must be set"),
        validation = Rule::new("self.name == oldSelf.name && self.__namespace__ == oldSelf.__namespace__").message("volumeGroupSnapshotRef.name and volumeGroupSnapshotRef.namespace are immutable"),
        validation = Rule::new("!has(oldSelf.uid) || (has(self.uid) && self.uid == oldSelf.uid)").message("volumeGroupSnapshotRef.uid is immutable once set")
    )]
    pub volume_group_snapshot_ref: ObjectReference,
    /// Whether deleting the bound VolumeGroupSnapshot deletes the storage group snapshot too.
    pub deletion_policy: DeletionPolicy,
    /// The CSI driver that owns the group snapshot.
    #[x_kube(validation = Rule::new("self == oldSelf").message("driver is immutable once set"))]
    pub driver: String,
    /// The class the group snapshot was created with (may be unset for pre-provisioned group snapshots).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self == oldSelf").message("volumeGroupSnapshotClassName is immutable once set"))]
    pub volume_group_snapshot_class_name: Option<String>,
    /// The volumes to snapshot together, or the handles of a group snapshot that exists already.
    pub source: VolumeGroupSnapshotContentSource,
}

/// Exactly one of the two: the volumes to snapshot (dynamic), or the handles of a group snapshot (pre-provisioned).
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!has(oldSelf.volumeHandles) || has(self.volumeHandles)").message("volumeHandles is required once set"),
    validation = Rule::new("!has(oldSelf.groupSnapshotHandles) || has(self.groupSnapshotHandles)").message("groupSnapshotHandles is required once set"),
    validation = Rule::new("(has(self.volumeHandles) && !has(self.groupSnapshotHandles)) || (!has(self.volumeHandles) && has(self.groupSnapshotHandles))").message("exactly one of volumeHandles and groupSnapshotHandles must be set")
)]
pub struct VolumeGroupSnapshotContentSource {
    /// The CSI volume ids to snapshot together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self == oldSelf").message("volumeHandles is immutable"))]
    pub volume_handles: Option<Vec<String>>,
    /// The CSI ids of a group snapshot that exists already and of its snapshots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self == oldSelf").message("groupSnapshotHandles is immutable"))]
    pub group_snapshot_handles: Option<GroupSnapshotHandles>,
}

/// The CSI ids of a pre-provisioned group snapshot.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GroupSnapshotHandles {
    /// The CSI `group_snapshot_id`.
    pub volume_group_snapshot_handle: String,
    /// The CSI `snapshot_id` of every snapshot of the group.
    pub volume_snapshot_handles: Vec<String>,
}

/// What the driver reported about the group snapshot.
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeGroupSnapshotContentStatus {
    /// The CSI `group_snapshot_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self == oldSelf").message("volumeGroupSnapshotHandle is immutable once set"))]
    pub volume_group_snapshot_handle: Option<String>,
    /// When the storage system took the group snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_time: Option<Time>,
    /// Whether every snapshot of the group can be used to restore a volume now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_to_use: Option<bool>,
    /// The last error from the driver, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<SnapshotError>,
    /// One entry per snapshot of the group, as the driver answered CreateVolumeGroupSnapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_snapshot_info_list: Option<Vec<VolumeSnapshotInfo>>,
}

/// One snapshot of a group, as the driver reported it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumeSnapshotInfo {
    /// The CSI volume id the snapshot was taken of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_handle: Option<String>,
    /// The CSI `snapshot_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_handle: Option<String>,
    /// When the storage system took the snapshot, in nanoseconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_time: Option<i64>,
    /// Whether a volume can be restored from the snapshot now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_to_use: Option<bool>,
    /// The minimum size in bytes of a volume restored from the snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_size: Option<i64>,
}
