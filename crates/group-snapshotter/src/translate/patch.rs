//! The writes of both group loops, as plain values; the controllers only send them.
//!
//! Each becomes a JSON merge patch (custom resources take merge patches, not strategic ones): a key it names is set,
//! a `null` removes it, a key it does not name stays as it is. `apply` computes what the API server will store,
//! which the tests check against the merge patch itself. Finalizers are not here: they go through guarded updates
//! (`sidecar_runtime::update::set_finalizer`), so that a write never drops someone else's finalizer.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Map, Value, json};
use snapshot_api::{
    VolumeGroupSnapshot, VolumeGroupSnapshotContent, VolumeGroupSnapshotContentStatus, VolumeGroupSnapshotStatus,
    VolumeSnapshot, VolumeSnapshotContent, VolumeSnapshotContentStatus, VolumeSnapshotStatus,
};

use super::names::{ANN_VALUE_YES, ANN_VOLUME_GROUP_SNAPSHOT_BEING_CREATED, ANN_VOLUME_GROUP_SNAPSHOT_BEING_DELETED};

// ---- VolumeGroupSnapshot (snapshot-controller) -------------------------------------------------------------------

/// The group snapshot's whole status, through its `status` subresource: every field written, unset ones as null so
/// that a cleared error goes away.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GroupStatusPatch {
    pub status: VolumeGroupSnapshotStatus,
}

impl GroupStatusPatch {
    pub fn merge_patch(&self) -> Value {
        let status = &self.status;
        json!({ "status": {
            "boundVolumeGroupSnapshotContentName": status.bound_volume_group_snapshot_content_name,
            "creationTime": status.creation_time,
            "readyToUse": status.ready_to_use,
            "error": status.error,
        }})
    }

    /// The group snapshot as the API server will store it.
    pub fn apply(&self, group: &VolumeGroupSnapshot) -> VolumeGroupSnapshot {
        VolumeGroupSnapshot { status: Some(self.status.clone()), ..group.clone() }
    }
}

/// The class a dynamic group snapshot that names none is given: its driver's default.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupClassPatch {
    /// `spec.volumeGroupSnapshotClassName`.
    pub class_name: String,
}

impl GroupClassPatch {
    pub fn merge_patch(&self) -> Value {
        json!({ "spec": { "volumeGroupSnapshotClassName": self.class_name } })
    }

    pub fn apply(&self, group: &VolumeGroupSnapshot) -> VolumeGroupSnapshot {
        let mut group = group.clone();
        group.spec.volume_group_snapshot_class_name = Some(self.class_name.clone());
        group
    }
}

// ---- VolumeGroupSnapshotContent ----------------------------------------------------------------------------------

/// One annotation of a group content set to `"yes"` or removed: `volumegroupsnapshot-being-created` (csi-snapshotter,
/// around CreateVolumeGroupSnapshot) and `volumegroupsnapshot-being-deleted` (snapshot-controller, telling
/// csi-snapshotter to delete).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContentAnnotationPatch {
    pub key: &'static str,
    /// Set to `"yes"`, or removed.
    pub set: bool,
}

impl ContentAnnotationPatch {
    /// Stored before CreateVolumeGroupSnapshot (`set`), removed once the driver answered for good.
    pub fn being_created(set: bool) -> ContentAnnotationPatch {
        ContentAnnotationPatch { key: ANN_VOLUME_GROUP_SNAPSHOT_BEING_CREATED, set }
    }

    /// The group snapshot is going: csi-snapshotter may delete the storage group snapshot.
    pub fn being_deleted() -> ContentAnnotationPatch {
        ContentAnnotationPatch { key: ANN_VOLUME_GROUP_SNAPSHOT_BEING_DELETED, set: true }
    }

    pub fn merge_patch(&self) -> Value {
        json!({ "metadata": { "annotations": { self.key: self.set.then_some(ANN_VALUE_YES) } } })
    }

    pub fn apply(&self, content: &VolumeGroupSnapshotContent) -> VolumeGroupSnapshotContent {
        let mut content = content.clone();
        let value = self.set.then(|| ANN_VALUE_YES.to_string());
        apply_annotations(&mut content.metadata, &BTreeMap::from([(self.key.to_string(), value)]));
        content
    }
}

/// The group content's whole status, through its `status` subresource (csi-snapshotter): every field written, unset
/// ones as null.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ContentStatusPatch {
    pub status: VolumeGroupSnapshotContentStatus,
}

impl ContentStatusPatch {
    pub fn merge_patch(&self) -> Value {
        let status = &self.status;
        json!({ "status": {
            "volumeGroupSnapshotHandle": status.volume_group_snapshot_handle,
            "creationTime": status.creation_time,
            "readyToUse": status.ready_to_use,
            "error": status.error,
            "volumeSnapshotInfoList": status.volume_snapshot_info_list,
        }})
    }

