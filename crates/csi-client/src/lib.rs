//! The CSI client every sidecar shares.
//!
//! - [`proto`]: CSI v1.12 types and gRPC stubs generated from `proto/csi.proto`.
//! - [`connection`]: dial a plugin's unix socket, wait for it, notice when it goes away.
//! - [`dial_failure`]: why a dial failed, by name, and when a waiting sidecar logs it.
//! - [`client`]: typed calls, each under the caller's timeout, logged without secrets and measured.
//! - [`error`]: the one taxonomy the sidecars decide retries on.
//! - [`metrics`]: `csi_sidecar_operations_seconds`, as csi-lib-utils exposes it.
//! - [`access_modes`]: Kubernetes access modes → the CSI access mode, as upstream maps them.
//! - [`capabilities`]: plugin, controller and group-controller capabilities as typed sets.
//! - [`quantity`]: byte sizes as people and Kubernetes write them (`1Gi`, `1.5G`, `4096`).
//! - [`redact`]: how secrets are kept out of `Debug` output and logs.

pub mod access_modes;
pub mod capabilities;
pub mod client;
pub mod connection;
pub mod dial_failure;
pub mod error;
pub mod metrics;
pub mod pages;
pub mod quantity;
pub mod redact;

/// Generated CSI v1.12 messages and services (package `csi.v1`).
#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod proto {
    tonic::include_proto!("csi.v1");
    include!(concat!(env!("OUT_DIR"), "/csi_redaction.rs"));
}

pub use client::{CsiClient, Fence};
pub use connection::{Connection, Endpoint, connect};
pub use error::{Call, CallError, Disposition};
pub use metrics::OperationMetrics;
