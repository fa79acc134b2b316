//! What the driver's answer does to a content: the status to write, whether the being-created annotation goes, the
//! event, and whether to look again (external-snapshotter pkg/sidecar-controller/snapshot_controller.go:
//! createSnapshotWrapper, updateSnapshotContentStatus, isCSIFinalError).

use csi_client::proto::Snapshot;
use csi_client::{Call, CallError};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use sidecar_runtime::events::PlannedEvent;
use snapshot_api::names::ANN_VOLUME_SNAPSHOT_BEING_CREATED;
use snapshot_api::{SnapshotError, VolumeSnapshotContent, VolumeSnapshotContentStatus};

use super::content::has_annotation;
use super::patch::{ContentPatch, ContentStatusPatch};

/// Warning when the first CreateSnapshot of a content fails.
pub const REASON_SNAPSHOT_CREATION_FAILED: &str = "SnapshotCreationFailed";
/// Warning when a readiness check (CreateSnapshot again, or ListSnapshots) fails.
pub const REASON_CHECK_AND_UPDATE_FAILED: &str = "SnapshotContentCheckandUpdateFailed";

/// Which sync asked the driver: the event reason and the message differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// The first CreateSnapshot of a content without status.
    Create,
    /// A readiness check of a content that is not ready yet.
    Poll,
}

/// A snapshot as the driver described it, in the units of the content's status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotInfo {
    pub snapshot_id: String,
    pub ready_to_use: bool,
    /// Nanoseconds since the Unix epoch.
    pub creation_time: i64,
    /// Bytes; 0 when the driver did not say.
    pub restore_size: i64,
    /// The group snapshot the driver says the snapshot belongs to.
    pub group_snapshot_id: Option<String>,
}

impl SnapshotInfo {
    /// From a CreateSnapshot or ListSnapshots answer. A missing or zero creation time becomes `now` (in ns): the
    /// status must name one, and the driver did not.
    pub fn from_csi(snapshot: &Snapshot, now: i64) -> SnapshotInfo {
        let creation_time = snapshot
            .creation_time
            .as_ref()
            .map(|t| t.seconds.saturating_mul(1_000_000_000).saturating_add(i64::from(t.nanos)))
            .filter(|ns| *ns != 0)
            .unwrap_or(now);
        SnapshotInfo {
            snapshot_id: snapshot.snapshot_id.clone(),
            ready_to_use: snapshot.ready_to_use,
            creation_time,
            restore_size: snapshot.size_bytes,
            group_snapshot_id: Some(snapshot.group_snapshot_id.clone()).filter(|g| !g.is_empty()),
        }
    }
}

/// The writes after the driver described the snapshot.
#[derive(Clone, Debug, PartialEq)]
pub struct Described {
    /// `None` when the status says all of it already.
    pub status: Option<ContentStatusPatch>,
    /// Written after the status: the driver has answered with an id, so the content may now be deleted.
    pub drop_being_created: Option<ContentPatch>,
    /// Look again (with the queue's backoff) while the snapshot is not ready.
    pub requeue: bool,
}

/// The status after the driver described the snapshot. What the status says already stays (handle, creation time,
/// size, group); readiness follows the driver, and an earlier error is cleared once the snapshot is ready.
pub fn snapshot_described(content: &VolumeSnapshotContent, info: &SnapshotInfo) -> Described {
    let old = content.status.clone().unwrap_or_default();
    let mut new = old.clone();
    new.snapshot_handle.get_or_insert_with(|| info.snapshot_id.clone());
    new.creation_time.get_or_insert(info.creation_time);
    if new.restore_size.is_none() && info.restore_size > 0 {
        new.restore_size = Some(info.restore_size);
    }
    if new.ready_to_use != Some(info.ready_to_use) {
        new.ready_to_use = Some(info.ready_to_use);
        if info.ready_to_use {
            new.error = None;
        }
    }
    if new.volume_group_snapshot_handle.is_none() {
        new.volume_group_snapshot_handle = info.group_snapshot_id.clone();
    }
    let changed = content.status.is_none() || new != old;
    Described {
        status: changed.then_some(ContentStatusPatch { status: new }),
        drop_being_created: drop_being_created(content),
        requeue: !info.ready_to_use,
    }
}

