//! csi-snapshotter's wiring, shared by its binary and `csi-sidecars`: flags checked before anything starts
//! ([`Config::from_args`]), then the content loop (and, behind `CSIVolumeGroupSnapshot`, the group loop) built on a
//! started runtime and a connected driver ([`start`]).

use csi_client::capabilities::ControllerCapability;
use group_snapshotter::controller::sidecar as group;
use sidecar_runtime::{Driver, RetryPolicy, SetupError, SetupResult, Sidecar, SidecarLoop};
use snapshotter::controller::sidecar::{Controller, Options};
use snapshotter::flags::Features;
use snapshotter::flags::sidecar::Args;
use snapshotter::translate::sidecar::lease_name;

use crate::group_loop;

/// The sidecar's name in `csi-sidecars --sidecars` and in its messages.
pub const NAME: &str = "snapshotter";

/// The flags, checked: what can be refused before connecting to anything is refused here.
pub struct Config {
    args: Args,
    features: Features,
    node_name: Option<String>,
}

impl Config {
    /// Checks the flags as upstream does, and `NODE_NAME` with `--node-deployment`.
    pub fn from_args(args: Args) -> Result<Config, SetupError> {
        let features = args.validate().refused()?;
        let node_name = args.node_name(std::env::var("NODE_NAME").ok()).refused()?;
        Ok(Config { args, features, node_name })
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

/// Refuses a driver without CreateSnapshot and builds the content loop; with `groups` (csi-snapshotter alone: yes;
/// beside `group-snapshotter` in `csi-sidecars`: no, that one runs it) and the gate on, the group loop too. Runs
/// under `external-snapshotter-leader-<driver>`.
pub async fn start(
    config: Config,
    sidecar: &mut Sidecar,
    driver: &Driver,
    groups: bool,
) -> Result<SidecarLoop, SetupError> {
    let Config { args, features, node_name } = config;
    let (csi, driver) = (driver.csi.with_timeout(args.timeout), driver.name.clone());
    let capabilities = csi.controller_capabilities().await.step("ControllerGetCapabilities")?;
    if !capabilities.has(ControllerCapability::CreateDeleteSnapshot) {
        let message = format!("CSI driver {driver} does not support ControllerCreateSnapshot");
        tracing::error!("{message}");
        return Err(SetupError::message(message));
    }
    let snapshotter = args.snapshotter(&driver, capabilities.has(ControllerCapability::ListSnapshots));
    // The group loop runs when the gate is on and the driver has group snapshots (upstream's condition).
    let groups = groups && features.volume_group_snapshot && group_loop::driver_has_group_snapshots(&csi).await;
    if let Some(node) = &node_name {
        tracing::info!(%node, "node deployment: handling only the contents labelled with this node");
    }

    let queue_metrics = sidecar.queue_metrics();
    let caches = sidecar.caches();
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
        group::Controller::new(
            sidecar.client(),
            &caches,
            csi.clone(),
            events.clone(),
            group_options,
            Some(&queue_metrics),
        )
    });
    let controller = Controller::new(sidecar.client(), &caches, csi, events, options, Some(&queue_metrics));
    Ok(SidecarLoop::new(NAME, lease_name(&driver), args.timeout, |stop| async move {
        let groups = async {
            if let Some(groups) = groups {
                groups.run(stop.clone()).await;
            }
        };
        tokio::join!(controller.run(stop.clone()), groups);
    }))
}
