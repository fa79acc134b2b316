//! csi-provisioner: creates a PersistentVolume through the CSI driver for each claim that asks for one, and deletes
//! volumes their reclaim policy lets go. A drop-in for the upstream image: same flags, Lease, events and metrics.

use anyhow::Context;
use csi_client::proto::NodeGetInfoRequest;
use provisioner::controller::{self, Controller, Options, ProvisioningMetrics};
use provisioner::flags::{Args, removed_flag};
use provisioner::translate::provisioner::provisioner_identity;
use sidecar_runtime::leader_election::provisioner_lease_name;
use sidecar_runtime::{QueueMetrics, RetryPolicy, Sidecar};

/// Upstream waits for the driver's socket forever; this is "forever" in practice.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    if let Some(message) = removed_flag(std::env::args()) {
        eprintln!("error: {message}");
        std::process::exit(2);
    }
    let args: Args = sidecar_runtime::flags::parse();
    args.common.exit_if_version_requested(env!("CARGO_PKG_VERSION"));
    let features = args.feature_gates()?;
    let node_name = args.node_name(std::env::var("NODE_NAME").ok())?;
    let mut sidecar = Sidecar::start(&args.common).await?;
    for flag in args.unsupported() {
        tracing::warn!(flag, "flag accepted but not supported yet; it has no effect");
    }

    let sidecar_runtime::Driver { csi, name: driver, .. } = sidecar.connect_driver(args.timeout).await?;

    let mut provisioner = args.provisioner(&driver, features);
    provisioner.plugin_capabilities = csi.plugin_capabilities().await.context("GetPluginCapabilities")?;
    provisioner.controller_capabilities = csi.controller_capabilities().await.context("ControllerGetCapabilities")?;
    if let Some(node) = &node_name {
        let info = csi.node_get_info(NodeGetInfoRequest {}).await.context("NodeGetInfo")?;
        let local = args.node_deployment(node.clone(), info);
        tracing::info!(node = %local.node_name, node_id = %local.node_id, topology = ?local.topology,
            "node deployment: provisioning for this node only, with the topology from NodeGetInfo");
        provisioner.node_deployment = Some(local);
    }
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    provisioner.identity =
        provisioner_identity(now.as_millis() as i64, now.subsec_nanos(), &driver, node_name.as_deref());

    let queue_metrics = QueueMetrics::register(sidecar.registry());
    let metrics = ProvisioningMetrics::register(sidecar.registry());
    let options = Options {
        workers: args.worker_threads,
        retry: RetryPolicy::from_args(&args.retry),
        snapshot_orphan_sweep_interval: args.snapshot_orphan_sweep_interval,
    };
    let events = sidecar.events(controller::event_component(&driver));
    let controller =
        Controller::new(sidecar.client(), csi, provisioner, events, options, Some(&queue_metrics), metrics);

    if let Some(address) = sidecar.serve_http().await? {
        tracing::info!(%address, "serving metrics and health checks");
    }
    // In a pod POD_NAME is the hostname, upstream's identity; it also tells replicas on one host apart.
    if let Some(pod) = std::env::var("POD_NAME").ok().filter(|p| !p.is_empty()) {
        sidecar.set_leader_identity(pod);
    }
    sidecar.run(&provisioner_lease_name(&driver), args.timeout, |stop| controller.run(stop)).await?;
    Ok(())
}
