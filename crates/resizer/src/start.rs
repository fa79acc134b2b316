//! csi-resizer's wiring, shared by its binary and `csi-sidecars`: flags checked before anything starts
//! ([`Config::from_args`]), then the controller built on a started runtime and a connected driver ([`start`]).

use csi_client::capabilities::NodeCapability;
use k8s_openapi::api::storage::v1::VolumeAttributesClass;
use sidecar_runtime::describe::Metrics;
use sidecar_runtime::kube_client::api_resource_exists;
use sidecar_runtime::leader_election::resizer_lease_name;
use sidecar_runtime::{
    Beside, Described, Description, Driver, RetryPolicy, SetupError, SetupResult, Sidecar, SidecarLoop, Started,
};

use crate::controller::{Controller, Options, ResizerMetrics, event_component};
use crate::flags::{Args, Features, GA_GATES};
use crate::translate::capabilities::{self, ControllerExpansion};
use crate::translate::expansion::decide::ExpansionConfig;
use crate::translate::modification::decide::ModificationConfig;

/// The sidecar's name in `csi-sidecars --sidecars` and in its messages.
pub const NAME: &str = "resizer";

/// The flags, checked: what can be refused before connecting to anything is refused here.
pub struct Config {
    args: Args,
    features: Features,
}

impl Config {
    /// Checks the feature gates.
    pub fn from_args(args: Args) -> Result<Config, SetupError> {
        let features = args.features().refused()?;
        Ok(Config { args, features })
    }

    /// The flags every sidecar shares, for [`Sidecar::start`].
    pub fn common(&self) -> sidecar_runtime::CommonArgs {
        self.args.common.clone()
    }

    /// `--timeout`: how long to wait for the driver, and the limit of the calls made at startup.
    pub fn timeout(&self) -> std::time::Duration {
        self.args.timeouts.timeout
    }
}

/// Learns what the driver can do (expand in the controller or on the node, modify), refuses a driver that can do
/// neither, and builds the controller. Runs under `external-resizer-<driver>`.
pub async fn start(config: Config, sidecar: &mut Sidecar, driver: &Driver) -> Result<SidecarLoop, SetupError> {
    let Config { args, features } = config;
    args.common.feature_gates().warn_ga_gates_set(&GA_GATES);
    let client = sidecar.client();
    let modify_gate = match features.volume_attributes_class {
        Some(explicit) => explicit,
        None => volume_attributes_class_api(&client).await,
    };
    // The capability calls take `--timeout`; ControllerExpandVolume and ControllerModifyVolume their own limits.
    let (csi, driver) = (driver.csi.with_timeout(args.timeouts.timeout), driver.name.clone());
    // CSI migration: the driver also expands the in-tree plugin's volumes handed over to it (external-resizer
    // pkg/resizer/csi_resizer.go, CanSupport).
    if let Some(in_tree) = csi_translation::in_tree_name_for(&driver) {
        tracing::info!(%in_tree, "expanding the in-tree plugin's volumes too (CSI migration)");
        csi.metrics().enable_migration_label();
    }

    let plugin = csi.plugin_capabilities().await.step("GetPluginCapabilities")?;
    let controller = csi.controller_capabilities().await.step("ControllerGetCapabilities")?;
    let expansion = capabilities::controller_expansion(&plugin, &controller).step("Failed to create CSI resizer")?;
    let expander = match expansion {
        ControllerExpansion::Supported(expander) => Some(expander),
        ControllerExpansion::AskNode => {
            let node = csi.node_capabilities().await.step("NodeGetCapabilities")?;
            let expander = capabilities::node_expansion(node.has(NodeCapability::ExpandVolume));
            match expander {
                Some(_) => tracing::info!("CSI driver supports node resize only"),
                None => tracing::info!("Resize not supported"),
            }
            expander
        }
    };
    let can_modify = capabilities::modification_supported(&controller);
    capabilities::check_jobs(expander, can_modify).refused()?;

    let options = Options {
        workers: args.workers,
        retry: RetryPolicy::from_args(&args.retry),
        resync_period: args.resync_period,
        expansion: expander.map(|expander| ExpansionConfig {
            driver_name: driver.clone(),
            expander,
            annotate_fs_resize: features.annotate_fs_resize,
            handle_volume_inuse_error: args.handle_volume_inuse_error,
        }),
        modification: (can_modify && modify_gate).then(|| ModificationConfig {
            driver_name: driver.clone(),
            extra_modify_metadata: args.extra_modify_metadata,
        }),
        handle_volume_inuse_error: args.handle_volume_inuse_error && expander.is_some(),
        expand_timeout: args.timeouts.expand(),
        modify_timeout: args.timeouts.modify(),
    };
    if can_modify && !modify_gate {
        tracing::info!("VolumeAttributesClass is off; not modifying volumes");
    }
    let queue_metrics = sidecar.queue_metrics();
    let metrics = ResizerMetrics::register(sidecar.registry());
    let events = sidecar.events(event_component(&driver));
    let controller = Controller::new(client, &sidecar.caches(), csi, events, options, Some(&queue_metrics), metrics);
    Ok(SidecarLoop::new(NAME, resizer_lease_name(&driver), args.timeouts.longest(), |stop| controller.run(stop)))
}

/// Without an explicit VolumeAttributesClass gate, modification runs only if storage.k8s.io/v1 serves
/// VolumeAttributesClass; if discovery fails, the gate stays on (external-resizer pkg/features/features.go,
/// IsVolumeAttributesClassV1Enabled).
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

/// csi-resizer, as `csi-sidecars` and the e2e harness find it.
pub struct Resizer;

impl Described for Resizer {
    const DESCRIPTION: Description = Description {
        name: NAME,
        binary: "csi-resizer",
        lease: Some(resizer_lease_name),
        rbac: Some("external-resizer.yaml"),
        metrics: Metrics::Runtime,
    };
    type Args = Args;
    type Config = Config;

    fn from_args(args: Args) -> Result<Config, SetupError> {
        Config::from_args(args)
    }

    fn timeout(config: &Config) -> std::time::Duration {
        config.timeout()
    }

    async fn start(config: Config, mut beside: Beside<'_>) -> Result<Started, SetupError> {
        let driver = beside.driver;
        Ok(Started::Loop(start(config, beside.sidecar()?, driver).await?))
    }
}
