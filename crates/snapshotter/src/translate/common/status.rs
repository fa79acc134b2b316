//! The content's status carried to the snapshot, and the events of the first creation and readiness
//! (external-snapshotter pkg/common-controller/snapshot_controller.go, updateSnapshotStatus).

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use sidecar_runtime::events::PlannedEvent;
use sidecar_runtime::quantity::binary_si_quantity;
use snapshot_api::{SnapshotError, VolumeSnapshot, VolumeSnapshotContent, VolumeSnapshotStatus};

use super::names::{is_created, is_ready, snapshot_key};
use super::patch::SnapshotStatusWrite;
use super::reasons::{SNAPSHOT_CREATED, SNAPSHOT_READY};

/// What carrying the status over writes: nothing when the snapshot already says it all.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StatusUpdate {
    pub write: Option<SnapshotStatusWrite>,
    /// `SnapshotCreated` the first time a creation time appears, `SnapshotReady` the first time it is ready.
    pub events: Vec<PlannedEvent>,
}

/// The snapshot's status after taking in `content`'s (read fresh by the controller, as upstream GETs it).
/// `group_snapshot_name` is the VolumeGroupSnapshot found for the content's `volumeGroupSnapshotHandle`, if any.
///
/// - `boundVolumeSnapshotContentName`, `creationTime` (from int64 ns) and `volumeGroupSnapshotName` are set once;
/// - `readyToUse` follows the content (false while it has none);
/// - `restoreSize` (binary-SI) is set when missing, or when it was 0 and the content now reports more;
/// - `error` follows the content's: copied, and gone when the content has none (which the driver ensures once ready).
///   When both carry an error and either has no time, the snapshot's stays (upstream's comparison never fires then).
pub fn snapshot_status(
    snapshot: &VolumeSnapshot,
    content: &VolumeSnapshotContent,
    group_snapshot_name: Option<&str>,
) -> StatusUpdate {
    let from = content.status.clone().unwrap_or_default();
    let current = snapshot.status.clone().unwrap_or_default();
    let ready = from.ready_to_use.unwrap_or(false);
    let size = from.restore_size;
    let mut next = VolumeSnapshotStatus {
        bound_volume_snapshot_content_name: current
            .bound_volume_snapshot_content_name
            .clone()
            .or_else(|| Some(content.name_any())),
        creation_time: current.creation_time.clone().or_else(|| from.creation_time.map(unix_nanos)),
        ready_to_use: Some(ready),
        volume_group_snapshot_name: current
            .volume_group_snapshot_name
            .clone()
            .or_else(|| group_snapshot_name.map(str::to_string)),
        ..current.clone()
    };
    let size_known = current.restore_size.as_ref().is_some_and(|q| !is_zero(q));
    if let Some(size) = size
        && (current.restore_size.is_none() || (!size_known && size > 0))
    {
        next.restore_size = Some(binary_si_quantity(size));
    }
    let keep_error = snapshot.status.is_some()
        && matches!((&current.error, &from.error), (Some(a), Some(b)) if a.time.is_none() || b.time.is_none());
    if !keep_error || (ready && current.ready_to_use != Some(true)) {
        next.error = from.error.clone();
    }

    if snapshot.status.as_ref() == Some(&next) {
        return StatusUpdate::default();
    }
    let after = VolumeSnapshot { status: Some(next.clone()), ..snapshot.clone() };
    let key = snapshot_key(snapshot);
    let mut events = Vec::new();
    if !is_created(snapshot) && is_created(&after) {
        events.push(PlannedEvent::normal(
            SNAPSHOT_CREATED,
            format!("Snapshot {key} was successfully created by the CSI driver."),
        ));
    }
    if !is_ready(snapshot) && is_ready(&after) {
        events.push(PlannedEvent::normal(SNAPSHOT_READY, format!("Snapshot {key} is ready to use.")));
    }
    StatusUpdate {
        write: Some(SnapshotStatusWrite { resource_version: snapshot.metadata.resource_version.clone(), status: next }),
        events,
    }
}

/// Whether the content's status says something the snapshot's does not yet, so the content sync enqueues the
/// snapshot (upstream's needsUpdateSnapshotStatus).
///
/// Unlike upstream, an error on the content that the snapshot does not show yet counts too. Upstream looks at the
/// bound name, creation time, readiness and size only, so a csi-snapshotter error written after the snapshot's last
/// sync (a missing Secret, a failed CreateSnapshot) reached the snapshot at its next resync, up to 15 minutes later.
pub fn snapshot_needs_status(snapshot: &VolumeSnapshot, content: &VolumeSnapshotContent) -> bool {
    let Some(from) = content.status.as_ref() else { return false };
    let Some(current) = snapshot.status.as_ref() else { return true };
    let message = |error: &Option<SnapshotError>| error.as_ref().and_then(|e| e.message.clone());
    current.bound_volume_snapshot_content_name.is_none()
        || (current.creation_time.is_none() && from.creation_time.is_some())
        || (from.ready_to_use.is_some() && current.ready_to_use != from.ready_to_use)
        || (current.restore_size.is_none() && from.restore_size.is_some())
        || (current.restore_size.as_ref().is_some_and(is_zero) && from.restore_size.is_some_and(|s| s > 0))
        || (from.error.is_some() && message(&from.error) != message(&current.error))
}

/// `time.Unix(0, ns)`: the content's creation time in nanoseconds as a `metav1.Time`.
pub fn unix_nanos(nanos: i64) -> Time {
    Time(Timestamp::from_nanosecond(i128::from(nanos)).unwrap_or(Timestamp::UNIX_EPOCH))
}

/// Whether a quantity is zero (`0`, `0Gi`, `0.0`…).
fn is_zero(quantity: &Quantity) -> bool {
    let digits = quantity.0.trim_start_matches(['+', '-']);
    let number_end = digits.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(digits.len());
    digits[..number_end].chars().all(|c| c == '0' || c == '.')
}

#[cfg(test)]
mod tests;
