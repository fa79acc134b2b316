//! Deleting a group snapshot: what the snapshot-controller does with the group, its content and its members
//! (upstream: external-snapshotter, pkg/common-controller/groupsnapshot_controller_helper.go,
//! `processGroupSnapshotWithDeletionTimestamp`), and what csi-snapshotter does with the content
//! (pkg/sidecar-controller/groupsnapshot_helper.go, `shouldDeleteGroupSnapshotContent` and
//! `deleteCSIGroupSnapshotOperation`).

use csi_client::proto::DeleteVolumeGroupSnapshotRequest;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use sidecar_runtime::events::PlannedEvent;
use snapshot_api::{DeletionPolicy, VolumeGroupSnapshot, VolumeGroupSnapshotContent, VolumeSnapshot};

use super::names::{
    ANN_GROUP_DELETION_SECRET_NAME, ANN_GROUP_DELETION_SECRET_NAMESPACE, ANN_VOLUME_GROUP_SNAPSHOT_BEING_CREATED,
    ANN_VOLUME_GROUP_SNAPSHOT_BEING_DELETED, EVENT_CONTENT_DELETE_ERROR, EVENT_GROUP_SNAPSHOT_DELETE_ERROR,
    EVENT_SNAPSHOT_DELETE_ERROR, EVENT_SNAPSHOT_DELETE_PENDING, KIND_VOLUME_SNAPSHOT,
};
use super::secrets::{SecretReference, secret_from_annotations};
use snapshot_api::names::GROUP as SNAPSHOT_GROUP;

/// What the snapshot-controller does for a group snapshot being deleted, in this order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupDeletion {
    /// Set `volumegroupsnapshot-being-deleted: "yes"` on the content, which tells csi-snapshotter to go ahead.
    pub mark_content_being_deleted: bool,
    /// API-delete the content (its policy is Delete).
    pub delete_content: bool,
    /// API-delete these member VolumeSnapshots (NotFound is success).
    pub delete_members: Vec<String>,
    /// Remove the group's bound-protection finalizer now. With a Delete content it stays until the content is gone.
    pub remove_finalizer: bool,
}

impl GroupDeletion {
    /// The steps a run still has to carry out, given the content and members as they are now: a content marked or
    /// being deleted already, and members being deleted already, need no write again. The finalizer's fate does not
    /// change.
    pub fn left_to_do(self, content: Option<&VolumeGroupSnapshotContent>, members: &[VolumeSnapshot]) -> GroupDeletion {
        let marked = content
            .and_then(|c| c.metadata.annotations.as_ref())
            .is_some_and(|a| a.contains_key(ANN_VOLUME_GROUP_SNAPSHOT_BEING_DELETED));
        let content_going = content.is_some_and(|c| c.metadata.deletion_timestamp.is_some());
        let going = |name: &String| {
            members.iter().any(|m| m.metadata.name.as_ref() == Some(name) && m.metadata.deletion_timestamp.is_some())
        };
        GroupDeletion {
            mark_content_being_deleted: self.mark_content_being_deleted && !marked,
            delete_content: self.delete_content && !content_going,
            delete_members: self.delete_members.into_iter().filter(|m| !going(m)).collect(),
            remove_finalizer: self.remove_finalizer,
        }
    }
}

/// The snapshot-controller's steps for a group snapshot with a deletion timestamp. `members` are the
/// VolumeSnapshots owned by the group; `claims` the claims of its namespace. A member that is the data source of a
/// Pending claim holds everything back (the restore still reads it): the Warning says which.
pub fn group_deletion(
    group: &VolumeGroupSnapshot,
    content: Option<&VolumeGroupSnapshotContent>,
    members: &[VolumeSnapshot],
    claims: &[PersistentVolumeClaim],
) -> Result<GroupDeletion, PlannedEvent> {
    let group_name = group.metadata.name.as_deref().unwrap_or_default();
    let member_names: Vec<String> = members.iter().filter_map(|m| m.metadata.name.clone()).collect();
    if let Some((member, claim)) = member_names.iter().find_map(|m| restoring_claim(m, group, claims).map(|c| (m, c))) {
        let message = format!(
            "group snapshot {group_name} cannot be deleted yet: its snapshot {member} is the data source of the pending PVC {claim}"
        );
        return Err(PlannedEvent::warning(EVENT_SNAPSHOT_DELETE_PENDING, message));
    }
    let content = content.filter(|c| points_back(c, group));
    let delete_content = content.is_some_and(|c| c.spec.deletion_policy == DeletionPolicy::Delete);
    Ok(GroupDeletion {
        mark_content_being_deleted: content.is_some(),
        delete_content,
        delete_members: member_names,
        remove_finalizer: !delete_content,
    })
}

