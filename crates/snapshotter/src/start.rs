//! The wiring of the two snapshot binaries, in the shape every sidecar crate offers: the flags checked before anything
//! starts ([`Config::from_args`], [`ControllerConfig::from_args`]), then the loops built on a started runtime
//! ([`start`] for csi-snapshotter's content loop, [`controller_start`] for snapshot-controller's snapshot and content
//! loops).
//!
//! Both binaries also run a group loop behind `CSIVolumeGroupSnapshot`, which lives in the group-snapshotter crate; a
//! sidecar crate never depends on another, so whoever composes them builds the loops here ([`content_loop`],
//! [`controller_loops`]), takes what the group loop shares with them (driver connection, event recorder, metrics),
//! and runs both under one Lease with [`ContentLoop::beside`] / [`ControllerLoops::beside`].

use std::future::Future;
use std::time::Duration;

use csi_client::CsiClient;
use csi_client::capabilities::ControllerCapability;
use sidecar_runtime::flags::{NODE_NAME_ENV, node_name};
use sidecar_runtime::snapshot_operations::SnapshotMetrics;
use sidecar_runtime::{Driver, EventRecorder, RetryPolicy, SetupError, SetupResult, Sidecar, SidecarLoop};
use tokio_util::sync::CancellationToken;

use crate::controller::common::crds::wait_for_crds;
use crate::controller::{common, sidecar};
use crate::flags::{Features, GA_GATES, controller, sidecar as sidecar_flags};
use crate::translate::common::dynamic_content::ContentOptions;
use crate::translate::sidecar::lease_name;

/// csi-snapshotter's name in `csi-sidecars --sidecars` and in its messages.
pub const NAME: &str = "snapshotter";

/// snapshot-controller's name in its messages.
pub const CONTROLLER_NAME: &str = "snapshot-controller";

/// How long snapshot-controller's in-flight syncs may take to finish after SIGTERM (upstream has no `--timeout`).
pub const CONTROLLER_DRAIN: Duration = Duration::from_secs(10);

/// csi-snapshotter's flags, checked: what can be refused before connecting to anything is refused here.
pub struct Config {
    args: sidecar_flags::Args,
    features: Features,
    node_name: Option<String>,
}

impl Config {
    /// Checks the flags as upstream does, and `NODE_NAME` with `--node-deployment`.
    pub fn from_args(args: sidecar_flags::Args) -> Result<Config, SetupError> {
        let features = args.validate().refused()?;
        let node_name = node_name(args.node_deployment, std::env::var(NODE_NAME_ENV).ok()).refused()?;
        Ok(Config { args, features, node_name })
    }

    /// The flags every sidecar shares, for [`Sidecar::start`].
    pub fn common(&self) -> sidecar_runtime::CommonArgs {
        self.args.common.clone()
    }

    /// `--timeout`: each CSI call's limit, and how long in-flight work may drain.
    pub fn timeout(&self) -> Duration {
        self.args.timeout
    }

    /// The flags as given: the group loop takes its options from them.
    pub fn args(&self) -> &sidecar_flags::Args {
        &self.args
    }

    /// `--feature-gates=CSIVolumeGroupSnapshot`: whether the group loop may run beside the content loop.
    pub fn group_snapshots(&self) -> bool {
        self.features.volume_group_snapshot
    }
}

/// csi-snapshotter's content loop, built and not yet running, with what a group loop beside it shares.
pub struct ContentLoop {
    controller: sidecar::Controller,
    /// The driver under `--timeout`.
    pub csi: CsiClient,
    /// The recorder of `csi-snapshotter <driver>` events.
    pub events: EventRecorder,
    lease: String,
    drain: Duration,
}

impl ContentLoop {
    /// The content loop alone, under `external-snapshotter-leader-<driver>`.
    pub fn alone(self) -> SidecarLoop {
        let controller = self.controller;
        SidecarLoop::new(NAME, self.lease, self.drain, |stop| controller.run(stop))
    }

    /// The content loop and `other` (the group loop) side by side under the content loop's Lease, stopped by the same
    /// token; it returns once both have.
    pub fn beside<F, Fut>(self, other: F) -> SidecarLoop
    where
        F: FnOnce(CancellationToken) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let controller = self.controller;
        SidecarLoop::new(NAME, self.lease, self.drain, |stop| async move {
            tokio::join!(controller.run(stop.clone()), other(stop));
        })
    }
}

