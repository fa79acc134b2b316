//! csi-node-driver-registrar: registers a CSI driver with the kubelet, as upstream node-driver-registrar v2 does.
//!
//! It asks the driver its name (GetPluginInfo), then serves the kubelet's plugin registration service
//! (pluginregistration v1: GetInfo, NotifyRegistrationStatus) on `<plugin-registration-path>/<driver>-reg.sock`.
//! The kubelet's plugin watcher finds that socket, learns from GetInfo where the driver's own socket is on the
//! host, calls the driver's NodeGetInfo itself (writing the CSINode) and reports back.
//!
//! - [`translate`]: the pure rules (flags, socket path, GetInfo's answer, the kubelet's verdict, `/healthz`).
//! - [`registration_server`] and [`health_server`]: the sockets and the HTTP endpoint.
//! - [`start`]: the process's life; [`flags`]: upstream's command line.

pub mod authority;
pub mod flags;
pub mod health_server;
pub mod registration_server;
pub mod start;
pub mod translate;

/// The generated kubelet plugin registration types and gRPC stubs (proto/pluginregistration.proto).
pub mod proto {
    tonic::include_proto!("pluginregistration");
}

/// This build's version, as `--version` prints it.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
