//! One error taxonomy for every CSI call, so that the sidecars decide retries
//! the same way upstream's do.
//!
//! Upstream (csi-lib-utils users, reference docs): Canceled, DeadlineExceeded,
//! Unavailable, Aborted and any non-gRPC failure mean the operation may still be
//! running in the plugin ("in progress": call again with the same name to find
//! out). ResourceExhausted is non-final too, but the provisioner reacts to it by
//! rescheduling, so it has its own kind. Every other gRPC code is final, for
//! every call.
//!
//! Which final codes are "infeasible" (the request can never succeed as asked, so
//! the sidecar slows its retries or records it) depends on the call: every
//! upstream sidecar reads InvalidArgument that way, and external-resizer reads
//! OutOfRange and NotFound that way too, but only for ControllerExpandVolume. For
//! CreateVolume or ControllerModifyVolume they are ordinary final errors. Hence
//! [`CallError::disposition_for`] takes the [`Call`].

use std::time::Duration;

use tonic::Code;

/// What the caller should conclude from a failed CSI call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Disposition {
    /// The plugin may still be working on it; the outcome is unknown.
    InProgress,
    /// Out of capacity; may succeed elsewhere or later.
    ResourceExhausted,
    /// The request can never succeed as asked.
    Infeasible,
    /// The plugin gave a definite answer: nothing was done.
    Final,
}

impl Disposition {
    /// Whether the plugin definitely stopped working on the request.
    pub fn is_final(self) -> bool {
        matches!(self, Disposition::Final | Disposition::Infeasible)
    }

    /// Classifies a gRPC status code returned by `call`.
    pub fn of_code(call: Call, code: Code) -> Disposition {
        match code {
            Code::Cancelled | Code::DeadlineExceeded | Code::Unavailable | Code::Aborted => Disposition::InProgress,
            Code::ResourceExhausted => Disposition::ResourceExhausted,
            Code::InvalidArgument => Disposition::Infeasible,
            Code::OutOfRange | Code::NotFound if call == Call::ControllerExpandVolume => Disposition::Infeasible,
            _ => Disposition::Final,
        }
    }
}

/// The CSI calls whose failures the sidecars act on, for classifying them (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Call {
    CreateVolume,
    DeleteVolume,
    ControllerExpandVolume,
    ControllerModifyVolume,
    CreateSnapshot,
    DeleteSnapshot,
    CreateVolumeGroupSnapshot,
    DeleteVolumeGroupSnapshot,
}

/// A failed CSI call.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The plugin answered with a gRPC status.
    #[error("{method}: rpc error: code = {code} desc = {message}", code = go_code_name(status.code()), message = status.message())]
    Status { method: &'static str, status: tonic::Status },
    /// No answer within the caller's timeout.
    #[error("{method}: rpc error: code = DeadlineExceeded desc = no answer within {timeout:?}")]
    Timeout { method: &'static str, timeout: Duration },
}

impl CallError {
    /// How to treat the failure of `call` (see the module docs).
    pub fn disposition_for(&self, call: Call) -> Disposition {
        match self {
            CallError::Status { status, .. } => {
                if is_transport_failure(status) {
                    Disposition::InProgress
                } else {
                    Disposition::of_code(call, status.code())
                }
            }
            CallError::Timeout { .. } => Disposition::InProgress,
        }
    }

    /// The gRPC code, with a timeout reported as DeadlineExceeded.
    pub fn code(&self) -> Code {
        match self {
            CallError::Status { status, .. } => status.code(),
            CallError::Timeout { .. } => Code::DeadlineExceeded,
        }
    }

    /// The plugin's message, without the method prefix.
    pub fn message(&self) -> String {
        match self {
            CallError::Status { status, .. } => status.message().to_string(),
            CallError::Timeout { timeout, .. } => format!("no answer within {timeout:?}"),
        }
    }

    /// The message as a Go sidecar reads it with `status.Message()`: a timeout reads as Go's context error.
    pub fn go_message(&self) -> String {
        match self {
            CallError::Status { status, .. } => status.message().to_string(),
            CallError::Timeout { .. } => "context deadline exceeded".to_string(),
        }
    }

    /// How a Go gRPC client prints the failure, the text upstream's events and conditions carry:
    /// `rpc error: code = <Code> desc = <message>`.
    pub fn go_text(&self) -> String {
        format!("rpc error: code = {} desc = {}", go_code_name(self.code()), self.go_message())
    }

    /// The `grpc_status_code` metric label for this failure.
    pub fn metric_code(&self) -> &'static str {
        match self {
            CallError::Status { status, .. } if is_transport_failure(status) => NON_GRPC,
            other => go_code_name(other.code()),
        }
    }
}

