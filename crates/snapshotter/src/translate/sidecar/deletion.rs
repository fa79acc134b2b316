//! Deleting a content: whether the sidecar may act on a deletionTimestamp, the DeleteSnapshot call, and the writes
//! after it (external-snapshotter pkg/sidecar-controller/snapshot_controller.go, shouldDelete and
//! deleteCSISnapshotOperation).
//!
//! The steps of one deletion take several syncs, each re-reading the content: DeleteSnapshot, then clear
//! `status.snapshotHandle` (so that a crash after the call does not call it again with nothing left to delete, and
//! the next sync sees nothing to delete), then remove the bound-protection finalizer.

use csi_client::proto::DeleteSnapshotRequest;
use sidecar_runtime::events::PlannedEvent;
use snapshot_api::names::{
    ANN_VOLUME_SNAPSHOT_BEING_CREATED, ANN_VOLUME_SNAPSHOT_BEING_DELETED, FINALIZER_VOLUME_SNAPSHOT_CONTENT_BOUND,
};
use snapshot_api::{DeletionPolicy, VolumeSnapshotContent, VolumeSnapshotContentStatus};

use super::content::has_annotation;
use super::patch::{ContentPatch, ContentStatusPatch};
use super::secrets::{SecretRef, deletion_secret};

/// Event reason of every failed step of a deletion.
pub const REASON_SNAPSHOT_DELETE_ERROR: &str = "SnapshotDeleteError";

/// Whether the sidecar may delete `content` now. It needs a deletionTimestamp, and then:
/// - a pre-provisioned content no VolumeSnapshot is bound to (`volumeSnapshotRef.uid` empty) is deleted;
/// - while the being-created annotation is there, a CreateSnapshot may be in flight, so deletion waits for its answer
///   (deleting now could leak the snapshot it makes);
/// - otherwise it waits for the snapshot-controller's being-deleted annotation.
pub fn should_delete(content: &VolumeSnapshotContent) -> bool {
    if content.metadata.deletion_timestamp.is_none() {
        return false;
    }
    let unbound = content.spec.volume_snapshot_ref.uid.as_deref().unwrap_or_default().is_empty();
    if content.spec.source.snapshot_handle.is_some() && unbound {
        return true;
    }
    if has_annotation(content, ANN_VOLUME_SNAPSHOT_BEING_CREATED) {
        return false;
    }
    has_annotation(content, ANN_VOLUME_SNAPSHOT_BEING_DELETED)
}

/// DeleteSnapshot and the Secret whose data goes into its `secrets`.
#[derive(Clone, Debug, PartialEq)]
pub struct DeleteSnapshotCall {
    /// `secrets` is left empty: the controller fills it from [`DeleteSnapshotCall::secret`].
    pub request: DeleteSnapshotRequest,
    pub secret: Option<SecretRef>,
}

/// What a deletion does next.
#[derive(Clone, Debug, PartialEq)]
pub enum DeletionStep {
    /// Delete the storage snapshot; on success write [`snapshot_deleted`].
    DeleteSnapshot(DeleteSnapshotCall),
    /// The storage snapshot is gone, kept (`Retain`), or the group's to delete: let the content go.
    RemoveFinalizer(ContentPatch),
    /// Nothing left for the sidecar.
    Done,
}

