//! Why a claim was not provisioned this time, what the user is told, and what happens next (the upstream library's
//! `ProvisioningState` and `provisionVolumeErrorHandling`, sig-storage-lib-external-provisioner controller/volume.go
//! and controller/controller.go).

use std::fmt;

use csi_client::{Call, CallError, Disposition};

use super::names::{EVENT_PROVISIONING, EVENT_PROVISIONING_FAILED, EVENT_PROVISIONING_SUCCEEDED};

/// What a provisioning attempt means for the work still in flight, as the upstream library counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProvisioningState {
    /// The driver is certainly not working on the volume (success, or a definite failure).
    Finished,
    /// The driver may still be creating the volume: retry with identical arguments until it answers.
    InBackground,
    /// Failed before the driver was asked: whatever was in flight before stays in flight.
    NoChange,
    /// Give the claim back to the scheduler (remove the selected-node annotation) and stop.
    Reschedule,
}

/// An event to record on the claim.
pub use sidecar_runtime::events::{EventType, PlannedEvent};

/// How the claim is treated after a refusal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RefusalKind {
    /// A `ProvisioningFailed` warning with the message; the claim is retried with per-claim backoff.
    Failed,
    /// The driver answered InvalidArgument: a `ProvisioningFailed` warning saying retries will be delayed, and the
    /// claim is not tried again before `--retry-interval-max` (unless its StorageClass UID changes).
    Infeasible,
    /// Not for this provisioner, or left to someone else: no failure event, no retry. Some carry a Normal event.
    Ignored { event: Option<PlannedEvent> },
}

/// A provisioning attempt that did not produce a volume.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub kind: RefusalKind,
    pub state: ProvisioningState,
    /// The error text, as upstream words it; the failure event carries it.
    pub message: String,
}

/// Prefix of the event message for an infeasible (InvalidArgument) CreateVolume.
pub const INFEASIBLE_EVENT_PREFIX: &str = "Volume provisioning failed with infeasible error. Retries will be delayed. ";

impl Refusal {
    /// A failure in the given state.
    pub fn failed(state: ProvisioningState, message: impl Into<String>) -> Refusal {
        Refusal { kind: RefusalKind::Failed, state, message: message.into() }
    }

    /// A definite failure (`Finished`).
    pub fn finished(message: impl Into<String>) -> Refusal {
        Refusal::failed(ProvisioningState::Finished, message)
    }

    /// A failure before the driver was asked (`NoChange`).
    pub fn no_change(message: impl Into<String>) -> Refusal {
        Refusal::failed(ProvisioningState::NoChange, message)
    }

    /// Not ours to provision, silently.
    pub fn ignored(message: impl Into<String>) -> Refusal {
        Refusal {
            kind: RefusalKind::Ignored { event: None },
            state: ProvisioningState::Finished,
            message: message.into(),
        }
    }

    /// The data source is neither a VolumeSnapshot nor a claim, so an external populator fills it: a Normal event, then
    /// nothing more.
    pub fn external_populator(kind: &str) -> Refusal {
        Refusal {
            kind: RefusalKind::Ignored {
                event: Some(PlannedEvent {
                    event_type: EventType::Normal,
                    reason: EVENT_PROVISIONING,
                    message: "Assuming an external populator will provision the volume".to_string(),
                }),
            },
            state: ProvisioningState::Finished,
            message: format!(
                "data source ({kind}) is not handled by the provisioner, assuming an external populator will provision it"
            ),
        }
    }

    /// The event to record on the claim, if any.
    pub fn event(&self) -> Option<PlannedEvent> {
        match &self.kind {
            RefusalKind::Failed => Some(PlannedEvent {
                event_type: EventType::Warning,
                reason: EVENT_PROVISIONING_FAILED,
                message: self.message.clone(),
            }),
            RefusalKind::Infeasible => Some(PlannedEvent {
                event_type: EventType::Warning,
                reason: EVENT_PROVISIONING_FAILED,
                message: format!("{INFEASIBLE_EVENT_PREFIX}{}", self.message),
            }),
            RefusalKind::Ignored { event } => event.clone(),
        }
    }