/// Refuses a driver without CreateSnapshot and builds the content loop: [`ContentLoop::alone`] of
/// [`content_loop`].
pub async fn start(config: Config, sidecar: &mut Sidecar, driver: &Driver) -> Result<SidecarLoop, SetupError> {
    Ok(content_loop(&config, sidecar, driver).await?.alone())
}

/// Refuses a driver without CreateSnapshot (exit 1 after the log line, as upstream) and builds the content loop.
pub async fn content_loop(config: &Config, sidecar: &mut Sidecar, driver: &Driver) -> Result<ContentLoop, SetupError> {
    let Config { args, features: _, node_name } = config;
    args.common.feature_gates().warn_ga_gates_set(&GA_GATES);
    let (csi, driver) = (driver.csi.with_timeout(args.timeout), driver.name.clone());
    let capabilities = csi.controller_capabilities().await.step("ControllerGetCapabilities")?;
    if !capabilities.has(ControllerCapability::CreateDeleteSnapshot) {
        let message = format!("CSI driver {driver} does not support ControllerCreateSnapshot");
        tracing::error!("{message}");
        return Err(SetupError::message(message));
    }
    let snapshotter = args.snapshotter(&driver, capabilities.has(ControllerCapability::ListSnapshots));
    if let Some(node) = node_name {
        tracing::info!(%node, "node deployment: handling only the contents labelled with this node");
    }

    let queue_metrics = sidecar.queue_metrics();
    let options = sidecar::Options {
        snapshotter,
        workers: args.worker_threads,
        retry: RetryPolicy::from_args(&args.retry),
        resync_period: args.resync_period,
        node_name: node_name.clone(),
    };
    let events = sidecar.events(options.snapshotter.event_component());
    let controller = sidecar::Controller::new(
        sidecar.client(),
        &sidecar.caches(),
        csi.clone(),
        events.clone(),
        options,
        Some(&queue_metrics),
    );
    Ok(ContentLoop { controller, csi, events, lease: lease_name(&driver), drain: args.timeout })
}

/// snapshot-controller's flags, checked.
pub struct ControllerConfig {
    args: controller::Args,
    features: Features,
}

impl ControllerConfig {
    /// Refuses the flags upstream removed and reads the feature gates.
    pub fn from_args(args: controller::Args) -> Result<ControllerConfig, SetupError> {
        let features = args.validate().refused()?;
        Ok(ControllerConfig { args, features })
    }

    /// The flags every sidecar shares, for [`Sidecar::start`].
    pub fn common(&self) -> sidecar_runtime::CommonArgs {
        self.args.common.clone()
    }

    /// How long in-flight syncs may take to finish after SIGTERM: [`CONTROLLER_DRAIN`].
    pub fn drain(&self) -> Duration {
        CONTROLLER_DRAIN
    }

    /// `--feature-gates=CSIVolumeGroupSnapshot`: whether the group loops may run beside the snapshot loops.
    pub fn group_snapshots(&self) -> bool {
        self.features.volume_group_snapshot
    }
}

/// snapshot-controller's snapshot and content loops, built and not yet running, with what the group loops beside
/// them share.
pub struct ControllerLoops {
    controller: common::Controller,
    /// How the loops work (`--worker-threads`, retries, `--resync-period`): the group loops work the same way.
    pub options: common::Options,
    /// The recorder of `snapshot-controller` events.
    pub events: EventRecorder,
    /// The operation histogram, which the group loops observe too.
    pub metrics: SnapshotMetrics,
}

impl ControllerLoops {
    /// The snapshot and content loops alone, under `snapshot-controller-leader`.
    pub fn alone(self) -> SidecarLoop {
        let controller = self.controller;
        SidecarLoop::new(CONTROLLER_NAME, common::LEASE_NAME, CONTROLLER_DRAIN, |stop| controller.run(stop))
    }

    /// The snapshot and content loops and `other` (the group loops) side by side under `snapshot-controller-leader`,
    /// stopped by the same token; it returns once both have.
    pub fn beside<F, Fut>(self, other: F) -> SidecarLoop
    where
        F: FnOnce(CancellationToken) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let controller = self.controller;
        SidecarLoop::new(CONTROLLER_NAME, common::LEASE_NAME, CONTROLLER_DRAIN, |stop| async move {
            tokio::join!(controller.run(stop.clone()), other(stop));
        })
    }
}

