//! Deleting a VolumeSnapshot: what happens to its content, and when its finalizers come off (external-snapshotter
//! pkg/common-controller/snapshot_controller.go, processSnapshotWithDeletionTimestamp and
//! checkandRemoveSnapshotFinalizersAndCheckandDeleteContent).
//!
//! The controller drives the result in order: refuse while a restore is pending or the snapshot belongs to a live
//! group; mark the content `volumesnapshot-being-deleted`; API-delete the content when its policy is Delete;
//! re-evaluate the claim finalizer ([`super::finalizers::claim_finalizer_removal`] with `skip` = this snapshot);
//! then write the finalizer removal.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::ResourceExt;
use sidecar_runtime::events::PlannedEvent;
use snapshot_api::names::{
    FINALIZER_VOLUME_SNAPSHOT_AS_SOURCE, FINALIZER_VOLUME_SNAPSHOT_BOUND, FINALIZER_VOLUME_SNAPSHOT_IN_GROUP, GROUP,
    KIND_VOLUME_SNAPSHOT,
};
use snapshot_api::{DeletionPolicy, VolumeSnapshot, VolumeSnapshotContent};

use super::content_sync::{being_deleted_annotation, is_deletion_candidate};
use super::names::{bound_content_name, content_points_back, dynamic_content_name, go_quoted, snapshot_key};
use super::patch::{ContentPatch, MetadataPatch, SnapshotPatch};
use super::reasons::{SNAPSHOT_CONTENT_OBJECT_DELETE_ERROR, SNAPSHOT_DELETE_PENDING};
use super::status_error::SnapshotFailure;

/// The content to look for: the bound one, or for a dynamic snapshot whose status was never written,
/// `snapcontent-<uid>` (the controller may have died between creating the content and recording it).
pub fn deletion_content_name(snapshot: &VolumeSnapshot) -> Option<String> {
    match bound_content_name(snapshot) {
        Some(name) => Some(name.to_string()),
        None => snapshot.spec.source.persistent_volume_claim_name.is_some().then(|| dynamic_content_name(snapshot)),
    }
}

/// What deleting the snapshot writes, in order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SnapshotDeletion {
    /// Tell csi-snapshotter the snapshot is going, whatever the policy.
    pub content_annotation: Option<ContentPatch>,
    /// The content to API-delete (policy Delete); NotFound counts as done.
    pub delete_content: Option<String>,
    /// The snapshot's finalizers to take off, after the claim finalizer was re-evaluated.
    pub finalizers: Option<SnapshotPatch>,
}

/// The deletion of `snapshot`. `content`: what the store has under [`deletion_content_name`]. `claims`: the claims
/// of the snapshot's namespace. `group_snapshot_exists`: whether the VolumeGroupSnapshot named in
/// `status.volumeGroupSnapshotName` exists (ignored when that is unset). `Ok(None)`: not a deletion to process.
pub fn snapshot_deletion<'a>(
    snapshot: &VolumeSnapshot,
    content: Option<&VolumeSnapshotContent>,
    claims: impl IntoIterator<Item = &'a PersistentVolumeClaim>,
    group_snapshot_exists: bool,
) -> Result<Option<SnapshotDeletion>, SnapshotFailure> {
    if !is_deletion_candidate(snapshot) {
        return Ok(None);
    }
    // Only a content that points back is touched.
    let content = content.filter(|c| content_points_back(snapshot, c));
    let delete_content = content.is_some_and(|c| c.spec.deletion_policy == DeletionPolicy::Delete);
    let key = snapshot_key(snapshot);

    if content.is_some() && restore_pending(snapshot, claims) {
        return Err(SnapshotFailure::event_only(
            SNAPSHOT_DELETE_PENDING,
            "Snapshot is being used to restore a PVC",
            format!("snapshot {key} is in use (being used to restore a PVC), will retry deletion"),
        ));
    }
    let group = snapshot.status.as_ref().and_then(|s| s.volume_group_snapshot_name.as_deref());
    if let Some(group) = group
        && group_snapshot_exists
    {
        let message = format!(
            "deletion of the individual volume snapshot {key} is not allowed as it belongs to group snapshot {}/{group}. \
             Deleting the group snapshot will trigger the deletion of all the individual volume snapshots that are part \
             of the group.",
            snapshot.namespace().unwrap_or_default()
        );
        return Err(SnapshotFailure::event_only(SNAPSHOT_DELETE_PENDING, message.clone(), message));
    }

    let mut remove = vec![FINALIZER_VOLUME_SNAPSHOT_AS_SOURCE];
    // With Delete, the bound finalizer stays until the content is gone (its delete event brings the snapshot back).
    if !delete_content {
        remove.push(FINALIZER_VOLUME_SNAPSHOT_BOUND);
    }
    if group.is_some() {
        remove.push(FINALIZER_VOLUME_SNAPSHOT_IN_GROUP);
    }
    Ok(Some(SnapshotDeletion {
        content_annotation: content.and_then(being_deleted_annotation),
        delete_content: content.filter(|_| delete_content).map(|c| c.name_any()),
        finalizers: MetadataPatch::finalizers(&snapshot.metadata, &[], &remove)
            .map(|metadata| SnapshotPatch { metadata, ..Default::default() }),
    }))
}

/// A claim of the namespace is being restored from the snapshot (Pending, with the snapshot as its
/// `dataSource`). Deleting now would pull the snapshot from under the provisioner.
pub fn restore_pending<'a>(
    snapshot: &VolumeSnapshot,
    claims: impl IntoIterator<Item = &'a PersistentVolumeClaim>,
) -> bool {
    let name = snapshot.name_any();
    claims.into_iter().any(|claim| {
        let source = claim.spec.as_ref().and_then(|s| s.data_source.as_ref());
        let pending = claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Pending");
        pending
            && source.is_some_and(|s| {
                s.name == name && s.kind == KIND_VOLUME_SNAPSHOT && s.api_group.as_deref() == Some(GROUP)
            })
    })
}

/// The API refused to delete the content.
pub fn content_delete_failed(content_name: &str, api_error: &str) -> (PlannedEvent, String) {
    (
        PlannedEvent::warning(SNAPSHOT_CONTENT_OBJECT_DELETE_ERROR, "Failed to delete snapshot content API object"),
        format!("failed to delete VolumeSnapshotContent {content_name} from API server: {}", go_quoted(api_error)),
    )
}

#[cfg(test)]
mod tests;