/// The API server refused to delete the group's content ([`GroupDeletion::delete_content`]).
pub fn content_delete_failed(error: &str) -> PlannedEvent {
    let message = format!("Failed to delete group snapshot content API object: {error}");
    PlannedEvent::warning(EVENT_CONTENT_DELETE_ERROR, message)
}

/// The API server refused to delete a member ([`GroupDeletion::delete_members`]).
pub fn member_delete_failed(member: &str, error: &str) -> PlannedEvent {
    PlannedEvent::warning(EVENT_SNAPSHOT_DELETE_ERROR, format!("Failed to delete snapshot {member}: {error}"))
}

/// Whether the snapshot-controller deletes a content whose group snapshot is gone (`group_uid_now`: the UID of the
/// group snapshot now stored under the content's reference, `None` when there is none). A group snapshot can go
/// before its bound finalizer is written (deleted right after it was created); its content, and the storage group
/// snapshot csi-snapshotter may have cut for it, must not stay behind. Only a content bound by UID (so it was made
/// or bound for that very group) with policy Delete goes; with Retain it is kept, as after a normal deletion.
pub fn orphan_content_deletion(content: &VolumeGroupSnapshotContent, group_uid_now: Option<&str>) -> bool {
    let Some(bound_uid) = content.spec.volume_group_snapshot_ref.uid.as_deref().filter(|u| !u.is_empty()) else {
        return false;
    };
    content.metadata.deletion_timestamp.is_none()
        && content.spec.deletion_policy == DeletionPolicy::Delete
        && group_uid_now != Some(bound_uid)
}

/// A content is the group's when its reference names the group by namespace, name and UID.
fn points_back(content: &VolumeGroupSnapshotContent, group: &VolumeGroupSnapshot) -> bool {
    let reference = &content.spec.volume_group_snapshot_ref;
    reference.name == group.metadata.name
        && reference.namespace == group.metadata.namespace
        && reference.uid == group.metadata.uid
}

/// The name of a Pending claim of the group's namespace restoring from this snapshot, if any.
fn restoring_claim(snapshot: &str, group: &VolumeGroupSnapshot, claims: &[PersistentVolumeClaim]) -> Option<String> {
    claims.iter().find_map(|claim| {
        let pending = claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Pending");
        let spec = claim.spec.as_ref()?;
        let by_source = spec.data_source.as_ref().is_some_and(|s| {
            s.api_group.as_deref() == Some(SNAPSHOT_GROUP) && s.kind == KIND_VOLUME_SNAPSHOT && s.name == snapshot
        });
        // A dataSourceRef in another namespace is not this snapshot.
        let by_ref = spec.data_source_ref.as_ref().is_some_and(|s| {
            s.api_group.as_deref() == Some(SNAPSHOT_GROUP)
                && s.kind == KIND_VOLUME_SNAPSHOT
                && s.name == snapshot
                && s.namespace.as_ref().is_none_or(|ns| Some(ns) == group.metadata.namespace.as_ref())
        });
        let same_namespace = claim.metadata.namespace == group.metadata.namespace;
        (pending && same_namespace && (by_source || by_ref)).then(|| claim.metadata.name.clone().unwrap_or_default())
    })
}

/// csi-snapshotter's step for a content with a deletion timestamp.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ContentDeletion {
    /// Not being deleted.
    NotDeleting,
    /// Not yet: the snapshot-controller has not released the content (no being-deleted annotation).
    Wait,
    /// A CreateVolumeGroupSnapshot was under way (being-created annotation) when the content was deleted, so the
    /// driver may have cut a group whose id nobody knows: call it again (idempotent by name) for the id first, so
    /// that the deletion that follows deletes the group instead of leaking it.
    FinishCreation,
    /// Call DeleteVolumeGroupSnapshot, then clear the status ([`status_after_delete`]), then remove the finalizer.
    DeleteGroupSnapshot(GroupSnapshotToDelete),
    /// Nothing on the storage to delete (policy Retain, or never cut): remove the content's finalizer.
    RemoveFinalizer,
}

/// The storage group snapshot to delete and the Secret to delete it with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupSnapshotToDelete {
    pub group_snapshot_id: String,
    pub snapshot_ids: Vec<String>,
    pub secret: Option<SecretReference>,
}

