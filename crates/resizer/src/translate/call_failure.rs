//! A driver call that did not succeed, and how upstream words it.

use csi_client::{CallError, Disposition};

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

    /// How to read a driver error; `None` when the driver was not called.
    pub fn disposition(&self) -> Option<Disposition> {
        match self {
            CallFailure::Driver(error) => Some(error.disposition()),
            CallFailure::NotCalled(_) => None,
        }
    }

    /// Whether the driver certainly stopped working on the request. Upstream counts Canceled, DeadlineExceeded,
    /// Unavailable, ResourceExhausted, Aborted and every non-gRPC error as not final.
    pub fn is_final(&self) -> bool {
        self.disposition().is_some_and(Disposition::is_final)
    }

    /// The gRPC code of a driver error.
    pub fn code(&self) -> Option<tonic::Code> {
        match self {
            CallFailure::Driver(error) => Some(error.code()),
            CallFailure::NotCalled(_) => None,
        }
    }
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
            assert_eq!(failure.is_final(), is_final, "{case}");
        }
    }
}
