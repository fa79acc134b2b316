//! csi-provisioner: creates a PersistentVolume through the CSI driver for each claim that asks for one, and deletes
//! volumes their reclaim policy lets go. A drop-in for the upstream image: same flags, Lease, events and metrics.

use anyhow::Context;
use csi_client::capabilities::ControllerCapability;
use csi_client::proto::NodeGetInfoRequest;
use provisioner::controller::capacity::{Capacity, CapacityMetrics, CapacityOptions};
use provisioner::controller::capacity_owner::lookup_owner;
use provisioner::controller::{self, Controller, Options, ProvisioningMetrics};
use provisioner::flags::{Args, removed_flag};
use provisioner::translate::capacity::{Publisher, managed_by};
use provisioner::translate::in_flight_entry::{
    JOURNAL_ENTRY_PREFIX, JOURNAL_LINGER, JOURNAL_REMOVAL_DELAY, journal_name,
};
use provisioner::translate::provisioner::provisioner_identity;
use sidecar_runtime::journal::{Bounds, JournalOptions};
use sidecar_runtime::kube_client::{self, KubeClientOptions};
use sidecar_runtime::leader_election::{lease_namespace, provisioner_lease_name};
use sidecar_runtime::{QueueMetrics, RetryPolicy, Sidecar};

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
    let capacity_placement =
        args.capacity_placement(std::env::var("NAMESPACE").ok(), std::env::var("POD_NAME").ok())?;
    let mut sidecar = Sidecar::start(&args.common).await?;
    for flag in args.unsupported() {
        tracing::warn!(flag, "flag accepted for compatibility; it has no effect here");
    }

    let sidecar_runtime::Driver { csi, name: driver, .. } = sidecar.connect_driver(args.timeout).await?;

    let mut provisioner = args.provisioner(&driver, features);
    // CSI migration: the driver also serves the in-tree plugin it replaces (item 64).
    provisioner.migrated_in_tree_name = csi_translation::in_tree_name_for(&driver).map(str::to_string);
    if let Some(in_tree) = &provisioner.migrated_in_tree_name {
        tracing::info!(%in_tree, "serving the in-tree plugin's classes and volumes too (CSI migration)");
        csi.metrics().enable_migration_label();
    }
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
    let journal = JournalOptions {
        namespace: lease_namespace(&args.common),
        name: journal_name(&provisioner_lease_name(&driver), node_name.as_deref()),
        prefix: JOURNAL_ENTRY_PREFIX.to_string(),
        bounds: Bounds::default(),
        removal_delay: JOURNAL_REMOVAL_DELAY,
        linger: JOURNAL_LINGER,
    };
    tracing::info!(namespace = %journal.namespace, name = %journal.name, "in-flight journal");
    let options = Options {
        workers: args.worker_threads,
        retry: RetryPolicy::from_args(&args.retry),
        snapshot_orphan_sweep_interval: args.snapshot_orphan_sweep_interval,
        journal,
    };
    let events = sidecar.events(controller::event_component(&driver));
    let fixed_segment = provisioner.node_deployment.as_ref().map(|local| local.topology.clone());
    let has_get_capacity = provisioner.has(ControllerCapability::GetCapacity);
    let mut controller =
        Controller::new(sidecar.client(), csi, provisioner, events, options, Some(&queue_metrics), metrics);
    if let Some(placement) = capacity_placement {
        if !has_get_capacity {
            tracing::warn!(
                "--enable-capacity: the driver does not advertise GET_CAPACITY; its GetCapacity calls will fail"
            );
        }
        let owner = match &placement.owner {
            Some((pod, levels)) => {
                let owner = lookup_owner(&sidecar.client(), &placement.namespace, pod, *levels).await?;
                tracing::info!(api_version = %owner.api_version, kind = %owner.kind, name = %owner.name,
                    "owner of CSIStorageCapacity objects");
                Some(owner)
            }
            None => None,
        };
        let publisher = Publisher {
            driver: driver.clone(),
            managed_by: managed_by(node_name.as_deref()),
            namespace: placement.namespace,
            owner,
        };
        let options = CapacityOptions {
            publisher,
            poll_interval: args.capacity_poll_interval,
            immediate_binding: args.capacity_for_immediate_binding,
            threads: args.capacity_threads,
            fixed_segment,
        };
        // Capacity writes get a client of their own with a low rate limit (upstream PR #711).
        let config = kube_client::config(&KubeClientOptions::from_args(&args.common)).await?;
        let client = kube_client::client_from_config(config, args.kube_api_capacity_qps, args.kube_api_capacity_burst)?;
        let metrics = CapacityMetrics::register(sidecar.registry());
        controller = controller.with_capacity(Capacity::new(client, options, metrics));
    }

    if let Some(address) = sidecar.serve_http().await? {
        tracing::info!(%address, "serving metrics and health checks");
    }
    sidecar.run(&provisioner_lease_name(&driver), args.timeout, |stop| controller.run(stop)).await?;
    Ok(())
}