    /// Whether the claim goes back to the queue (with backoff, or slowly when infeasible).
    pub fn retried(&self) -> bool {
        !matches!(self.kind, RefusalKind::Ignored { .. })
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Refusal {}

/// The state a failed CreateVolume leaves the claim in (external-provisioner `checkError`): a call that may still be
/// running is in the background, ResourceExhausted reschedules when it can, anything else is final.
///
/// `may_reschedule` is true when the driver supports topology and the claim has a selected node: only then can
/// ResourceExhausted hand the claim back to the scheduler.
pub fn provisioning_state(disposition: Disposition, may_reschedule: bool) -> ProvisioningState {
    match disposition {
        Disposition::InProgress => ProvisioningState::InBackground,
        Disposition::ResourceExhausted if may_reschedule => ProvisioningState::Reschedule,
        Disposition::ResourceExhausted | Disposition::Infeasible | Disposition::Final => ProvisioningState::Finished,
    }
}

/// The refusal for a failed CreateVolume call; InvalidArgument is infeasible, retried only after `--retry-interval-max`
/// (the upstream library's `markForSlowRetry`).
///
/// A `Reschedule` acts only when the claim carries `volume.kubernetes.io/selected-node`: the controller removes the
/// annotation and stops (if that update fails, the claim is retried as `Finished`); without the annotation it is
/// treated as `Finished`.
pub fn create_volume_failure(error: &CallError, may_reschedule: bool) -> Refusal {
    // Upstream delays retries only for InvalidArgument; OutOfRange and NotFound are ordinary final errors here.
    let disposition = error.disposition_for(Call::CreateVolume);
    let state = provisioning_state(disposition, may_reschedule);
    let message = error.go_text();
    let kind = if disposition == Disposition::Infeasible { RefusalKind::Infeasible } else { RefusalKind::Failed };
    Refusal { kind, state, message }
}

/// The Normal event before each attempt: `External provisioner is provisioning volume for claim "ns/name"`.
pub fn provisioning_event(claim_namespace: &str, claim_name: &str) -> PlannedEvent {
    let object =
        if claim_namespace.is_empty() { claim_name.to_string() } else { format!("{claim_namespace}/{claim_name}") };
    PlannedEvent {
        event_type: EventType::Normal,
        reason: EVENT_PROVISIONING,
        message: format!("External provisioner is provisioning volume for claim {}", go_quoted(&object)),
    }
}

/// The Normal event once the PV is saved.
pub fn provisioning_succeeded_event(volume_name: &str) -> PlannedEvent {
    PlannedEvent {
        event_type: EventType::Normal,
        reason: EVENT_PROVISIONING_SUCCEEDED,
        message: format!("Successfully provisioned volume {volume_name}"),
    }
}

/// Text quoted as Go's `%q` quotes it, for messages that must read as upstream's.
pub fn go_quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() => {
                if (c as u32) <= 0xffff {
                    out.push_str(&format!("\\u{:04x}", c as u32));
                } else {
                    out.push_str(&format!("\\U{:08x}", c as u32));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tonic::Code;

    use super::*;

    fn status(code: Code) -> CallError {
        CallError::Status { method: "/csi.v1.Controller/CreateVolume", status: tonic::Status::new(code, "boom") }
    }

    #[test]
    fn create_volume_errors_map_to_states() {
        use ProvisioningState::*;
        // (rule, error, may_reschedule, state, infeasible)
        let table = [
            (
                "35: ResourceExhausted with topology and a selected node reschedules",
                status(Code::ResourceExhausted),
                true,
                Reschedule,
                false,
            ),
            (
                "35: ResourceExhausted without a selected node is final",
                status(Code::ResourceExhausted),
                false,
                Finished,
                false,
            ),
            ("35: Canceled is in background", status(Code::Cancelled), true, InBackground, false),
            ("35: DeadlineExceeded is in background", status(Code::DeadlineExceeded), false, InBackground, false),
            ("35: Unavailable is in background", status(Code::Unavailable), false, InBackground, false),
            ("35: Aborted is in background", status(Code::Aborted), false, InBackground, false),
            (
                "35: a timeout is in background",
                CallError::Timeout { method: "/csi.v1.Controller/CreateVolume", timeout: Duration::from_secs(10) },
                true,
                InBackground,
                false,
            ),
            ("35: Internal is final", status(Code::Internal), true, Finished, false),
            ("35: FailedPrecondition is final", status(Code::FailedPrecondition), false, Finished, false),
            ("35: AlreadyExists is final", status(Code::AlreadyExists), false, Finished, false),
            ("35: Unknown is final", status(Code::Unknown), false, Finished, false),
            ("35: OutOfRange is final, not delayed", status(Code::OutOfRange), false, Finished, false),
            ("35: NotFound is final, not delayed", status(Code::NotFound), false, Finished, false),
            ("39: InvalidArgument is infeasible", status(Code::InvalidArgument), true, Finished, true),
        ];
        for (rule, error, may_reschedule, state, infeasible) in table {
            let refusal = create_volume_failure(&error, may_reschedule);
            assert_eq!(refusal.state, state, "{rule}");
            assert_eq!(refusal.kind == RefusalKind::Infeasible, infeasible, "{rule}");
            assert!(refusal.retried(), "{rule}");
        }
    }

    #[test]
    fn quoting_reads_like_go() {
        let table = [
            ("plain", "\"plain\""),
            ("a\"b", "\"a\\\"b\""),
            ("back\\slash", "\"back\\\\slash\""),
            ("line\nbreak\ttab", "\"line\\nbreak\\ttab\""),
            ("\u{1}", "\"\\x01\""),
            ("\u{85}", "\"\\u0085\""),
            ("ünïcode", "\"ünïcode\""),
        ];
        for (text, want) in table {
            assert_eq!(go_quoted(text), want, "{text:?}");
        }
    }

    #[test]
    fn failure_events_carry_the_error_text() {
        // (rule, refusal, expected event)
        let table = [
            (
                "43: ProvisioningFailed warning with the gRPC error",
                create_volume_failure(&status(Code::Internal), false),
                Some((EventType::Warning, "ProvisioningFailed", "rpc error: code = Internal desc = boom".to_string())),
            ),
            (
                "39: infeasible event says retries are delayed",
                create_volume_failure(&status(Code::InvalidArgument), false),
                Some((
                    EventType::Warning,
                    "ProvisioningFailed",
                    "Volume provisioning failed with infeasible error. Retries will be delayed. rpc error: code = InvalidArgument desc = boom"
                        .to_string(),
                )),
            ),
            (
                "35: a timeout reads like Go's deadline error",
                create_volume_failure(
                    &CallError::Timeout { method: "/csi.v1.Controller/CreateVolume", timeout: Duration::from_secs(10) },
                    false,
                ),
                Some((
                    EventType::Warning,
                    "ProvisioningFailed",
                    "rpc error: code = DeadlineExceeded desc = context deadline exceeded".to_string(),
                )),
            ),
            (
                "51: external populator: a Normal Provisioning event",
                Refusal::external_populator("Foo"),
                Some((EventType::Normal, "Provisioning", "Assuming an external populator will provision the volume".to_string())),
            ),
            ("1: claims of other provisioners are ignored silently", Refusal::ignored("not ours"), None),
        ];
        for (rule, refusal, want) in table {
            let got = refusal.event().map(|e| (e.event_type, e.reason, e.message));
            assert_eq!(got, want, "{rule}");
        }
        assert!(!Refusal::external_populator("Foo").retried());
        assert_eq!(
            provisioning_event("apps", "data").message,
            "External provisioner is provisioning volume for claim \"apps/data\"",
            "43: Provisioning event"
        );
        assert_eq!(provisioning_succeeded_event("pvc-1").message, "Successfully provisioned volume pvc-1", "34");
        assert_eq!(provisioning_succeeded_event("pvc-1").reason, "ProvisioningSucceeded", "34");
        assert_eq!(
            Refusal::external_populator("Foo").message,
            "data source (Foo) is not handled by the provisioner, assuming an external populator will provision it"
        );
    }
}