    pub fn apply(&self, content: &VolumeGroupSnapshotContent) -> VolumeGroupSnapshotContent {
        VolumeGroupSnapshotContent { status: Some(self.status.clone()), ..content.clone() }
    }
}

/// What binding a pre-provisioned group snapshot writes into the content it names; fields left `None` are already
/// right.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContentBindPatch {
    /// `spec.volumeGroupSnapshotRef.uid`.
    pub group_uid: Option<String>,
    /// `spec.volumeGroupSnapshotClassName`, the group's, when the content names none.
    pub class_name: Option<String>,
}

impl ContentBindPatch {
    pub fn merge_patch(&self) -> Value {
        let mut spec = Map::new();
        if let Some(uid) = &self.group_uid {
            spec.insert("volumeGroupSnapshotRef".into(), json!({ "uid": uid }));
        }
        if let Some(class) = &self.class_name {
            spec.insert("volumeGroupSnapshotClassName".into(), json!(class));
        }
        json!({ "spec": spec })
    }

    pub fn is_empty(&self) -> bool {
        self.group_uid.is_none() && self.class_name.is_none()
    }

    pub fn apply(&self, content: &VolumeGroupSnapshotContent) -> VolumeGroupSnapshotContent {
        let mut content = content.clone();
        if let Some(uid) = &self.group_uid {
            content.spec.volume_group_snapshot_ref.uid = Some(uid.clone());
        }
        if let Some(class) = &self.class_name {
            content.spec.volume_group_snapshot_class_name = Some(class.clone());
        }
        content
    }
}

// ---- Members: VolumeSnapshotContent and VolumeSnapshot (snapshot-controller) -------------------------------------

/// A member content's back-reference gains the UID of its snapshot, once that exists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberContentRefPatch {
    /// `spec.volumeSnapshotRef.uid`.
    pub snapshot_uid: Option<String>,
}

impl MemberContentRefPatch {
    pub fn merge_patch(&self) -> Value {
        json!({ "spec": { "volumeSnapshotRef": { "uid": self.snapshot_uid } } })
    }

    pub fn apply(&self, content: &VolumeSnapshotContent) -> VolumeSnapshotContent {
        let mut content = content.clone();
        content.spec.volume_snapshot_ref.uid = self.snapshot_uid.clone();
        content
    }
}

/// A member content's status from its entry of the group content, through the `status` subresource: the fields it
/// has are written, the others stay as they are.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MemberContentStatusPatch {
    pub status: VolumeSnapshotContentStatus,
}

impl MemberContentStatusPatch {
    pub fn merge_patch(&self) -> Value {
        json!({ "status": self.status })
    }

    pub fn apply(&self, content: &VolumeSnapshotContent) -> VolumeSnapshotContent {
        let mut content = content.clone();
        let old = content.status.take().unwrap_or_default();
        let new = &self.status;
        content.status = Some(VolumeSnapshotContentStatus {
            snapshot_handle: new.snapshot_handle.clone().or(old.snapshot_handle),
            creation_time: new.creation_time.or(old.creation_time),
            restore_size: new.restore_size.or(old.restore_size),
            ready_to_use: new.ready_to_use.or(old.ready_to_use),
            error: new.error.clone().or(old.error),
            volume_group_snapshot_handle: new.volume_group_snapshot_handle.clone().or(old.volume_group_snapshot_handle),
        });
        content
    }
}

/// A member snapshot bound to its content and its group, through the `status` subresource (both names written,
/// unset ones as null).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemberSnapshotStatusPatch {
    /// `status.boundVolumeSnapshotContentName`.
    pub bound_content_name: Option<String>,
    /// `status.volumeGroupSnapshotName`.
    pub group_name: Option<String>,
}

impl MemberSnapshotStatusPatch {
    pub fn merge_patch(&self) -> Value {
        json!({ "status": {
            "boundVolumeSnapshotContentName": self.bound_content_name,
            "volumeGroupSnapshotName": self.group_name,
        }})
    }

    pub fn apply(&self, snapshot: &VolumeSnapshot) -> VolumeSnapshot {
        let mut snapshot = snapshot.clone();
        let status = snapshot.status.get_or_insert_with(VolumeSnapshotStatus::default);
        status.bound_volume_snapshot_content_name = self.bound_content_name.clone();
        status.volume_group_snapshot_name = self.group_name.clone();
        snapshot
    }
}

/// `Some` sets an annotation, `None` removes it; the map goes when it becomes empty.
fn apply_annotations(meta: &mut ObjectMeta, changes: &BTreeMap<String, Option<String>>) {
    let mut annotations = meta.annotations.take().unwrap_or_default();
    for (key, value) in changes {
        match value {
            Some(value) => annotations.insert(key.clone(), value.clone()),
            None => annotations.remove(key),
        };
    }
    meta.annotations = (!annotations.is_empty()).then_some(annotations);
}

#[cfg(test)]
mod tests;
