//! The sidecars `csi-sidecars` runs: each described and wired by its own crate (`Config::from_args`, `start`), as in
//! its single binary; registered here, one line each.

use sidecar_runtime::{Registration, register};

/// Every sidecar `csi-sidecars` runs, in the order its help and messages list them.
pub const SIDECARS: &[Registration] = &[
    register::<provisioner::start::Provisioner>(),
    register::<resizer::start::Resizer>(),
    register::<snapshot_binaries::snapshotter::Snapshotter>(),
    register::<snapshot_binaries::group_snapshotter::GroupSnapshotter>(),
    register::<attacher::start::Attacher>(),
    register::<health_monitor::start::HealthMonitor>(),
    register::<livenessprobe::start::LivenessProbe>(),
    register::<node_driver_registrar::start::Registrar>(),
];

/// The Lease of `--leader-election-shared`: `csi-sidecars-<driver>`, sanitized as upstream's Lease names are.
pub fn shared_lease_name(driver: &str) -> String {
    sidecar_runtime::leader_election::sanitize_name(&format!("csi-sidecars-{driver}"))
}