/// What a CreateSnapshot answer without a snapshot id records, as the error of the step.
pub const EMPTY_SNAPSHOT_ID: &str = "the driver returned an empty snapshot id";

/// The driver answered CreateSnapshot. An answer without a snapshot id names nothing the content could record, and
/// nothing DeleteSnapshot could remove later: it is recorded as the step's error, the being-created annotation stays
/// (the driver may hold a snapshot under the request's name), and CreateSnapshot, idempotent by name, is asked
/// again. Upstream records the empty handle, which no later answer replaces (external-snapshotter
/// pkg/sidecar-controller/snapshot_controller.go, updateSnapshotContentStatus).
pub fn create_snapshot_answered(
    content: &VolumeSnapshotContent,
    phase: Phase,
    info: &SnapshotInfo,
    now: Time,
) -> Result<Described, Box<Failed>> {
    if info.snapshot_id.is_empty() {
        return Err(Box::new(step_failed(content, phase, EMPTY_SNAPSHOT_ID, now)));
    }
    Ok(snapshot_described(content, info))
}

/// The writes after a failed step.
#[derive(Clone, Debug, PartialEq)]
pub struct Failed {
    /// Written first: only after a final error of CreateSnapshot, which says no snapshot was made.
    pub drop_being_created: Option<ContentPatch>,
    /// `status.error` and `readyToUse: false`; `None` when the same message is recorded already.
    pub status: Option<ContentStatusPatch>,
    pub event: PlannedEvent,
}

/// CreateSnapshot failed. Canceled, DeadlineExceeded, Unavailable, ResourceExhausted, Aborted and failures that are
/// not a gRPC status leave the outcome unknown: the annotation stays, and deletion keeps waiting for an answer. Any
/// other code is final, and the annotation goes. Either way the error is recorded and the content is retried.
pub fn create_snapshot_failed(content: &VolumeSnapshotContent, phase: Phase, error: &CallError, now: Time) -> Failed {
    let volume = content.spec.source.volume_handle.as_deref().unwrap_or_default();
    let text = error.go_text();
    let mut failed =
        step_failed(content, phase, &format!("failed to take snapshot of the volume {volume}: {text:?}"), now);
    if error.disposition_for(Call::CreateSnapshot).is_final() {
        failed.drop_being_created = drop_being_created(content);
    }
    failed
}

/// A step that did not reach the driver, or ListSnapshots, failed with `error`: record it, keep the annotation.
pub fn step_failed(content: &VolumeSnapshotContent, phase: Phase, error: &str, now: Time) -> Failed {
    let (reason, message) = match phase {
        Phase::Create => (REASON_SNAPSHOT_CREATION_FAILED, format!("Failed to create snapshot: {error}")),
        Phase::Poll => {
            (REASON_CHECK_AND_UPDATE_FAILED, format!("Failed to check and update snapshot content: {error}"))
        }
    };
    let old = content.status.clone().unwrap_or_default();
    let already = old.error.as_ref().and_then(|e| e.message.as_deref()) == Some(message.as_str());
    let status = (!already).then(|| ContentStatusPatch {
        status: VolumeSnapshotContentStatus {
            error: Some(SnapshotError { time: Some(now), message: Some(message.clone()) }),
            ready_to_use: Some(false),
            ..old
        },
    });
    Failed { drop_being_created: None, status, event: PlannedEvent::warning(reason, message) }
}

