//! livenessprobe: serves `/healthz` for kubelet liveness probes by calling the CSI driver's Probe within
//! `--probe-timeout`, as upstream livenessprobe v2 does. The check itself is
//! `sidecar_runtime::http::driver_health_router`, which any sidecar can serve too.
//!
//! - [`translate`]: where to serve, from the flags. [`start`]: the process's life. [`flags`]: upstream's
//!   command line.

pub mod flags;
pub mod start;
pub mod translate;

/// This build's version, as `--version` prints it.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