/// The snapshot and content loops alone: [`ControllerLoops::alone`] of [`controller_loops`].
pub async fn controller_start(config: ControllerConfig, sidecar: &mut Sidecar) -> Result<SidecarLoop, SetupError> {
    Ok(controller_loops(&config, sidecar).await?.alone())
}

/// Waits for the snapshot CRDs (`--retry-crd-interval-max`), then builds the snapshot and content loops.
pub async fn controller_loops(config: &ControllerConfig, sidecar: &mut Sidecar) -> Result<ControllerLoops, SetupError> {
    let args = &config.args;
    args.common.feature_gates().warn_ga_gates_set(&GA_GATES);
    wait_for_crds(&sidecar.client(), args.retry_crd_interval_max).await.refused()?;
    let options = common::Options {
        workers: args.worker_threads,
        retry: RetryPolicy::from_args(&args.retry),
        resync_period: args.resync_period,
        content: ContentOptions {
            prevent_volume_mode_conversion: args.prevent_volume_mode_conversion,
            managed_by_node: None,
        },
        distributed_snapshotting: args.enable_distributed_snapshotting,
    };
    let queue_metrics = sidecar.queue_metrics();
    let events = sidecar.events(common::EVENT_COMPONENT);
    let metrics = SnapshotMetrics::register(sidecar.registry());
    let controller = common::Controller::new(
        sidecar.client(),
        events.clone(),
        options.clone(),
        Some(&queue_metrics),
        metrics.clone(),
    );
    Ok(ControllerLoops { controller, options, events, metrics })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flags::parse_as;

    #[test]
    fn csi_snapshotter_flags_checked_before_anything_starts() {
        // (rule, command line, refusal)
        // (A removed flag never gets here: the parser refuses it, see the flags module.)
        let table: [(&str, &[&str], Option<&str>); 3] = [
            ("defaults", &[], None),
            ("an empty prefix", &["--snapshot-name-prefix="], Some("--snapshot-name-prefix must not be empty")),
            (
                "node deployment under leader election",
                &["--node-deployment", "--leader-election"],
                Some("--node-deployment and --leader-election cannot be used together"),
            ),
        ];
        for (rule, argv, refusal) in table {
            let config = Config::from_args(parse_as("csi-snapshotter", argv).unwrap());
            match (config, refusal) {
                (Ok(_), None) => {}
                (Err(err), Some(want)) => assert!(err.to_string().starts_with(want), "{rule}: {err}"),
                (Ok(_), Some(want)) => panic!("{rule}: accepted, want {want}"),
                (Err(err), None) => panic!("{rule}: refused: {err}"),
            }
        }
        let args = parse_as("csi-snapshotter", &["--timeout=15s"]);
        let config = Config::from_args(args.unwrap()).unwrap();
        assert_eq!(config.timeout(), Duration::from_secs(15));
        assert!(config.group_snapshots(), "on by default since v8.7.0");
        let off = parse_as("csi-snapshotter", &["--feature-gates=CSIVolumeGroupSnapshot=false"]).unwrap();
        assert!(!Config::from_args(off).unwrap().group_snapshots(), "the GA gate still turns groups off");
        assert_eq!(config.args().worker_threads, 10);
    }

    #[test]
    fn snapshot_controller_flags_checked_before_anything_starts() {
        let unknown_gate = parse_as("snapshot-controller", &["--feature-gates=NoSuchGate=true"]).unwrap();
        assert!(ControllerConfig::from_args(unknown_gate).is_err(), "an unknown gate is refused");
        let config = ControllerConfig::from_args(parse_as("snapshot-controller", &[]).unwrap()).unwrap();
        assert!(config.group_snapshots(), "on by default since v8.7.0");
        let off = parse_as("snapshot-controller", &["--feature-gates=CSIVolumeGroupSnapshot=false"]).unwrap();
        assert!(!ControllerConfig::from_args(off).unwrap().group_snapshots(), "the GA gate still turns groups off");
        assert_eq!(config.drain(), Duration::from_secs(10));
        assert_eq!(config.common().kube_api_qps, 5.0);
    }
}