/// Metric label used by csi-lib-utils for failures that are not gRPC statuses.
pub const NON_GRPC: &str = "unknown-non-grpc";

/// tonic reports a broken connection as a status it made up itself (Unknown or
/// Unavailable with a transport source); upstream counts those as non-gRPC errors.
fn is_transport_failure(status: &tonic::Status) -> bool {
    use std::error::Error as _;
    status.source().is_some_and(|s| s.downcast_ref::<tonic::transport::Error>().is_some())
}

/// Go's `codes.Code.String()` spelling, which upstream metrics and logs use.
pub fn go_code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "Canceled",
        Code::Unknown => "Unknown",
        Code::InvalidArgument => "InvalidArgument",
        Code::DeadlineExceeded => "DeadlineExceeded",
        Code::NotFound => "NotFound",
        Code::AlreadyExists => "AlreadyExists",
        Code::PermissionDenied => "PermissionDenied",
        Code::ResourceExhausted => "ResourceExhausted",
        Code::FailedPrecondition => "FailedPrecondition",
        Code::Aborted => "Aborted",
        Code::OutOfRange => "OutOfRange",
        Code::Unimplemented => "Unimplemented",
        Code::Internal => "Internal",
        Code::Unavailable => "Unavailable",
        Code::DataLoss => "DataLoss",
        Code::Unauthenticated => "Unauthenticated",
    }
}

