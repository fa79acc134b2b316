//! The processes a test starts: plugins and sidecars with their logs (`scenario`), a plugin command of the
//! user's (`plugin_command`), each sidecar alone or inside `csi-sidecars` (`sidecar_mode`), the identity and RBAC
//! each runs as (`rbac`), and the binaries we ship (`shipped`).

pub mod plugin_command;
pub mod rbac;
pub mod scenario;
pub mod shipped;
pub mod sidecar_mode;
