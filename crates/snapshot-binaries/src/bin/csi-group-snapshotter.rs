//! csi-group-snapshotter: csi-snapshotter's group loop alone, for a driver whose single snapshots are served
//! elsewhere (or not at all). Same flags as csi-snapshotter; the gate CSIVolumeGroupSnapshot is implied. Its Lease
//! is `external-snapshotter-group-leader-<driver>`, so that it never takes csi-snapshotter's.

use anyhow::bail;
use group_snapshotter::controller::sidecar::Controller;
use sidecar_runtime::leader_election::group_snapshotter_lease_name;
use sidecar_runtime::{QueueMetrics, Sidecar};
use snapshot_binaries::group_loop;
use snapshotter::flags::sidecar::Args;

/// The events' source component, as csi-snapshotter's group events.
const EVENT_COMPONENT: &str = "csi-snapshotter";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Args = sidecar_runtime::flags::parse();
    args.common.exit_if_version_requested(env!("CARGO_PKG_VERSION"));
    args.validate()?;
    let mut sidecar = Sidecar::start(&args.common).await?;
    let sidecar_runtime::Driver { csi, name: driver, .. } = sidecar.connect_driver(args.timeout).await?;
    if !group_loop::driver_has_group_snapshots(&csi).await? {
        bail!("CSI driver {driver} does not support CreateDeleteGetVolumeGroupSnapshot");
    }
    let queue_metrics = QueueMetrics::register(sidecar.registry());
    let events = sidecar.events(format!("{EVENT_COMPONENT} {driver}"));
    let controller =
        Controller::new(sidecar.client(), csi, events, group_loop::options(&args, &driver), Some(&queue_metrics));
    if let Some(address) = sidecar.serve_http().await? {
        tracing::info!(%address, "serving metrics and health checks");
    }
    let lease = group_snapshotter_lease_name(&driver);
    sidecar.run(&lease, args.timeout, |stop| controller.run(stop)).await?;
    Ok(())
}
