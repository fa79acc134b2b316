//! csi-external-health-monitor-controller's wiring, shared by its binary and `csi-sidecars`: flags checked before
//! anything starts ([`Config::from_args`]), then the controller built on a started runtime and a connected driver
//! ([`start`]).

use csi_client::capabilities::{ControllerCapabilities, PluginService};
use csi_client::proto::{ControllerGetCapabilitiesRequest, controller_service_capability};
use sidecar_runtime::describe::Metrics;
use sidecar_runtime::{
    Beside, Described, Description, Driver, RetryPolicy, SetupError, SetupResult, Sidecar, SidecarLoop, Started,
};

use crate::controller::{Controller, Options};
use crate::flags::Args;
use crate::translate::mode::{self, LEGACY_VOLUME_CONDITION, Mode};
use crate::translate::names::{event_component, lease_name};

/// The sidecar's name in `csi-sidecars --sidecars` and in its messages.
pub const NAME: &str = "health-monitor";

/// The flags, checked: what can be refused before connecting to anything is refused here.
pub struct Config {
    args: Args,
}

impl Config {
    /// Checks the feature gates and the worker count (upstream refuses `--worker-threads=0`).
    pub fn from_args(args: Args) -> Result<Config, SetupError> {
        args.features().refused()?;
        if args.worker_threads == 0 {
            return Err(SetupError::message("Option --worker-threads must be greater than zero"));
        }
        Ok(Config { args })
    }

    /// The flags every sidecar shares, for [`Sidecar::start`].
    pub fn common(&self) -> sidecar_runtime::CommonArgs {
        self.args.common.clone()
    }

    /// `--timeout`: each CSI call's limit, and how long in-flight work may drain.
    pub fn timeout(&self) -> std::time::Duration {
        self.args.timeout
    }
}

/// Learns how the driver reports health (listing or per volume) and builds the controller. Runs under
/// `external-health-monitor-leader-<driver>`.
pub async fn start(config: Config, sidecar: &mut Sidecar, driver: &Driver) -> Result<SidecarLoop, SetupError> {
    let Config { args } = config;
    let csi = driver.csi.with_timeout(args.timeout);
    let driver = driver.name.clone();
    let plugin = csi.plugin_capabilities().await.step("GetPluginCapabilities")?;
    let (controller, legacy_condition) = match plugin.has(PluginService::ControllerService) {
        true => {
            let request = ControllerGetCapabilitiesRequest {};
            let raw = csi.controller_get_capabilities_raw(request).await.step("ControllerGetCapabilities")?;
            let legacy = raw.capabilities.iter().any(|c| {
                matches!(&c.r#type, Some(controller_service_capability::Type::Rpc(rpc)) if rpc.r#type == LEGACY_VOLUME_CONDITION)
            });
            (Some(ControllerCapabilities::from_response(&raw.capabilities)), legacy)
        }
        false => (None, false),
    };
    let mode =
        mode::mode(&plugin, controller.as_ref(), legacy_condition).map_err(|r| SetupError::message(r.to_string()))?;
    match mode {
        Mode::List => tracing::info!("CSI driver supports ControllerListVolumeHealth; listing volume health"),
        Mode::PerVolume => tracing::info!("CSI driver supports ControllerGetVolumeHealth; asking each volume"),
    }
    if args.enable_node_watcher {
        tracing::warn!("--enable-node-watcher is accepted but not implemented: no node events are reported");
    }
    let options = Options {
        driver: driver.clone(),
        mode,
        workers: args.worker_threads,
        monitor_interval: args.monitor_interval,
        list_volumes_interval: args.list_volumes_interval,
        volume_list_add_interval: args.volume_list_add_interval,
    };
    let queue_metrics = sidecar.queue_metrics();
    let events = sidecar.events(event_component(&driver));
    let controller = Controller::new(sidecar.client(), &sidecar.caches(), csi, events, options, Some(&queue_metrics));
    Ok(SidecarLoop::new(NAME, lease_name(&driver), args.timeout, |stop| controller.run(stop)))
}

/// csi-external-health-monitor-controller, as `csi-sidecars` and the e2e harness find it.
pub struct HealthMonitor;

impl Described for HealthMonitor {
    const DESCRIPTION: Description = Description {
        name: NAME,
        binary: "csi-external-health-monitor-controller",
        lease: Some(lease_name),
        rbac: Some("external-health-monitor-controller.yaml"),
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

/// The retry policy of the queue: upstream has no retry flags; a failed check comes round at the next interval.
pub(crate) fn retry_policy() -> RetryPolicy {
    RetryPolicy::new(std::time::Duration::from_secs(1), std::time::Duration::from_secs(300))
}
