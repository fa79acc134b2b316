//! Statuses: the driver's answer on the group content (csi-snapshotter), the content's status on the group snapshot
//! (snapshot-controller; upstream: external-snapshotter, pkg/common-controller/groupsnapshot_controller_helper.go,
//! `updateGroupSnapshotStatus`), and when to ask the driver again.
//!
//! Beyond upstream: upstream writes a content's `volumeSnapshotInfoList` once, from the first answer, and stops
//! asking once the group is ready, so a member that was not ready in that answer stays "not ready" in the list.
//! Here the driver is asked again (CreateVolumeGroupSnapshot is idempotent by name) until the group and every member
//! are ready, each answer refreshes the list, and member contents follow their entries.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use sidecar_runtime::events::PlannedEvent;
use snapshot_api::{
    SnapshotError, VolumeGroupSnapshot, VolumeGroupSnapshotContent, VolumeGroupSnapshotContentStatus,
    VolumeGroupSnapshotStatus, VolumeSnapshotContentStatus, VolumeSnapshotInfo,
};

use super::members::member_content_status;
use super::names::{EVENT_GROUP_SNAPSHOT_CREATED, EVENT_GROUP_SNAPSHOT_READY};
use csi_client::proto;

/// A CSI timestamp as nanoseconds since the epoch; `None` for an unset or zero time (the driver did not say).
pub fn unix_nanos(time: Option<&prost_types::Timestamp>) -> Option<i64> {
    let time = time.filter(|t| t.seconds != 0 || t.nanos != 0)?;
    time.seconds.checked_mul(1_000_000_000)?.checked_add(i64::from(time.nanos))
}

fn kubernetes_time(time: Option<&prost_types::Timestamp>) -> Option<Time> {
    let time = time.filter(|t| t.seconds != 0 || t.nanos != 0)?;
    Timestamp::new(time.seconds, time.nanos).ok().map(Time)
}

/// The content's status after a successful CreateVolumeGroupSnapshot: the group handle, readiness, the creation time
/// (`now` when the driver gave none and none is known) and every member's entry, refreshed from the answer. The
/// error is cleared once the group is ready.
pub fn content_status_after_create(
    old: Option<&VolumeGroupSnapshotContentStatus>,
    answer: &proto::VolumeGroupSnapshot,
    now: Timestamp,
) -> VolumeGroupSnapshotContentStatus {
    let old = old.cloned().unwrap_or_default();
    let creation_time = kubernetes_time(answer.creation_time.as_ref()).or(old.creation_time).unwrap_or(Time(now));
    let mut list = old.volume_snapshot_info_list.unwrap_or_default();
    for snapshot in &answer.snapshots {
        let entry = VolumeSnapshotInfo {
            volume_handle: Some(snapshot.source_volume_id.clone()),
            snapshot_handle: Some(snapshot.snapshot_id.clone()),
            creation_time: unix_nanos(snapshot.creation_time.as_ref()),
            ready_to_use: Some(snapshot.ready_to_use),
            restore_size: (snapshot.size_bytes > 0).then_some(snapshot.size_bytes),
        };
        match list.iter_mut().find(|e| e.volume_handle == entry.volume_handle) {
            Some(known) => {
                // A later answer may leave out what an earlier one said; keep it.
                known.snapshot_handle = entry.snapshot_handle;
                known.ready_to_use = entry.ready_to_use;
                known.creation_time = entry.creation_time.or(known.creation_time);
                known.restore_size = entry.restore_size.or(known.restore_size);
            }
            None => list.push(entry),
        }
    }
    VolumeGroupSnapshotContentStatus {
        volume_group_snapshot_handle: Some(answer.group_snapshot_id.clone()),
        creation_time: Some(creation_time),
        ready_to_use: Some(answer.ready_to_use),
        error: if answer.ready_to_use { None } else { old.error },
        volume_snapshot_info_list: (!list.is_empty()).then_some(list),
    }
}

/// The call csi-snapshotter makes for a group content that is not being deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DriverCall {
    /// Dynamic (`source.volumeHandles`): CreateVolumeGroupSnapshot, first to cut the group, then again (idempotent
    /// by name) until it and every member are ready.
    Create,
    /// Pre-provisioned (`source.groupSnapshotHandles`): GetVolumeGroupSnapshot until it and every member are ready
    /// and its snapshots are listed (beyond upstream, whose list stays empty: the members are made from it).
    Get,
    /// Nothing to ask: settled, or a content of neither kind.
    Nothing,
}

/// What to ask the driver about `content`: a dynamic content is created, a pre-provisioned one is looked up with
/// GetVolumeGroupSnapshot (upstream: external-snapshotter, pkg/sidecar-controller/groupsnapshot_helper.go,
/// `syncGroupSnapshotContent`).
pub fn driver_call(content: &VolumeGroupSnapshotContent) -> DriverCall {
    let status = content.status.as_ref();
    let cut = status.and_then(|s| s.volume_group_snapshot_handle.as_ref()).is_some();
    let ready = status.and_then(|s| s.ready_to_use) == Some(true);
    let list = status.and_then(|s| s.volume_snapshot_info_list.as_deref()).unwrap_or_default();
    let members_ready = list.iter().all(|e| e.ready_to_use == Some(true));
    let settled = cut && ready && members_ready;
    let source = &content.spec.source;
    if source.volume_handles.as_ref().is_some_and(|h| !h.is_empty()) {
        if settled { DriverCall::Nothing } else { DriverCall::Create }
    } else if source.group_snapshot_handles.is_some() {
        if settled && !list.is_empty() { DriverCall::Nothing } else { DriverCall::Get }
    } else {
        DriverCall::Nothing
    }
}

