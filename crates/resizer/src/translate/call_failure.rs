//! A driver call that did not succeed, and how upstream words it.

use csi_client::{Call, CallError, Disposition};
use sidecar_runtime::PlannedEvent;

use crate::translate::names::EVENT_VOLUME_RESIZE_FAILED;

/// Why ControllerExpandVolume or ControllerModifyVolume did not succeed.
#[derive(Debug)]
pub enum CallFailure<'a> {
    /// The driver answered with a gRPC error, or did not answer in time.
    Driver(&'a CallError),
    /// The driver was not called: the Secret could not be read, or the request could not be built. Upstream calls
    /// these "non-gRPC" errors; the text is the error as the controller words it.
    NotCalled(String),
}

impl CallFailure<'_> {
    /// The error as a Go sidecar prints it (`rpc error: code = … desc = …` for driver errors).
    pub fn text(&self) -> String {
        match self {
            CallFailure::Driver(error) => error.go_text(),
            CallFailure::NotCalled(text) => text.clone(),
        }
    }

    /// How to read a driver error of `call`; `None` when the driver was not called.
    pub fn disposition(&self, call: Call) -> Option<Disposition> {
        match self {
            CallFailure::Driver(error) => Some(error.disposition_for(call)),
            CallFailure::NotCalled(_) => None,
        }
    }

    /// Whether the driver certainly stopped working on `call`. Upstream counts Canceled, DeadlineExceeded,
    /// Unavailable, ResourceExhausted, Aborted and every non-gRPC error as not final.
    pub fn is_final(&self, call: Call) -> bool {
        self.disposition(call).is_some_and(Disposition::is_final)
    }

    /// The gRPC code of a driver error.
    pub fn code(&self) -> Option<tonic::Code> {
        match self {
            CallFailure::Driver(error) => Some(error.code()),
            CallFailure::NotCalled(_) => None,
        }
    }
}

/// The Warning recorded when an expansion fails, with the error text; the claim is then retried with backoff.
pub fn resize_failed_event(message: impl Into<String>) -> PlannedEvent {
    PlannedEvent::warning(EVENT_VOLUME_RESIZE_FAILED, message)
}

/// How a failed resize of `volume` by `driver` is worded, in events and logs (external-resizer
/// pkg/controller/expand_and_recover.go, callResizeOnPlugin).
pub fn resize_failed_message(volume: &str, driver: &str, error: &str) -> String {
    format!("resize volume \"{volume}\" by resizer \"{driver}\" failed: {error}")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tonic::Code;

    use super::*;

    #[test]
    fn failures_read_like_go() {
        let status = CallError::Status {
            method: "/csi.v1.Controller/ControllerExpandVolume",
            status: tonic::Status::new(Code::Cancelled, "gone"),
        };
        let timeout = CallError::Timeout {
            method: "/csi.v1.Controller/ControllerExpandVolume",
            timeout: Duration::from_secs(10),
        };
        // (case, failure, text, final)
        let table = [
            ("status", CallFailure::Driver(&status), "rpc error: code = Canceled desc = gone", false),
            (
                "timeout",
                CallFailure::Driver(&timeout),
                "rpc error: code = DeadlineExceeded desc = context deadline exceeded",
                false,
            ),
            ("not called", CallFailure::NotCalled("no secret".into()), "no secret", false),
        ];
        for (case, failure, text, is_final) in table {
            assert_eq!(failure.text(), text, "{case}");
            assert_eq!(failure.is_final(Call::ControllerExpandVolume), is_final, "{case}");
            assert_eq!(failure.is_final(Call::ControllerModifyVolume), is_final, "{case}");
        }
    }

    #[test]
    fn expansion_and_modification_read_codes_differently() {
        use Call::{ControllerExpandVolume as Expand, ControllerModifyVolume as Modify};
        use Disposition::*;
        // (call, code, disposition): InvalidArgument, OutOfRange and NotFound make an expansion infeasible, only
        // InvalidArgument a modification (external-resizer pkg/util/util.go, IsInfeasibleError, and
        // pkg/modifycontroller/modify_volume.go, controllerModifyVolumeWithTarget).
        let table = [
            (Expand, Code::InvalidArgument, Infeasible),
            (Expand, Code::OutOfRange, Infeasible),
            (Expand, Code::NotFound, Infeasible),
            (Expand, Code::Internal, Final),
            (Expand, Code::ResourceExhausted, ResourceExhausted),
            (Expand, Code::Aborted, InProgress),
            (Modify, Code::InvalidArgument, Infeasible),
            (Modify, Code::OutOfRange, Final),
            (Modify, Code::NotFound, Final),
            (Modify, Code::Internal, Final),
            (Modify, Code::ResourceExhausted, ResourceExhausted),
            (Modify, Code::Aborted, InProgress),
        ];
        for (call, code, want) in table {
            let error = CallError::Status { method: "/csi.v1.Controller/X", status: tonic::Status::new(code, "x") };
            assert_eq!(CallFailure::Driver(&error).disposition(call), Some(want), "{call:?} {code:?}");
        }
        assert_eq!(CallFailure::NotCalled("no secret".into()).disposition(Expand), None);
    }
}
