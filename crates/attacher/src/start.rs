//! csi-attacher's wiring, shared by its binary and `csi-sidecars`: flags checked before anything starts
//! ([`Config::from_args`]), then the controller built on a started runtime and a connected driver ([`start`]).

use sidecar_runtime::describe::Metrics;
use sidecar_runtime::leader_election::attacher_lease_name;
use sidecar_runtime::{
    Beside, Described, Description, Driver, RetryPolicy, SetupError, SetupResult, Sidecar, SidecarLoop, Started,
};

use crate::controller::{Controller, Options};
use crate::flags::{Args, Features};
use crate::translate::capabilities::{self, Handling};

/// The sidecar's name in `csi-sidecars --sidecars` and in its messages.
pub const NAME: &str = "attacher";

/// The flags, checked: what can be refused before connecting to anything is refused here.
pub struct Config {
    args: Args,
    features: Features,
}

impl Config {
    /// Checks the feature gates and the worker count (upstream refuses `-worker-threads=0`).
    pub fn from_args(args: Args) -> Result<Config, SetupError> {
        let features = args.features().refused()?;
        if args.worker_threads == 0 {
            return Err(SetupError::message("Option -worker-threads must be greater than zero"));
        }
        Ok(Config { args, features })
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

/// Learns what the driver can do (publish or not, read-only, SINGLE_NODE_MULTI_WRITER, published nodes) and builds
/// the controller. Runs under `external-attacher-leader-<driver>`.
pub async fn start(config: Config, sidecar: &mut Sidecar, driver: &Driver) -> Result<SidecarLoop, SetupError> {
    let Config { args, features } = config;
    let csi = driver.csi.with_timeout(args.timeout).with_max_log_length(args.log_length_cap());
    let driver = driver.name.clone();
    // CSI migration: the driver also attaches the in-tree plugin's volumes handed over to it.
    if let Some(in_tree) = csi_translation::in_tree_name_for(&driver) {
        tracing::info!(%in_tree, "attaching the in-tree plugin's volumes too (CSI migration)");
        csi.metrics().enable_migration_label();
    }
    let plugin = csi.plugin_capabilities().await.step("GetPluginCapabilities")?;
    let controller = match capabilities::has_controller_service(&plugin) {
        true => Some(csi.controller_capabilities().await.step("ControllerGetCapabilities")?),
        false => None,
    };
    let handling = capabilities::handling(controller.as_ref(), &args.default_fstype);
    match &handling {
        Handling::MarkAttached => {
            tracing::info!("CSI driver does not support ControllerPublishUnpublish, marking VolumeAttachments attached")
        }
        Handling::Publish { reconcile: true, .. } => tracing::info!(
            "CSI driver supports list volumes published nodes; reconciling VolumeAttachments with the driver's state"
        ),
        Handling::Publish { .. } => tracing::info!("CSI driver supports ControllerPublishUnpublish"),
    }
    let options = Options {
        driver: driver.clone(),
        handling,
        workers: args.worker_threads,
        retry: RetryPolicy::from_args(&args.retry),
        resync: args.resync,
        reconcile_sync: args.reconcile_sync,
        max_entries: args.max_entries,
        attach_error_code: features.attach_error_code,
    };
    let queue_metrics = sidecar.queue_metrics();
    let controller = Controller::new(sidecar.client(), &sidecar.caches(), csi, options, Some(&queue_metrics));
    Ok(SidecarLoop::new(NAME, attacher_lease_name(&driver), args.timeout, |stop| controller.run(stop)))
}

/// csi-attacher, as `csi-sidecars` and the e2e harness find it.
pub struct Attacher;

impl Described for Attacher {
    const DESCRIPTION: Description = Description {
        name: NAME,
        binary: "csi-attacher",
        lease: Some(attacher_lease_name),
        rbac: Some("external-attacher.yaml"),
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