fn drop_being_created(content: &VolumeSnapshotContent) -> Option<ContentPatch> {
    has_annotation(content, ANN_VOLUME_SNAPSHOT_BEING_CREATED)
        .then(|| ContentPatch::annotation(ANN_VOLUME_SNAPSHOT_BEING_CREATED, None))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use k8s_openapi::jiff::Timestamp;
    use prost_types::Timestamp as ProtoTimestamp;
    use tonic::{Code, Status};

    use super::*;
    use crate::translate::sidecar::fixtures::{annotate, content};

    const NOW: i64 = 1_700_000_000_000_000_000;

    fn info(ready: bool, size: i64) -> SnapshotInfo {
        SnapshotInfo {
            snapshot_id: "snap-1".into(),
            ready_to_use: ready,
            creation_time: 5,
            restore_size: size,
            group_snapshot_id: None,
        }
    }

    fn status(handle: &str, ready: bool, size: Option<i64>, error: Option<&str>) -> VolumeSnapshotContentStatus {
        VolumeSnapshotContentStatus {
            snapshot_handle: Some(handle.into()),
            creation_time: Some(5),
            restore_size: size,
            ready_to_use: Some(ready),
            error: error.map(|m| SnapshotError { time: None, message: Some(m.into()) }),
            volume_group_snapshot_handle: None,
        }
    }

    #[test]
    fn creation_time_from_the_driver_or_now() {
        let snapshot = |time: Option<ProtoTimestamp>| Snapshot {
            size_bytes: 10,
            snapshot_id: "snap-1".into(),
            source_volume_id: "vol-1".into(),
            creation_time: time,
            ready_to_use: true,
            group_snapshot_id: String::new(),
            accessible_topology: Vec::new(),
        };
        // (rule, timestamp, creation time in ns)
        let table = [
            ("seconds and nanos", Some(ProtoTimestamp { seconds: 2, nanos: 3 }), 2_000_000_003),
            ("missing: now", None, NOW),
            ("zero: now", Some(ProtoTimestamp { seconds: 0, nanos: 0 }), NOW),
        ];
        for (rule, time, want) in table {
            assert_eq!(SnapshotInfo::from_csi(&snapshot(time), NOW).creation_time, want, "{rule}");
        }
        let mut grouped = snapshot(None);
        grouped.group_snapshot_id = "group-1".into();
        assert_eq!(SnapshotInfo::from_csi(&grouped, NOW).group_snapshot_id.as_deref(), Some("group-1"));
        assert_eq!(SnapshotInfo::from_csi(&snapshot(None), NOW).group_snapshot_id, None);
    }

    #[test]
    fn described_snapshots() {
        let creating = annotate(content(), ANN_VOLUME_SNAPSHOT_BEING_CREATED, "yes");
        let with = |mut c: VolumeSnapshotContent, s: VolumeSnapshotContentStatus| {
            c.status = Some(s);
            c
        };
        let drop = Some(ContentPatch::annotation(ANN_VOLUME_SNAPSHOT_BEING_CREATED, None));
        let write = |s: VolumeSnapshotContentStatus| Some(ContentStatusPatch { status: s });
        let grouped = SnapshotInfo { group_snapshot_id: Some("group-1".into()), ..info(true, 0) };
        // (rule, content, driver's answer, status written, annotation dropped, requeue)
        let table = [
            (
                "ready: status written, annotation dropped",
                creating.clone(),
                info(true, 100),
                write(status("snap-1", true, Some(100), None)),
                drop.clone(),
                false,
            ),
            (
                "not ready: the id is known, so the annotation goes too; look again",
                creating.clone(),
                info(false, 100),
                write(status("snap-1", false, Some(100), None)),
                drop,
                true,
            ),
            ("size 0 is not written", content(), info(true, 0), write(status("snap-1", true, None, None)), None, false),
            (
                "becoming ready clears the error",
                with(content(), status("snap-1", false, None, Some("earlier"))),
                info(true, 0),
                write(status("snap-1", true, None, None)),
                None,
                false,
            ),
            (
                "still not ready keeps the error",
                with(content(), status("snap-1", true, None, Some("earlier"))),
                info(false, 0),
                write(status("snap-1", false, None, Some("earlier"))),
                None,
                true,
            ),
            (
                "what the status says stays: handle, creation time, size",
                with(content(), status("first", false, Some(7), None)),
                info(true, 100),
                write(status("first", true, Some(7), None)),
                None,
                false,
            ),
            (
                "nothing new: no write",
                with(content(), status("snap-1", false, None, None)),
                info(false, 0),
                None,
                None,
                true,
            ),
            (
                "the group the driver names is recorded",
                content(),
                grouped,
                write(VolumeSnapshotContentStatus {
                    volume_group_snapshot_handle: Some("group-1".into()),
                    ..status("snap-1", true, None, None)
                }),
                None,
                false,
            ),
        ];
        for (rule, content, info, status, drop, requeue) in table {
            let want = Described { status, drop_being_created: drop, requeue };
            assert_eq!(snapshot_described(&content, &info), want, "{rule}");
        }
    }

    #[test]
    fn answers_without_a_snapshot_id() {
        let now = Time(Timestamp::UNIX_EPOCH);
        let creating = annotate(content(), ANN_VOLUME_SNAPSHOT_BEING_CREATED, "yes");
        let polled = {
            let mut c = creating.clone();
            c.status = Some(VolumeSnapshotContentStatus {
                error: Some(SnapshotError {
                    time: None,
                    message: Some(format!("Failed to create snapshot: {EMPTY_SNAPSHOT_ID}")),
                }),
                ready_to_use: Some(false),
                ..Default::default()
            });
            c
        };
        let empty = SnapshotInfo { snapshot_id: String::new(), ..info(true, 100) };
        // (rule, content, phase, answer, event reason, status written, handle recorded)
        let table = [
            (
                "first answer without an id: an error, no handle",
                creating.clone(),
                Phase::Create,
                empty.clone(),
                Some(REASON_SNAPSHOT_CREATION_FAILED),
                true,
                None,
            ),
            (
                "again without an id: an error of the check",
                polled.clone(),
                Phase::Poll,
                empty,
                Some(REASON_CHECK_AND_UPDATE_FAILED),
                true,
                None,
            ),
            ("then with an id: recorded", polled, Phase::Poll, info(true, 100), None, true, Some("snap-1")),
            ("an id at once: recorded", creating, Phase::Create, info(false, 0), None, true, Some("snap-1")),
        ];
        for (rule, content, phase, answer, reason, written, handle) in table {
            match create_snapshot_answered(&content, phase, &answer, now.clone()) {
                Err(failed) => {
                    assert_eq!(Some(failed.event.reason), reason, "{rule}");
                    assert!(failed.event.message.ends_with(EMPTY_SNAPSHOT_ID), "{rule}: {}", failed.event.message);
                    assert_eq!(failed.drop_being_created, None, "{rule}: the annotation stays");
                    let status = failed.status.map(|s| s.status);
                    assert_eq!(status.is_some(), written, "{rule}");
                    let status = status.unwrap_or_default();
                    assert_eq!(
                        (status.snapshot_handle.as_deref(), status.ready_to_use),
                        (handle, Some(false)),
                        "{rule}"
                    );
                }
                Ok(described) => {
                    assert_eq!(reason, None, "{rule}: {described:?}");
                    let status = described.status.map(|s| s.status);
                    assert_eq!(status.is_some(), written, "{rule}");
                    assert_eq!(status.and_then(|s| s.snapshot_handle).as_deref(), handle, "{rule}");
                }
            }
        }
    }

    #[test]
    fn create_snapshot_errors() {
        let now = Time(Timestamp::UNIX_EPOCH);
        let creating = annotate(content(), ANN_VOLUME_SNAPSHOT_BEING_CREATED, "yes");
        let status_error = |code| CallError::Status { method: "CreateSnapshot", status: Status::new(code, "boom") };
        let timeout = CallError::Timeout { method: "CreateSnapshot", timeout: Duration::from_secs(60) };
        // (rule, error, annotation dropped)
        let table = [
            ("Canceled: outcome unknown", status_error(Code::Cancelled), false),
            ("DeadlineExceeded: outcome unknown", status_error(Code::DeadlineExceeded), false),
            ("Unavailable: outcome unknown", status_error(Code::Unavailable), false),
            ("ResourceExhausted: outcome unknown", status_error(Code::ResourceExhausted), false),
            ("Aborted: outcome unknown", status_error(Code::Aborted), false),
            ("our own timeout: outcome unknown", timeout, false),
            ("Internal: final", status_error(Code::Internal), true),
            ("InvalidArgument: final", status_error(Code::InvalidArgument), true),
            ("NotFound: final", status_error(Code::NotFound), true),
            ("AlreadyExists: final", status_error(Code::AlreadyExists), true),
            ("Unknown: final", status_error(Code::Unknown), true),
        ];
        for (rule, error, dropped) in table {
            let failed = create_snapshot_failed(&creating, Phase::Create, &error, now.clone());
            let drop = dropped.then(|| ContentPatch::annotation(ANN_VOLUME_SNAPSHOT_BEING_CREATED, None));
            assert_eq!(failed.drop_being_created, drop, "{rule}");
            let status = failed.status.expect(rule).status;
            assert_eq!(status.ready_to_use, Some(false), "{rule}");
            assert_eq!(failed.event.reason, REASON_SNAPSHOT_CREATION_FAILED, "{rule}");
            assert_eq!(status.error.and_then(|e| e.message), Some(failed.event.message.clone()), "{rule}");
        }
        let timeout = CallError::Timeout { method: "CreateSnapshot", timeout: Duration::from_secs(60) };
        let failed = create_snapshot_failed(&content(), Phase::Poll, &timeout, now.clone());
        assert_eq!(failed.event.reason, REASON_CHECK_AND_UPDATE_FAILED);
        assert!(
            failed.event.message.ends_with(r#""rpc error: code = DeadlineExceeded desc = context deadline exceeded""#)
        );
        let failed = create_snapshot_failed(&content(), Phase::Create, &status_error(Code::Internal), now);
        assert_eq!(failed.drop_being_created, None, "no annotation, nothing to drop");
        assert_eq!(
            failed.event.message,
            r#"Failed to create snapshot: failed to take snapshot of the volume vol-1: "rpc error: code = Internal desc = boom""#
        );
    }

    #[test]
    fn recorded_errors() {
        let now = Time(Timestamp::UNIX_EPOCH);
        let ready = {
            let mut c = content();
            c.status = Some(status("snap-1", true, Some(3), None));
            c
        };
        let poll = step_failed(&ready, Phase::Poll, "can not find snapshot", now.clone());
        assert_eq!(poll.event.reason, REASON_CHECK_AND_UPDATE_FAILED);
        assert_eq!(poll.event.event_type, sidecar_runtime::EventType::Warning);
        let written = poll.status.clone().unwrap().apply(&ready).status.unwrap();
        let message = "Failed to check and update snapshot content: can not find snapshot";
        // The rest of the status stays; readiness drops to false.
        assert_eq!(
            written,
            VolumeSnapshotContentStatus {
                ready_to_use: Some(false),
                error: Some(SnapshotError { time: Some(now.clone()), message: Some(message.into()) }),
                ..status("snap-1", true, Some(3), None)
            }
        );
        let again = poll.status.unwrap().apply(&ready);
        let repeat = step_failed(&again, Phase::Poll, "can not find snapshot", now.clone());
        assert_eq!(repeat.status, None, "the same message is not written twice");
        assert_eq!(repeat.event.message, message, "the event is still planned");
        let create = step_failed(&content(), Phase::Create, "no class", now);
        assert_eq!(
            (create.event.reason, create.event.message.as_str()),
            (REASON_SNAPSHOT_CREATION_FAILED, "Failed to create snapshot: no class")
        );
        assert_eq!(create.status.unwrap().status.snapshot_handle, None);
    }
}
