//! csi-snapshotter: cuts and deletes the snapshots of one CSI driver's VolumeSnapshotContents. A drop-in for the
//! upstream image: same flags, Lease, events, annotations and metrics.

use anyhow::Context;
use csi_client::capabilities::ControllerCapability;
use group_snapshotter::controller::sidecar as group;
use sidecar_runtime::{QueueMetrics, RetryPolicy, Sidecar};
use snapshot_binaries::group_loop;
use snapshotter::controller::sidecar::{Controller, Options};
use snapshotter::flags::sidecar::Args;
use snapshotter::translate::sidecar::lease_name;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Args = sidecar_runtime::flags::parse();
    args.common.exit_if_version_requested(env!("CARGO_PKG_VERSION"));
    let features = args.validate()?;
    let node_name = args.node_name(std::env::var("NODE_NAME").ok())?;
    let mut sidecar = Sidecar::start(&args.common).await?;

    let sidecar_runtime::Driver { csi, name: driver, .. } = sidecar.connect_driver(args.timeout).await?;
    let capabilities = csi.controller_capabilities().await.context("ControllerGetCapabilities")?;
    if !capabilities.has(ControllerCapability::CreateDeleteSnapshot) {
        tracing::error!("CSI driver {driver} does not support ControllerCreateSnapshot");
        std::process::exit(1);
    }
    let snapshotter = args.snapshotter(&driver, capabilities.has(ControllerCapability::ListSnapshots));
    // The group loop runs when the gate is on and the driver has group snapshots (upstream's condition).
    let groups = features.volume_group_snapshot && group_loop::driver_has_group_snapshots(&csi).await?;
    if let Some(node) = &node_name {
        tracing::info!(%node, "node deployment: handling only the contents labelled with this node");
    }

    let queue_metrics = QueueMetrics::register(sidecar.registry());
    let options = Options {
        snapshotter,
        workers: args.worker_threads,
        retry: RetryPolicy::from_args(&args.retry),
        resync_period: args.resync_period,
        node_name,
    };
    let events = sidecar.events(options.snapshotter.event_component());
    let groups = groups.then(|| {
        let group_options = group_loop::options(&args, &driver);
        group::Controller::new(sidecar.client(), csi.clone(), events.clone(), group_options, Some(&queue_metrics))
    });
    let controller = Controller::new(sidecar.client(), csi, events, options, Some(&queue_metrics));

    if let Some(address) = sidecar.serve_http().await? {
        tracing::info!(%address, "serving metrics and health checks");
    }
    sidecar
        .run(&lease_name(&driver), args.timeout, |stop| async move {
            let groups = async {
                if let Some(groups) = groups {
                    groups.run(stop.clone()).await;
                }
            };
            tokio::join!(controller.run(stop.clone()), groups);
        })
        .await?;
    Ok(())
}
