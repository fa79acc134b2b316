//! A failure of a snapshot sync as the user sees it: a Warning event with upstream's reason, and for most failures
//! also `status.error` on the VolumeSnapshot (external-snapshotter pkg/common-controller/snapshot_controller.go,
//! updateSnapshotErrorStatusWithEvent).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use sidecar_runtime::events::PlannedEvent;
use snapshot_api::{SnapshotError, VolumeSnapshot, VolumeSnapshotStatus};

use super::patch::SnapshotStatusWrite;

/// Where a failure is recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record {
    /// `status.error` (and `readyToUse: false` when `ready_to_false`) plus the event.
    StatusError { ready_to_false: bool },
    /// Only the event.
    EventOnly,
}

/// One failure: the event (and status error) to record, and whether the sync fails so that the key is retried.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotFailure {
    pub reason: &'static str,
    /// The event message, which is also the status error message.
    pub message: String,
    pub record: Record,
    /// What the sync returns (logged, and the key retried with backoff); `None` ends the sync without a retry.
    pub error: Option<String>,
}

impl SnapshotFailure {
    /// A failure recorded in `status.error` that also fails the sync with `error`.
    pub fn status_error(reason: &'static str, message: impl Into<String>, ready_to_false: bool, error: String) -> Self {
        SnapshotFailure {
            reason,
            message: message.into(),
            record: Record::StatusError { ready_to_false },
            error: Some(error),
        }
    }

    /// A failure that is only an event and fails the sync with `error`.
    pub fn event_only(reason: &'static str, message: impl Into<String>, error: String) -> Self {
        SnapshotFailure { reason, message: message.into(), record: Record::EventOnly, error: Some(error) }
    }

    /// The status write and the event to record on `snapshot` at `now`.
    pub fn record_on(&self, snapshot: &VolumeSnapshot, now: Time) -> RecordedFailure {
        match self.record {
            Record::EventOnly => RecordedFailure { status: None, event: Some(self.event()) },
            Record::StatusError { ready_to_false } => error_status(snapshot, self, ready_to_false, now),
        }
    }

    pub fn event(&self) -> PlannedEvent {
        PlannedEvent::warning(self.reason, self.message.clone())
    }
}

/// What recording a failure writes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecordedFailure {
    pub status: Option<SnapshotStatusWrite>,
    pub event: Option<PlannedEvent>,
}

/// `status.error = {message, time: now}` (and `readyToUse: false`), with the event. Like upstream, nothing at all
/// happens when the same message is already set: neither the write nor the event, so a failure retried with
/// backoff does not rewrite the snapshot on every attempt.
fn error_status(
    snapshot: &VolumeSnapshot,
    failure: &SnapshotFailure,
    ready_to_false: bool,
    now: Time,
) -> RecordedFailure {
    let current = snapshot.status.clone().unwrap_or_default();
    if current.error.as_ref().and_then(|e| e.message.as_deref()) == Some(failure.message.as_str()) {
        return RecordedFailure::default();
    }
    let status = VolumeSnapshotStatus {
        error: Some(SnapshotError { time: Some(now), message: Some(failure.message.clone()) }),
        ready_to_use: if ready_to_false { Some(false) } else { current.ready_to_use },
        ..current
    };
    RecordedFailure {
        status: Some(SnapshotStatusWrite { resource_version: snapshot.metadata.resource_version.clone(), status }),
        event: Some(failure.event()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::translate::common::fixtures::*;

    #[test]
    fn recording_a_failure() {
        let with_status = |ready: Option<bool>, message: Option<&str>| {
            let mut vs = snapshot_of_claim("ns", "snap", "uid-1", "claim");
            vs.status = Some(VolumeSnapshotStatus {
                ready_to_use: ready,
                error: message.map(|m| SnapshotError { time: Some(time(1)), message: Some(m.into()) }),
                ..Default::default()
            });
            vs
        };
        let failure = |ready_to_false| SnapshotFailure::status_error("R", "boom", ready_to_false, "err".into());
        let now = time(100);
        // (rule, snapshot, failure, wrote (ready, message), event)
        let table = [
            (
                "error written with readyToUse false",
                with_status(Some(true), None),
                failure(true),
                Some((Some(false), "boom")),
                true,
            ),
            (
                "readyToUse untouched when not asked",
                with_status(Some(true), None),
                failure(false),
                Some((Some(true), "boom")),
                true,
            ),
            (
                "other message replaced",
                with_status(None, Some("old")),
                failure(true),
                Some((Some(false), "boom")),
                true,
            ),
            ("same message: no write, no event", with_status(Some(true), Some("boom")), failure(true), None, false),
            (
                "event only",
                with_status(None, Some("boom")),
                SnapshotFailure::event_only("R", "boom", "err".into()),
                None,
                true,
            ),
        ];
        for (rule, vs, failure, wrote, event) in table {
            let recorded = failure.record_on(&vs, now.clone());
            let got = recorded.status.as_ref().map(|w| {
                let error = w.status.error.clone().unwrap();
                assert_eq!(error.time, Some(now.clone()), "{rule}: time");
                (w.status.ready_to_use, error.message.unwrap())
            });
            assert_eq!(got, wrote.map(|(r, m)| (r, m.to_string())), "{rule}");
            assert_eq!(recorded.event, event.then(|| PlannedEvent::warning("R", "boom")), "{rule}: event");
        }
    }
}
