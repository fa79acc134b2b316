//! csi-resizer: expands volumes (ControllerExpandVolume) and modifies them through VolumeAttributesClass
//! (ControllerModifyVolume). A drop-in for the upstream image: same flags, Lease, events and status writes.

use anyhow::Context;
use csi_client::capabilities::NodeCapability;
use k8s_openapi::api::storage::v1::VolumeAttributesClass;
use resizer::controller::{Controller, Options, ResizerMetrics, event_component};
use resizer::flags::Args;
use resizer::translate::capabilities::{self, ControllerExpansion};
use resizer::translate::expansion::decide::ExpansionConfig;
use resizer::translate::modification::decide::ModificationConfig;
use sidecar_runtime::kube_client::api_resource_exists;
use sidecar_runtime::leader_election::resizer_lease_name;
use sidecar_runtime::{QueueMetrics, RetryPolicy, Sidecar};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Args = sidecar_runtime::flags::parse();
    args.common.exit_if_version_requested(env!("CARGO_PKG_VERSION"));
    let features = args.features()?;
    let mut sidecar = Sidecar::start(&args.common).await?;
    let client = sidecar.client();
    let modify_gate = match features.volume_attributes_class {
        Some(explicit) => explicit,
        None => volume_attributes_class_api(&client).await,
    };

    let sidecar_runtime::Driver { csi, name: driver, .. } = sidecar.connect_driver(args.timeout).await?;
    // CSI migration: the driver also expands the in-tree plugin's volumes handed over to it (§3 item 11).
    if let Some(in_tree) = csi_translation::in_tree_name_for(&driver) {
        tracing::info!(%in_tree, "expanding the in-tree plugin's volumes too (CSI migration)");
        csi.metrics().enable_migration_label();
    }

    let plugin = csi.plugin_capabilities().await.context("GetPluginCapabilities")?;
    let controller = csi.controller_capabilities().await.context("ControllerGetCapabilities")?;
    let expander =
        match capabilities::controller_expansion(&plugin, &controller).context("Failed to create CSI resizer")? {
            ControllerExpansion::Supported(expander) => Some(expander),
            ControllerExpansion::AskNode => {
                let node = csi.node_capabilities().await.context("NodeGetCapabilities")?;
                let expander = capabilities::node_expansion(node.has(NodeCapability::ExpandVolume));
                match expander {
                    Some(_) => tracing::info!("CSI driver supports node resize only"),
                    None => tracing::info!("Resize not supported"),
                }
                expander
            }
        };
    let can_modify = capabilities::modification_supported(&controller);
    capabilities::check_jobs(expander, can_modify)?;

    let options = Options {
        workers: args.workers,
        retry: RetryPolicy::from_args(&args.retry),
        resync_period: args.resync_period,
        expansion: expander.map(|expander| ExpansionConfig {
            driver_name: driver.clone(),
            expander,
            recover_volume_expansion_failure: features.recover_volume_expansion_failure,
            annotate_fs_resize: features.annotate_fs_resize,
            handle_volume_inuse_error: args.handle_volume_inuse_error,
        }),
        modification: (can_modify && modify_gate).then(|| ModificationConfig {
            driver_name: driver.clone(),
            extra_modify_metadata: args.extra_modify_metadata,
        }),
        handle_volume_inuse_error: args.handle_volume_inuse_error && expander.is_some(),
    };
    if can_modify && !modify_gate {
        tracing::info!("VolumeAttributesClass is off; not modifying volumes");
    }
    let queue_metrics = QueueMetrics::register(sidecar.registry());
    let metrics = ResizerMetrics::register(sidecar.registry());
    let events = sidecar.events(event_component(&driver));
    let controller = Controller::new(client, csi, events, options, Some(&queue_metrics), metrics);

    if let Some(address) = sidecar.serve_http().await? {
        tracing::info!(%address, "serving metrics and health checks");
    }
    sidecar.run(&resizer_lease_name(&driver), args.timeout, |stop| controller.run(stop)).await?;
    Ok(())
}

/// §2: without an explicit gate, modification runs only if storage.k8s.io/v1 serves VolumeAttributesClass; if
/// discovery fails, the gate stays on.
async fn volume_attributes_class_api(client: &kube::Client) -> bool {
    match api_resource_exists::<VolumeAttributesClass>(client).await {
        Ok(found) => {
            if !found {
                tracing::warn!("storage.k8s.io/v1 VolumeAttributesClass is not served; modification is disabled");
            }
            found
        }
        Err(err) => {
            tracing::warn!(error = %err, "API discovery failed; assuming VolumeAttributesClass is served");
            true
        }
    }
}
