//! The Secret a driver call needs. The controller reads it (a live GET on every call, as upstream) and passes its
//! data to the request builders; only the reference is a plain value here.

use std::fmt;

/// Name and namespace of a Secret.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SecretRef {
    pub name: String,
    pub namespace: String,
}

impl SecretRef {
    /// The error text when the Secret cannot be read; the call is then not made (a non-gRPC error).
    pub fn read_error(&self, error: impl fmt::Display) -> String {
        format!("error getting secret {} in namespace {}: {error}", self.name, self.namespace)
    }
}