/// The next step of deleting `content` (call only when [`should_delete`] is true).
///
/// DeleteSnapshot is called when the policy is `Delete`, the status names a snapshot handle, and the snapshot is not
/// part of a group snapshot: members are deleted with their group, by DeleteVolumeGroupSnapshot.
pub fn deletion_step(content: &VolumeSnapshotContent) -> DeletionStep {
    let status = content.status.as_ref();
    let part_of_group = status.is_some_and(|s| s.volume_group_snapshot_handle.is_some());
    let status_handle = status.and_then(|s| s.snapshot_handle.as_deref());
    if content.spec.deletion_policy == DeletionPolicy::Delete
        && !part_of_group
        && let Some(status_handle) = status_handle
    {
        let snapshot_id = Some(status_handle)
            .filter(|h| !h.is_empty())
            .or(content.spec.source.snapshot_handle.as_deref())
            .unwrap_or_default();
        if !snapshot_id.is_empty() {
            return DeletionStep::DeleteSnapshot(DeleteSnapshotCall {
                request: DeleteSnapshotRequest { snapshot_id: snapshot_id.to_string(), secrets: Default::default() },
                secret: deletion_secret(content),
            });
        }
    }
    match ContentPatch::remove_finalizer(content, FINALIZER_VOLUME_SNAPSHOT_CONTENT_BOUND) {
        Some(patch) => DeletionStep::RemoveFinalizer(patch),
        None => DeletionStep::Done,
    }
}

/// The status after a successful DeleteSnapshot: no handle, readiness, creation time or size; an error stays.
pub fn snapshot_deleted(content: &VolumeSnapshotContent) -> ContentStatusPatch {
    let status = content.status.clone().unwrap_or_default();
    ContentStatusPatch {
        status: VolumeSnapshotContentStatus {
            snapshot_handle: None,
            creation_time: None,
            restore_size: None,
            ready_to_use: None,
            ..status
        },
    }
}

/// Which step of a deletion failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeletionFailure {
    /// The Secret named by the deletion-secret annotations could not be read.
    Secret,
    /// DeleteSnapshot failed.
    Driver,
    /// The status could not be cleared after DeleteSnapshot.
    StatusClear,
}