/// Whether csi-snapshotter must ask the driver about a content it has an answer for again: the group or one of its
/// members is not ready yet (or, pre-provisioned, its snapshots are not listed yet).
pub fn needs_refresh(content: &VolumeGroupSnapshotContent) -> bool {
    let cut = content.status.as_ref().and_then(|s| s.volume_group_snapshot_handle.as_ref()).is_some();
    cut && driver_call(content) != DriverCall::Nothing
}

/// The status a member content should be given for its entry, if it differs from what it has. A member never goes
/// from ready back to not ready: csi-snapshotter's own ListSnapshots may have seen it ready before the group did.
pub fn member_status_update(
    info: &VolumeSnapshotInfo,
    group_handle: &str,
    current: Option<&VolumeSnapshotContentStatus>,
) -> Option<VolumeSnapshotContentStatus> {
    let mut wanted = member_content_status(info, group_handle);
    if let Some(current) = current {
        if current.ready_to_use == Some(true) {
            wanted.ready_to_use = Some(true);
        }
        wanted.creation_time = wanted.creation_time.or(current.creation_time);
        wanted.restore_size = wanted.restore_size.or(current.restore_size);
        wanted.error = current.error.clone().filter(|_| wanted.ready_to_use != Some(true));
    }
    (current != Some(&wanted)).then_some(wanted)
}

/// The group snapshot's status from its bound content, and the events of the first creation time and the first
/// readiness.
pub fn group_status(
    group: &VolumeGroupSnapshot,
    content: &VolumeGroupSnapshotContent,
) -> (VolumeGroupSnapshotStatus, Vec<PlannedEvent>) {
    let old = group.status.clone().unwrap_or_default();
    let from = content.status.clone().unwrap_or_default();
    let ready = from.ready_to_use.unwrap_or(false);
    let status = VolumeGroupSnapshotStatus {
        bound_volume_group_snapshot_content_name: content.metadata.name.clone(),
        creation_time: from.creation_time.or(old.creation_time.clone()),
        ready_to_use: Some(ready),
        // Once a content exists its error is the current one; the controller's earlier refusals are obsolete.
        error: if ready { None } else { from.error },
    };
    let key = format!(
        "{}/{}",
        group.metadata.namespace.as_deref().unwrap_or_default(),
        group.metadata.name.as_deref().unwrap_or_default()
    );
    let mut events = Vec::new();
    if old.creation_time.is_none() && status.creation_time.is_some() {
        let message = format!("GroupSnapshot {key} was successfully created by the CSI driver.");
        events.push(PlannedEvent::normal(EVENT_GROUP_SNAPSHOT_CREATED, message));
    }
    if old.ready_to_use != Some(true) && ready {
        events.push(PlannedEvent::normal(EVENT_GROUP_SNAPSHOT_READY, format!("GroupSnapshot {key} is ready to use.")));
    }
    (status, events)
}

/// The group snapshot's status once its content exists: bound to it, not ready yet, and without the error of an
/// earlier refusal.
pub fn status_after_content_created(group: &VolumeGroupSnapshot, content_name: &str) -> VolumeGroupSnapshotStatus {
    let mut status = group.status.clone().unwrap_or_default();
    status.bound_volume_group_snapshot_content_name = Some(content_name.to_string());
    status.ready_to_use = Some(false);
    status.error = None;
    status
}

/// The group snapshot's status after a refusal with `message`: the error and not ready. `None` when the status says
/// so already, so that a refusal retried with backoff does not write (and wake the group) again (upstream:
/// external-snapshotter, pkg/common-controller/groupsnapshot_controller_helper.go,
/// `updateGroupSnapshotErrorStatusWithEvent`).
pub fn refused_status(group: &VolumeGroupSnapshot, message: &str, now: Time) -> Option<VolumeGroupSnapshotStatus> {
    let mut status = group.status.clone().unwrap_or_default();
    if status.error.as_ref().and_then(|e| e.message.as_deref()) == Some(message) {
        return None;
    }
    status.error = Some(SnapshotError { time: Some(now), message: Some(message.to_string()) });
    status.ready_to_use = Some(false);
    Some(status)
}

/// The group content's status after a failed or refused driver call: the error recorded, the rest kept.
pub fn content_status_with_error(
    content: &VolumeGroupSnapshotContent,
    message: &str,
    now: Time,
) -> VolumeGroupSnapshotContentStatus {
    let mut status = content.status.clone().unwrap_or_default();
    status.error = Some(SnapshotError { time: Some(now), message: Some(message.to_string()) });
    status
}

#[cfg(test)]
mod tests;
