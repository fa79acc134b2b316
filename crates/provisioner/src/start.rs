//! csi-provisioner's wiring, shared by its binary and `csi-sidecars`: flags checked before anything starts
//! ([`Config::from_args`]), then the controller built on a started runtime and a connected driver ([`start`]).

use csi_client::capabilities::ControllerCapability;
use csi_client::proto::NodeGetInfoRequest;
use sidecar_runtime::describe::Metrics;
use sidecar_runtime::flags::{NODE_NAME_ENV, node_name};
use sidecar_runtime::journal::{Bounds, JournalOptions};
use sidecar_runtime::kube_client::{self, KubeClientOptions};
use sidecar_runtime::leader_election::{lease_namespace, provisioner_lease_name};
use sidecar_runtime::{
    Beside, Described, Description, Driver, RetryPolicy, SetupError, SetupResult, Sidecar, SidecarLoop, Started,
};

use crate::controller::capacity::{Capacity, CapacityMetrics, CapacityOptions};
use crate::controller::capacity_owner::lookup_owner;
use crate::controller::{self, Controller, Options, ProvisioningMetrics};
use crate::flags::{Args, CapacityPlacement};
use crate::translate::capacity::{Publisher, managed_by};
use crate::translate::in_flight_entry::{JOURNAL_ENTRY_PREFIX, JOURNAL_LINGER, JOURNAL_REMOVAL_DELAY, journal_name};
use crate::translate::provisioner::{Features, provisioner_identity};

/// The sidecar's name in `csi-sidecars --sidecars` and in its messages.
pub const NAME: &str = "provisioner";

/// The flags, checked: what can be refused before connecting to anything is refused here.
pub struct Config {
    args: Args,
    features: Features,
    node_name: Option<String>,
    capacity_placement: Option<CapacityPlacement>,
}

impl Config {
    /// Checks the feature gates and the environment the flags need (`NODE_NAME`, `NAMESPACE`, `POD_NAME`).
    pub fn from_args(args: Args) -> Result<Config, SetupError> {
        let features = args.feature_gates().refused()?;
        let node_name = node_name(args.node_deployment, std::env::var(NODE_NAME_ENV).ok()).refused()?;
        let capacity_placement =
            args.capacity_placement(std::env::var("NAMESPACE").ok(), std::env::var("POD_NAME").ok()).refused()?;
        Ok(Config { args, features, node_name, capacity_placement })
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

/// Builds the controller (and the capacity publisher with `--enable-capacity`) for `driver`, registering their
/// metrics on `sidecar`. Runs under the provisioner's Lease, named after the driver.
pub async fn start(config: Config, sidecar: &mut Sidecar, driver: &Driver) -> Result<SidecarLoop, SetupError> {
    let Config { args, features, node_name, capacity_placement } = config;
    for flag in args.unsupported() {
        tracing::warn!(flag, "flag accepted for compatibility; it has no effect here");
    }
    let (csi, driver) = (driver.csi.with_timeout(args.timeout), driver.name.clone());

    let mut provisioner = args.provisioner(&driver, features);
    // CSI migration: a driver that replaces an in-tree plugin also serves that plugin's classes and volumes.
    provisioner.migrated_in_tree_name = csi_translation::in_tree_name_for(&driver).map(str::to_string);
    if let Some(in_tree) = &provisioner.migrated_in_tree_name {
        tracing::info!(%in_tree, "serving the in-tree plugin's classes and volumes too (CSI migration)");
        csi.metrics().enable_migration_label();
    }
    provisioner.plugin_capabilities = csi.plugin_capabilities().await.step("GetPluginCapabilities")?;
    provisioner.controller_capabilities = csi.controller_capabilities().await.step("ControllerGetCapabilities")?;
    if let Some(node) = &node_name {
        let info = csi.node_get_info(NodeGetInfoRequest {}).await.step("NodeGetInfo")?;
        let local = args.node_deployment(node.clone(), info);
        tracing::info!(node = %local.node_name, node_id = %local.node_id, topology = ?local.topology,
            "node deployment: provisioning for this node only, with the topology from NodeGetInfo");
        provisioner.node_deployment = Some(local);
    }
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    provisioner.identity =
        provisioner_identity(now.as_millis() as i64, now.subsec_nanos(), &driver, node_name.as_deref());

    let queue_metrics = sidecar.queue_metrics();
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
    let mut controller = Controller::new(
        sidecar.client(),
        sidecar.caches(),
        csi,
        provisioner,
        events,
        options,
        Some(&queue_metrics),
        metrics,
    );
    if let Some(placement) = capacity_placement {
        if !has_get_capacity {
            tracing::warn!(
                "--enable-capacity: the driver does not advertise GET_CAPACITY; its GetCapacity calls will fail"
            );
        }
        let owner = match &placement.owner {
            Some((pod, levels)) => {
                let owner = lookup_owner(&sidecar.client(), &placement.namespace, pod, *levels).await.refused()?;
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
        let config = kube_client::config(&KubeClientOptions::from_args(&args.common)).await.refused()?;
        let client = kube_client::client_from_config(config, args.kube_api_capacity_qps, args.kube_api_capacity_burst)
            .refused()?;
        let metrics = CapacityMetrics::register(sidecar.registry());
        controller = controller.with_capacity(Capacity::new(client, options, metrics));
    }
    let lease = provisioner_lease_name(&driver);
    Ok(SidecarLoop::new(NAME, lease, args.timeout, |stop| controller.run(stop)))
}

/// csi-provisioner, as `csi-sidecars` and the e2e harness find it.
pub struct Provisioner;

impl Described for Provisioner {
    const DESCRIPTION: Description = Description {
        name: NAME,
        binary: "csi-provisioner",
        lease: Some(provisioner_lease_name),
        rbac: Some("external-provisioner.yaml"),
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
