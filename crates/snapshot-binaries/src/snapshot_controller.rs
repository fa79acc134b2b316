//! snapshot-controller, as its binary starts it: [`snapshotter::start`]'s snapshot and content loops and, with
//! `CSIVolumeGroupSnapshot` on and the group CRDs served, the group loop beside them, under
//! `snapshot-controller-leader`.

use group_snapshotter::controller::common;
use group_snapshotter::start::controller_group_loop;
use sidecar_runtime::describe::Metrics;
use sidecar_runtime::leader_election::SNAPSHOT_CONTROLLER_LEASE_NAME;
use sidecar_runtime::{Description, SetupError, Sidecar, SidecarLoop};
pub use snapshotter::start::ControllerConfig as Config;

/// snapshot-controller, described as the sidecars are for the image list and the e2e harness; one per cluster, it
/// never runs inside `csi-sidecars`.
pub const DESCRIPTION: Description = Description {
    name: snapshotter::start::CONTROLLER_NAME,
    binary: "snapshot-controller",
    lease: Some(lease_name),
    rbac: Some("snapshot-controller.yaml"),
    metrics: Metrics::Runtime,
};

/// One Lease per cluster, whatever the driver.
fn lease_name(_driver: &str) -> String {
    SNAPSHOT_CONTROLLER_LEASE_NAME.to_string()
}

/// Waits for the snapshot CRDs, then builds the loops.
pub async fn start(config: Config, sidecar: &mut Sidecar) -> Result<SidecarLoop, SetupError> {
    let loops = snapshotter::start::controller_loops(&config, sidecar).await?;
    let options = &loops.options;
    let group_options =
        common::Options { workers: options.workers, retry: options.retry, resync_period: options.resync_period };
    let (events, metrics, queue_metrics) = (loops.events.clone(), loops.metrics.clone(), sidecar.queue_metrics());
    let groups =
        controller_group_loop(sidecar, config.group_snapshots(), group_options, events, &queue_metrics, metrics).await;
    Ok(match groups {
        Some(groups) => loops.beside(|stop| groups.run(stop)),
        None => loops.alone(),
    })
}
