//! A sync's writes, events and logs as a list of values, in the order the controller carries them out.
//!
//! The rules ([`super::expansion::steps`], [`super::modification::steps`]) turn a decision or a driver's answer into
//! a [`Plan`]; the controller carries out its steps one by one and stops at the first write that fails. A failed
//! write is reported as its [`WriteFailure`] says and the claim is retried with backoff; once every step is done,
//! [`Then`] says whether the sync ends (and with which queue verdict) or calls the driver.

use sidecar_runtime::{Outcome, PlannedEvent};

use crate::translate::call_failure::{resize_failed_event, resize_failed_message};
use crate::translate::patch::{ClaimStatusPatch, VolumePatch};

/// The steps of one part of a sync and what follows them. `M` is the job's memory change, `C` what a driver call
/// needs (`Infallible` for the writes after the call, which always end the sync).
#[derive(Clone, Debug, PartialEq)]
pub struct Plan<M, C> {
    pub steps: Vec<Step<M>>,
    pub then: Then<C>,
}

/// What follows once every step is carried out.
#[derive(Clone, Debug, PartialEq)]
pub enum Then<C> {
    /// The sync ends with this queue verdict.
    Finish(Outcome),
    /// Call the driver.
    Call(C),
}

/// One thing a sync does.
#[derive(Clone, Debug, PartialEq)]
pub enum Step<M> {
    /// Change the controller's in-memory facts about the claim.
    Remember(M),
    /// Write the claim through its `status` subresource (nothing is sent for an empty patch). With `adopt`, the
    /// steps after it (events, the driver call and its rules) see the claim as the API server returned it;
    /// without, the claim as it was before this write.
    PatchClaim {
        patch: ClaimStatusPatch,
        adopt: bool,
        failure: WriteFailure,
    },
    /// Write the PV (nothing is sent for an empty patch); the steps after it see the PV as returned.
    PatchVolume {
        patch: VolumePatch,
        failure: WriteFailure,
    },
    /// Record an event about the claim.
    Event(PlannedEvent),
    Log(Log),
}

/// A line for the sidecar's log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Log {
    pub level: LogLevel,
    pub text: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogLevel {
    Trace,
    Info,
    Warn,
}

impl Log {
    pub fn trace(text: impl Into<String>) -> Log {
        Log { level: LogLevel::Trace, text: text.into() }
    }

    pub fn info(text: impl Into<String>) -> Log {
        Log { level: LogLevel::Info, text: text.into() }
    }

    pub fn warn(text: impl Into<String>) -> Log {
        Log { level: LogLevel::Warn, text: text.into() }
    }
}

/// Adds a change of the controller's memory to `steps`, unless it changes nothing.
pub fn remember<M: Default + PartialEq>(steps: &mut Vec<Step<M>>, change: M) {
    if change != M::default() {
        steps.push(Step::Remember(change));
    }
}

/// How a failed write is reported. Every failed write ends the sync and retries the claim with backoff.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteFailure {
    /// A warning naming what failed, with the error.
    Warn(&'static str),
    /// A resourceVersion-checked write: a 409 Conflict only says the claim changed since it was read, and the retry
    /// reads the newer one, so it is not logged. Other errors are warned as [`WriteFailure::Warn`].
    WarnUnlessConflict(&'static str),
    /// A failed resize of `volume` by `driver`: a Warning `VolumeResizeFailed` event and a warning log, both naming
    /// the error (external-resizer pkg/controller/expand_and_recover.go, expandAndRecover: whatever fails after the
    /// driver call is recorded as `VolumeResizeFailed`).
    ResizeFailed { volume: String, driver: String },
}

/// What to say about a failed write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailureReport {
    /// Logged as a warning.
    pub warning: Option<String>,
    /// Recorded about the claim.
    pub event: Option<PlannedEvent>,
}

