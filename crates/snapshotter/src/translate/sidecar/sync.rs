//! What one sync of a content does: the delete path first, then the first CreateSnapshot, then readiness. A content
//! that is ready costs no driver call (external-snapshotter pkg/sidecar-controller/snapshot_controller.go,
//! syncContent).

use snapshot_api::VolumeSnapshotContent;
use snapshot_api::names::{ANN_VOLUME_GROUP_SNAPSHOT_HANDLE, ANN_VOLUME_SNAPSHOT_BEING_CREATED};

use super::content::{has_annotation, is_group_member};
use super::deletion::{DeletionStep, deletion_step, should_delete};
use super::patch::ContentPatch;

/// The step a sync takes.
#[derive(Clone, Debug, PartialEq)]
pub enum SyncStep {
    /// The content is going away and the sidecar may act on it (see [`should_delete`]).
    Delete(DeletionStep),
    /// A dynamic content without a status: cut the snapshot ([`super::creation`]).
    Create,
    /// Not ready, dynamic and not part of a group: call CreateSnapshot again, which is idempotent by name, until the
    /// driver says the snapshot is ready ([`super::creation`], [`super::outcome::Phase::Poll`]).
    PollByCreate,
    /// Not ready, pre-provisioned or a group member: ask ListSnapshots ([`super::readiness`]).
    PollByList,
    /// Ready, but the being-created annotation is still there (a crash between the two writes): drop it.
    DropBeingCreated(ContentPatch),
    /// Nothing to do: ready; or a group member whose status the group snapshotter has yet to fill in.
    Nothing,
}

/// The step for `content` as it is now.
pub fn sync_step(content: &VolumeSnapshotContent) -> SyncStep {
    if should_delete(content) {
        return SyncStep::Delete(deletion_step(content));
    }
    let status = content.status.as_ref();
    if content.spec.source.volume_handle.is_some() && status.is_none() {
        if has_annotation(content, ANN_VOLUME_GROUP_SNAPSHOT_HANDLE) {
            // Cut by CreateVolumeGroupSnapshot; the group snapshotter writes the status.
            return SyncStep::Nothing;
        }
        return SyncStep::Create;
    }
    if status.and_then(|s| s.ready_to_use) == Some(true) {
        if has_annotation(content, ANN_VOLUME_SNAPSHOT_BEING_CREATED) {
            return SyncStep::DropBeingCreated(ContentPatch::annotation(ANN_VOLUME_SNAPSHOT_BEING_CREATED, None));
        }
        return SyncStep::Nothing;
    }
    if content.spec.source.snapshot_handle.is_some() || is_group_member(content) {
        SyncStep::PollByList
    } else {
        SyncStep::PollByCreate
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;
    use snapshot_api::VolumeSnapshotContentStatus;
    use snapshot_api::names::ANN_VOLUME_SNAPSHOT_BEING_DELETED;

    use super::*;
    use crate::translate::sidecar::fixtures::{annotate, content, pre_provisioned};

    fn with_status(mut content: VolumeSnapshotContent, ready: bool, group: bool) -> VolumeSnapshotContent {
        content.status = Some(VolumeSnapshotContentStatus {
            snapshot_handle: Some("snap-1".into()),
            ready_to_use: Some(ready),
            volume_group_snapshot_handle: group.then(|| "group-1".into()),
            ..Default::default()
        });
        content
    }

    #[test]
    fn steps() {
        let deleting = {
            let mut c = annotate(with_status(content(), true, false), ANN_VOLUME_SNAPSHOT_BEING_DELETED, "yes");
            c.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
            c
        };
        let deleting_step = deletion_step(&deleting);
        let waiting_deletion = {
            // A deletionTimestamp without the controller's go-ahead: the content is still synced as usual.
            let mut c = content();
            c.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
            c
        };
        let drop = ContentPatch::annotation(ANN_VOLUME_SNAPSHOT_BEING_CREATED, None);
        // (rule, content, step)
        let table = [
            ("deletion first", deleting, SyncStep::Delete(deleting_step)),
            ("dynamic without status: create", content(), SyncStep::Create),
            ("deletion not yet allowed: create anyway", waiting_deletion, SyncStep::Create),
            (
                "a group member's content is not cut alone",
                annotate(content(), ANN_VOLUME_GROUP_SNAPSHOT_HANDLE, "group-1"),
                SyncStep::Nothing,
            ),
            ("ready: nothing", with_status(content(), true, false), SyncStep::Nothing),
            (
                "ready with the annotation left: drop it",
                annotate(with_status(content(), true, false), ANN_VOLUME_SNAPSHOT_BEING_CREATED, "yes"),
                SyncStep::DropBeingCreated(drop),
            ),
            ("dynamic, not ready: CreateSnapshot again", with_status(content(), false, false), SyncStep::PollByCreate),
            ("pre-provisioned without status: ListSnapshots", pre_provisioned(), SyncStep::PollByList),
            ("pre-provisioned, not ready", with_status(pre_provisioned(), false, false), SyncStep::PollByList),
            ("group member, not ready: ListSnapshots", with_status(content(), false, true), SyncStep::PollByList),
        ];
        for (rule, content, want) in table {
            assert_eq!(sync_step(&content), want, "{rule}");
        }
    }
}