/// Parses a Go-style code name (as written in fault configs and by humans).
pub fn code_from_go_name(name: &str) -> Option<Code> {
    const ALL: [Code; 17] = [
        Code::Ok,
        Code::Cancelled,
        Code::Unknown,
        Code::InvalidArgument,
        Code::DeadlineExceeded,
        Code::NotFound,
        Code::AlreadyExists,
        Code::PermissionDenied,
        Code::ResourceExhausted,
        Code::FailedPrecondition,
        Code::Aborted,
        Code::OutOfRange,
        Code::Unimplemented,
        Code::Internal,
        Code::Unavailable,
        Code::DataLoss,
        Code::Unauthenticated,
    ];
    let wanted = name.replace('_', "").to_ascii_lowercase();
    ALL.into_iter().find(|c| go_code_name(*c).to_ascii_lowercase() == wanted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_read_like_go() {
        let status = |code, message| CallError::Status {
            method: "/csi.v1.Controller/ControllerExpandVolume",
            status: tonic::Status::new(code, message),
        };
        let timeout =
            CallError::Timeout { method: "/csi.v1.Controller/CreateVolume", timeout: Duration::from_secs(10) };
        // (case, error, Go message, Go text)
        let table = [
            ("status", status(Code::Cancelled, "gone"), "gone", "rpc error: code = Canceled desc = gone"),
            ("empty message", status(Code::Internal, ""), "", "rpc error: code = Internal desc = "),
            (
                "timeout",
                timeout,
                "context deadline exceeded",
                "rpc error: code = DeadlineExceeded desc = context deadline exceeded",
            ),
        ];
        for (case, error, message, text) in table {
            assert_eq!(error.go_message(), message, "{case}");
            assert_eq!(error.go_text(), text, "{case}");
        }
    }

    const ALL_CALLS: [Call; 8] = [
        Call::CreateVolume,
        Call::DeleteVolume,
        Call::ControllerExpandVolume,
        Call::ControllerModifyVolume,
        Call::CreateSnapshot,
        Call::DeleteSnapshot,
        Call::CreateVolumeGroupSnapshot,
        Call::DeleteVolumeGroupSnapshot,
    ];

    #[test]
    fn codes_classify_per_call_as_upstream() {
        use Disposition::*;
        // (code, ControllerExpandVolume, every other call): external-resizer alone reads OutOfRange and NotFound as
        // infeasible, and only for expansion; the provisioner and the resizer's modification read only
        // InvalidArgument so.
        let table = [
            (Code::Ok, Final, Final),
            (Code::Cancelled, InProgress, InProgress),
            (Code::Unknown, Final, Final),
            (Code::InvalidArgument, Infeasible, Infeasible),
            (Code::DeadlineExceeded, InProgress, InProgress),
            (Code::NotFound, Infeasible, Final),
            (Code::AlreadyExists, Final, Final),
            (Code::PermissionDenied, Final, Final),
            (Code::ResourceExhausted, ResourceExhausted, ResourceExhausted),
            (Code::FailedPrecondition, Final, Final),
            (Code::Aborted, InProgress, InProgress),
            (Code::OutOfRange, Infeasible, Final),
            (Code::Unimplemented, Final, Final),
            (Code::Internal, Final, Final),
            (Code::Unavailable, InProgress, InProgress),
            (Code::DataLoss, Final, Final),
            (Code::Unauthenticated, Final, Final),
        ];
        for (code, expansion, others) in table {
            for call in ALL_CALLS {
                let want = if call == Call::ControllerExpandVolume { expansion } else { others };
                assert_eq!(Disposition::of_code(call, code), want, "{call:?} {code:?}");
                let err = CallError::Status { method: "/csi.v1.Controller/Any", status: tonic::Status::new(code, "x") };
                assert_eq!(err.disposition_for(call), want, "{call:?} {code:?}");
            }
            // Whether the plugin stopped is the same for every call; only "infeasible" differs.
            assert_eq!(expansion.is_final(), others.is_final(), "{code:?}");
        }
        assert!(Final.is_final() && Infeasible.is_final());
        assert!(!InProgress.is_final() && !ResourceExhausted.is_final());
    }

    #[test]
    fn timeouts_are_in_progress() {
        let err = CallError::Timeout { method: "/csi.v1.Controller/CreateVolume", timeout: Duration::from_secs(10) };
        for call in ALL_CALLS {
            assert_eq!(err.disposition_for(call), Disposition::InProgress, "{call:?}");
        }
        assert_eq!(err.code(), Code::DeadlineExceeded);
        assert_eq!(err.metric_code(), "DeadlineExceeded");
    }

    #[test]
    fn go_names_round_trip() {
        let table = [
            (Code::Cancelled, "Canceled"),
            (Code::InvalidArgument, "InvalidArgument"),
            (Code::DeadlineExceeded, "DeadlineExceeded"),
            (Code::ResourceExhausted, "ResourceExhausted"),
            (Code::Ok, "OK"),
            (Code::Unavailable, "Unavailable"),
        ];
        for (code, name) in table {
            assert_eq!(go_code_name(code), name);
            assert_eq!(code_from_go_name(name), Some(code));
        }
        assert_eq!(code_from_go_name("DEADLINE_EXCEEDED"), Some(Code::DeadlineExceeded));
        assert_eq!(code_from_go_name("nonsense"), None);
    }

    #[test]
    fn message_names_code_and_text() {
        let err = CallError::Status {
            method: "/csi.v1.Controller/DeleteVolume",
            status: tonic::Status::failed_precondition("volume in use"),
        };
        assert_eq!(
            err.to_string(),
            "/csi.v1.Controller/DeleteVolume: rpc error: code = FailedPrecondition desc = volume in use"
        );
        assert_eq!(err.message(), "volume in use");
    }
}