impl WriteFailure {
    /// The report of a write that failed with `error`; `conflict` tells a 409 Conflict.
    pub fn report(&self, error: &str, conflict: bool) -> FailureReport {
        match self {
            WriteFailure::WarnUnlessConflict(_) if conflict => FailureReport { warning: None, event: None },
            WriteFailure::Warn(what) | WriteFailure::WarnUnlessConflict(what) => {
                FailureReport { warning: Some(format!("{what}: {error}")), event: None }
            }
            WriteFailure::ResizeFailed { volume, driver } => {
                let message = resize_failed_message(volume, driver, error);
                let event = resize_failed_event(message.clone());
                FailureReport { warning: Some(message), event: Some(event) }
            }
        }
    }
}

/// A plan in words, one line per step and one for what follows, for the tables of the rules that plan.
#[cfg(test)]
pub(crate) fn outline<M, C: std::fmt::Debug>(plan: &Plan<M, C>) -> Vec<String> {
    let failure = |failure: &WriteFailure| match failure {
        WriteFailure::Warn(what) => format!("else warn {what:?}"),
        WriteFailure::WarnUnlessConflict(what) => format!("else warn {what:?} unless a Conflict"),
        WriteFailure::ResizeFailed { volume, driver } => format!("else resize of {volume} by {driver} failed"),
    };
    let mut lines: Vec<String> = plan
        .steps
        .iter()
        .map(|step| match step {
            Step::Remember(_) => "remember".to_string(),
            Step::PatchClaim { adopt: true, failure: f, .. } => {
                format!("patch claim and go on with it, {}", failure(f))
            }
            Step::PatchClaim { adopt: false, failure: f, .. } => format!("patch claim, {}", failure(f)),
            Step::PatchVolume { failure: f, .. } => format!("patch volume, {}", failure(f)),
            Step::Event(event) => format!("event {:?} {}: {}", event.event_type, event.reason, event.message),
            Step::Log(log) => format!("log {:?}: {}", log.level, log.text),
        })
        .collect();
    lines.push(match &plan.then {
        Then::Finish(outcome) => format!("finish {outcome:?}"),
        Then::Call(call) => format!("call {call:?}"),
    });
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::translate::names::EVENT_VOLUME_RESIZE_FAILED;

    #[test]
    fn failed_writes_are_reported_once_each() {
        let marking = WriteFailure::WarnUnlessConflict("marking the expansion failed");
        let writing = WriteFailure::Warn("writing the cancellation failed");
        let resize = WriteFailure::ResizeFailed { volume: "pv-1".into(), driver: "d".into() };
        let warned = |text: &str| FailureReport { warning: Some(text.into()), event: None };
        let resize_failed = "resize volume \"pv-1\" by resizer \"d\" failed: boom";
        // (rule, failure, conflict, report)
        let table = [
            (
                "a Conflict on a checked write is not logged",
                &marking,
                true,
                FailureReport { warning: None, event: None },
            ),
            (
                "any other error on a checked write is warned",
                &marking,
                false,
                warned("marking the expansion failed: boom"),
            ),
            (
                "an unchecked write warns even a Conflict",
                &writing,
                true,
                warned("writing the cancellation failed: boom"),
            ),
            (
                "a failed write after ControllerExpandVolume is a failed resize, event and log",
                &resize,
                false,
                FailureReport {
                    warning: Some(resize_failed.into()),
                    event: Some(PlannedEvent::warning(EVENT_VOLUME_RESIZE_FAILED, resize_failed)),
                },
            ),
            (
                "a failed resize is reported on a Conflict too",
                &resize,
                true,
                FailureReport {
                    warning: Some(resize_failed.into()),
                    event: Some(PlannedEvent::warning(EVENT_VOLUME_RESIZE_FAILED, resize_failed)),
                },
            ),
        ];
        for (rule, failure, conflict, want) in table {
            assert_eq!(failure.report("boom", conflict), want, "{rule}");
        }
    }
}