impl GroupSnapshotToDelete {
    /// The request, with the data of [`Self::secret`] (empty when none).
    pub fn request(&self, secrets: std::collections::HashMap<String, String>) -> DeleteVolumeGroupSnapshotRequest {
        DeleteVolumeGroupSnapshotRequest {
            group_snapshot_id: self.group_snapshot_id.clone(),
            snapshot_ids: self.snapshot_ids.clone(),
            secrets,
        }
    }
}

/// csi-snapshotter's decision for a content. A creation under way is finished first; an unbound pre-provisioned
/// content goes at once; otherwise the being-deleted annotation means go. The storage group snapshot is
/// deleted with policy Delete, by the status handle (or, beyond upstream, the handle a pre-provisioned content was
/// given, so that one deleted before it was ever synced is not leaked), with every member's snapshot id, which CSI
/// requires.
pub fn content_deletion(content: &VolumeGroupSnapshotContent) -> Result<ContentDeletion, PlannedEvent> {
    if content.metadata.deletion_timestamp.is_none() {
        return Ok(ContentDeletion::NotDeleting);
    }
    let annotations = content.metadata.annotations.clone().unwrap_or_default();
    let dynamic = content.spec.source.volume_handles.as_ref().is_some_and(|h| !h.is_empty());
    if dynamic && annotations.contains_key(ANN_VOLUME_GROUP_SNAPSHOT_BEING_CREATED) {
        return Ok(ContentDeletion::FinishCreation);
    }
    let pre_provisioned = content.spec.source.group_snapshot_handles.as_ref();
    let unbound = content.spec.volume_group_snapshot_ref.uid.as_deref().unwrap_or_default().is_empty();
    let go = (pre_provisioned.is_some() && unbound)
        || (!annotations.contains_key(ANN_VOLUME_GROUP_SNAPSHOT_BEING_CREATED)
            && annotations.contains_key(ANN_VOLUME_GROUP_SNAPSHOT_BEING_DELETED));
    if !go {
        return Ok(ContentDeletion::Wait);
    }
    if content.spec.deletion_policy == DeletionPolicy::Retain {
        return Ok(ContentDeletion::RemoveFinalizer);
    }
    let status = content.status.as_ref();
    let group_snapshot_id = status
        .and_then(|s| s.volume_group_snapshot_handle.clone())
        .or_else(|| pre_provisioned.map(|h| h.volume_group_snapshot_handle.clone()))
        .filter(|id| !id.is_empty());
    let Some(group_snapshot_id) = group_snapshot_id else {
        return Ok(ContentDeletion::RemoveFinalizer);
    };
    let from_status: Vec<String> = status
        .and_then(|s| s.volume_snapshot_info_list.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|e| e.snapshot_handle.clone())
        .collect();
    let snapshot_ids = if from_status.is_empty() {
        pre_provisioned.map(|h| h.volume_snapshot_handles.clone()).unwrap_or_default()
    } else {
        from_status
    };
    if snapshot_ids.is_empty() {
        let name = content.metadata.name.as_deref().unwrap_or_default();
        let message = format!(
            "failed to delete group snapshot {group_snapshot_id} of content {name}: the snapshot ids of its members are unknown"
        );
        return Err(PlannedEvent::warning(EVENT_GROUP_SNAPSHOT_DELETE_ERROR, message));
    }
    let secret = secret_from_annotations(
        Some(&annotations),
        ANN_GROUP_DELETION_SECRET_NAME,
        ANN_GROUP_DELETION_SECRET_NAMESPACE,
    );
    Ok(ContentDeletion::DeleteGroupSnapshot(GroupSnapshotToDelete { group_snapshot_id, snapshot_ids, secret }))
}

/// DeleteVolumeGroupSnapshot failed, or could not be asked (its Secret unreadable): csi-snapshotter's Warning on the
/// content.
pub fn group_snapshot_delete_failed(content_name: &str, error: &str) -> PlannedEvent {
    let message = format!("failed to delete group snapshot content {content_name}: {error}");
    PlannedEvent::warning(EVENT_GROUP_SNAPSHOT_DELETE_ERROR, message)
}

/// The content's status once its storage group snapshot is deleted: handle, readiness, creation time and error
/// cleared (the member list stays, for the record).
pub fn status_after_delete(content: &VolumeGroupSnapshotContent) -> snapshot_api::VolumeGroupSnapshotContentStatus {
    let mut status = content.status.clone().unwrap_or_default();
    status.volume_group_snapshot_handle = None;
    status.ready_to_use = None;
    status.creation_time = None;
    status.error = None;
    status
}

#[cfg(test)]
mod tests;