/// The Warning for a failed step; the detail goes to the log, since it may quote the driver at length.
pub fn deletion_failed_event(failure: DeletionFailure) -> PlannedEvent {
    let message = match failure {
        DeletionFailure::Secret => "Failed to get snapshot credentials",
        DeletionFailure::Driver => "Failed to delete snapshot",
        DeletionFailure::StatusClear => "Failed to clear content status",
    };
    PlannedEvent::warning(REASON_SNAPSHOT_DELETE_ERROR, message)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;
    use snapshot_api::SnapshotError;
    use snapshot_api::names::{ANN_DELETION_SECRET_NAME, ANN_DELETION_SECRET_NAMESPACE};

    use super::*;
    use crate::translate::sidecar::fixtures::{annotate, content, pre_provisioned};

    fn deleted(mut content: VolumeSnapshotContent) -> VolumeSnapshotContent {
        content.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        content
    }

    fn unbound(mut content: VolumeSnapshotContent) -> VolumeSnapshotContent {
        content.spec.volume_snapshot_ref.uid = None;
        content
    }

    #[test]
    fn should_delete_rules() {
        let being_deleted = |c| annotate(c, ANN_VOLUME_SNAPSHOT_BEING_DELETED, "yes");
        let being_created = |c| annotate(c, ANN_VOLUME_SNAPSHOT_BEING_CREATED, "yes");
        // (rule, content, delete)
        let table = [
            ("no deletionTimestamp: never", being_deleted(content()), false),
            ("pre-provisioned and unbound: delete", deleted(unbound(pre_provisioned())), true),
            (
                "pre-provisioned and unbound, even while being created",
                deleted(being_created(unbound(pre_provisioned()))),
                true,
            ),
            ("dynamic and unbound: wait for the controller", deleted(unbound(content())), false),
            ("being created: wait for the driver's answer", deleted(being_deleted(being_created(content()))), false),
            ("the controller said so: delete", deleted(being_deleted(content())), true),
            ("bound pre-provisioned, controller said so", deleted(being_deleted(pre_provisioned())), true),
            ("deletionTimestamp alone: wait", deleted(content()), false),
        ];
        for (rule, content, want) in table {
            assert_eq!(should_delete(&content), want, "{rule}");
        }
    }

    #[test]
    fn deletion_steps() {
        let status = |handle: Option<&str>, group: Option<&str>| VolumeSnapshotContentStatus {
            snapshot_handle: handle.map(str::to_string),
            volume_group_snapshot_handle: group.map(str::to_string),
            ready_to_use: Some(true),
            ..Default::default()
        };
        let with = |mut c: VolumeSnapshotContent, s: VolumeSnapshotContentStatus, finalizer: bool| {
            c.status = Some(s);
            if finalizer {
                c.metadata.finalizers = Some(vec![FINALIZER_VOLUME_SNAPSHOT_CONTENT_BOUND.into()]);
            }
            c
        };
        let retained = |mut c: VolumeSnapshotContent| {
            c.spec.deletion_policy = DeletionPolicy::Retain;
            c
        };
        let call = |id: &str, secret: Option<SecretRef>| {
            DeletionStep::DeleteSnapshot(DeleteSnapshotCall {
                request: DeleteSnapshotRequest { snapshot_id: id.into(), secrets: Default::default() },
                secret,
            })
        };
        let remove = |c: &VolumeSnapshotContent| {
            DeletionStep::RemoveFinalizer(ContentPatch {
                resource_version: c.metadata.resource_version.clone(),
                finalizers: Some(vec![]),
                ..Default::default()
            })
        };
        let with_secret = annotate(
            annotate(with(content(), status(Some("snap-1"), None), true), ANN_DELETION_SECRET_NAME, "s"),
            ANN_DELETION_SECRET_NAMESPACE,
            "ns",
        );
        let no_handle = with(content(), status(None, None), true);
        let group_member = with(content(), status(Some("snap-1"), Some("group-1")), true);
        let retain = retained(with(content(), status(Some("snap-1"), None), true));
        // (rule, content, step)
        let table = [
            (
                "Delete policy with a handle: DeleteSnapshot",
                with(content(), status(Some("snap-1"), None), true),
                call("snap-1", None),
            ),
            (
                "the secret is the annotations' reference",
                with_secret,
                call("snap-1", Some(SecretRef { namespace: "ns".into(), name: "s".into() })),
            ),
            (
                "an empty status handle falls back to the spec's",
                with(pre_provisioned(), status(Some(""), None), true),
                call("snap-7", None),
            ),
            ("no handle in the status (deleted already): drop the finalizer", no_handle.clone(), remove(&no_handle)),
            ("a group member is deleted with its group", group_member.clone(), remove(&group_member)),
            ("Retain keeps the snapshot", retain.clone(), remove(&retain)),
            ("no finalizer left: done", with(content(), status(None, None), false), DeletionStep::Done),
        ];
        for (rule, content, want) in table {
            assert_eq!(deletion_step(&content), want, "{rule}");
        }
    }

    #[test]
    fn after_delete_snapshot_the_status_is_cleared() {
        let error = SnapshotError { message: Some("earlier".into()), time: None };
        let mut c = content();
        c.status = Some(VolumeSnapshotContentStatus {
            snapshot_handle: Some("snap-1".into()),
            creation_time: Some(1),
            restore_size: Some(2),
            ready_to_use: Some(true),
            error: Some(error.clone()),
            volume_group_snapshot_handle: None,
        });
        let cleared = snapshot_deleted(&c).apply(&c);
        assert_eq!(cleared.status, Some(VolumeSnapshotContentStatus { error: Some(error), ..Default::default() }));
        // The next sync has nothing left to delete.
        let next = deleted(annotate(cleared, ANN_VOLUME_SNAPSHOT_BEING_DELETED, "yes"));
        assert_eq!(deletion_step(&next), DeletionStep::Done);
    }

    #[test]
    fn failure_events() {
        for failure in [DeletionFailure::Secret, DeletionFailure::Driver, DeletionFailure::StatusClear] {
            let event = deletion_failed_event(failure);
            assert_eq!((event.event_type, event.reason), (sidecar_runtime::EventType::Warning, "SnapshotDeleteError"));
            assert!(event.message.starts_with("Failed to"), "{failure:?}");
        }
    }
}
