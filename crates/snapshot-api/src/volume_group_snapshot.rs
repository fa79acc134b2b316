use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use crate::SnapshotError;

/// A user's request for one snapshot of several claims taken together, or a claim on a pre-provisioned group snapshot.
// Every printcolumn repeats `type_ = ...`, which clippy takes for a duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "groupsnapshot.storage.k8s.io",
    version = "v1",
    kind = "VolumeGroupSnapshot",
    doc = "A user's request for one snapshot of several PersistentVolumeClaims taken together, or a claim on a pre-provisioned group snapshot.",
    plural = "volumegroupsnapshots",
    singular = "volumegroupsnapshot",
    shortname = "vgs",
    namespaced,
    status = "VolumeGroupSnapshotStatus",
    derive = "PartialEq",
    printcolumn(
        name = "ReadyToUse",
        type_ = "boolean",
        json_path = ".status.readyToUse",
        description = "Whether every snapshot of the group can be used to restore a volume."
    ),
    printcolumn(
        name = "VolumeGroupSnapshotClass",
        type_ = "string",
        json_path = ".spec.volumeGroupSnapshotClassName",
        description = "The VolumeGroupSnapshotClass requested."
    ),
    printcolumn(
        name = "VolumeGroupSnapshotContent",
        type_ = "string",
        json_path = ".status.boundVolumeGroupSnapshotContentName",
        description = "The VolumeGroupSnapshotContent this group snapshot is bound to."
    ),
    printcolumn(
        name = "CreationTime",
        type_ = "date",
        json_path = ".status.creationTime",
        description = "When the storage system took the group snapshot."
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct VolumeGroupSnapshotSpec {
    /// What the group snapshot is of. Set at creation and never changed.
    pub source: VolumeGroupSnapshotSource,
    /// The VolumeGroupSnapshotClass to create the group snapshot with; unset means the driver's default class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("size(self) > 0").message("volumeGroupSnapshotClassName must not be the empty string when set"))]
    pub volume_group_snapshot_class_name: Option<String>,
}

/// Exactly one of the two: a label selector over the claims of the group's namespace, or an existing
/// VolumeGroupSnapshotContent.
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!has(oldSelf.selector) || has(self.selector)").message("selector is required once set"),
    validation = Rule::new("!has(oldSelf.volumeGroupSnapshotContentName) || has(self.volumeGroupSnapshotContentName)").message("volumeGroupSnapshotContentName is required once set"),
    validation = Rule::new("(has(self.selector) && !has(self.volumeGroupSnapshotContentName)) || (!has(self.selector) && has(self.volumeGroupSnapshotContentName))").message("exactly one of selector and volumeGroupSnapshotContentName must be set")
)]
pub struct VolumeGroupSnapshotSource {
    /// The claims to snapshot together. Claims labelled later do not join a group snapshot that exists already.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self == oldSelf").message("selector is immutable"))]
    pub selector: Option<LabelSelector>,
    /// A pre-provisioned VolumeGroupSnapshotContent to bind to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self == oldSelf").message("volumeGroupSnapshotContentName is immutable"))]
    pub volume_group_snapshot_content_name: Option<String>,
}

/// What the snapshot controller has learnt about the group snapshot.
#[derive(KubeSchema, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeGroupSnapshotStatus {
    /// The VolumeGroupSnapshotContent bound to this group snapshot; both must point at each other.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self == oldSelf").message("boundVolumeGroupSnapshotContentName is immutable once set"))]
    pub bound_volume_group_snapshot_content_name: Option<String>,
    /// When the storage system took the group snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_time: Option<Time>,
    /// Whether every snapshot of the group can be used to restore a volume now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_to_use: Option<bool>,
    /// The last error creating the group snapshot, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<SnapshotError>,
}
