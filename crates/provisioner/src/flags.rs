//! The csi-provisioner command line: every upstream flag with its upstream default (external-provisioner
//! cmd/csi-provisioner/csi-provisioner.go).
//!
//! Flags for Go facilities (`--enable-pprof`) are accepted so that existing manifests keep working, and a warning
//! names them when they ask for something ([`Args::unsupported`]). Flags upstream removed are refused with a message
//! naming them ([`RemovedFlags`]).

use std::time::Duration;

use csi_client::proto::NodeGetInfoResponse;
use sidecar_runtime::flags::{Removed, go_bool, go_duration, removed};
use sidecar_runtime::{CommonArgs, RetryArgs};

use crate::translate::node_deployment::NodeDeployment;
use crate::translate::provisioner::{Features, Provisioner};

/// `--feature-gates` names the provisioner knows.
pub const TOPOLOGY: &str = "Topology";
pub const VOLUME_ATTRIBUTES_CLASS: &str = "VolumeAttributesClass";
pub const CROSS_NAMESPACE_VOLUME_DATA_SOURCE: &str = "CrossNamespaceVolumeDataSource";
pub const KNOWN_GATES: [&str; 4] = [
    TOPOLOGY,
    VOLUME_ATTRIBUTES_CLASS,
    CROSS_NAMESPACE_VOLUME_DATA_SOURCE,
    sidecar_runtime::RELEASE_LEADER_ELECTION_ON_EXIT,
];

#[derive(Debug, Clone, clap::Parser)]
#[command(name = "csi-provisioner", about = "Provisions PersistentVolumes for claims through a CSI driver")]
pub struct Args {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub retry: RetryArgs,
    #[command(flatten)]
    pub removed: RemovedFlags,

    /// Deadline of each CSI call.
    #[arg(long, default_value = "10s", value_parser = go_duration)]
    pub timeout: Duration,
    /// Prefix of PV names and CreateVolume names.
    #[arg(long, default_value = "pvc")]
    pub volume_name_prefix: String,
    /// Length of the claim UID in volume names: -1 keeps it whole, N keeps N characters without dashes.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub volume_name_uuid_length: i64,
    /// Number of claim workers, and separately of volume (deletion) workers.
    #[arg(long, default_value_t = 100)]
    pub worker_threads: usize,
    /// Workers removing the clone-protection finalizer.
    #[arg(long, default_value_t = 1)]
    pub cloning_protection_threads: usize,
    /// Period of the sweep of orphaned snapshot source-protection finalizers (0: off).
    #[arg(long, default_value = "5m", value_parser = go_duration)]
    pub snapshot_orphan_sweep_interval: Duration,
    /// Workers for CSIStorageCapacity.
    #[arg(long, default_value_t = 1)]
    pub capacity_threads: usize,
    /// Late binding: send only the selected node's topology.
    #[arg(long, num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = go_bool)]
    pub strict_topology: bool,
    /// Immediate binding: send the aggregated cluster topology.
    #[arg(long, num_args = 0..=1, require_equals = true, default_value = "true", default_missing_value = "true", value_parser = go_bool)]
    pub immediate_topology: bool,
    /// Add the claim name and namespace and the PV name to the CreateVolume parameters.
    #[arg(long, num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = go_bool)]
    pub extra_create_metadata: bool,
    /// fsType when the StorageClass gives none.
    #[arg(long, default_value = "")]
    pub default_fstype: String,
    /// Mark PVs of ReadOnlyMany-only claims read-only.
    #[arg(long, num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = go_bool)]
    pub controller_publish_readonly: bool,
    /// Refuse snapshot restores that change the volume mode unless the content allows it.
    #[arg(long, num_args = 0..=1, require_equals = true, default_value = "true", default_missing_value = "true", value_parser = go_bool)]
    pub prevent_volume_mode_conversion: bool,
    /// Publish CSIStorageCapacity objects (needs $NAMESPACE, and $POD_NAME for an owner).
    #[arg(long, num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = go_bool)]
    pub enable_capacity: bool,
    /// Also publish capacity for Immediate classes.
    #[arg(long, num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = go_bool)]
    pub capacity_for_immediate_binding: bool,
    /// Period of the GetCapacity refresh.
    #[arg(long, default_value = "1m", value_parser = go_duration)]
    pub capacity_poll_interval: Duration,
    /// Owner of the capacity objects: -1 none, 0 the pod, 1 its controller (StatefulSet, DaemonSet, ReplicaSet), 2 the next.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    pub capacity_ownerref_level: i32,
    /// Rate limit of CSIStorageCapacity writes (a client of their own).
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub kube_api_capacity_qps: f32,
    /// Burst of CSIStorageCapacity writes.
    #[arg(long, default_value_t = 5)]
    pub kube_api_capacity_burst: u32,
    /// Distributed provisioning, one provisioner per node; needs env NODE_NAME.
    #[arg(long, num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = go_bool)]
    pub node_deployment: bool,
    /// In node mode, compete for Immediate claims.
    #[arg(long, num_args = 0..=1, require_equals = true, default_value = "true", default_missing_value = "true", value_parser = go_bool)]
    pub node_deployment_immediate_binding: bool,
    /// In node mode, the initial delay (jittered) before trying to own an Immediate claim.
    #[arg(long, default_value = "20s", value_parser = go_duration)]
    pub node_deployment_base_delay: Duration,
    /// In node mode, the ceiling of the ownership backoff.
    #[arg(long, default_value = "60s", value_parser = go_duration)]
    pub node_deployment_max_delay: Duration,
    /// Serve /debug/pprof (a Go facility; accepted, no effect).
    #[arg(long, hide = true, num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = go_bool)]
    pub enable_pprof: bool,
}

/// `--enable-capacity` without the environment it needs.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MissingCapacityEnv {
    #[error("need NAMESPACE env variable for CSIStorageCapacity objects")]
    Namespace,
    #[error("need POD_NAME env variable to determine CSIStorageCapacity owner (or --capacity-ownerref-level=-1)")]
    PodName,
}

/// Where capacity objects go and whose they are: `$NAMESPACE`, and `$POD_NAME` with the number of controller
/// levels to walk up from it (None: no owner).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapacityPlacement {
    pub namespace: String,
    pub owner: Option<(String, u32)>,
}

/// Upstream flags that no longer exist (current upstream fails on them as unknown flags): refused naming them and
/// what replaced them ([`sidecar_runtime::flags::removed`]).
#[derive(Clone, Debug, clap::Args)]
pub struct RemovedFlags {
    #[arg(long, hide = true, num_args = 0..=1, require_equals = true, default_missing_value = "",
          value_parser = removed("the provisioner name is the driver name from GetPluginInfo"))]
    pub provisioner: Option<Removed>,
    #[arg(long, hide = true, num_args = 0..=1, require_equals = true, default_missing_value = "",
          value_parser = removed("removed in 2.0; the provisioner waits for the driver indefinitely"))]
    pub connection_timeout: Option<Removed>,
    #[arg(long, hide = true, num_args = 0..=1, require_equals = true, default_missing_value = "",
          value_parser = removed("removed in 2.0; use --leader-election"))]
    pub enable_leader_election: Option<Removed>,
    #[arg(long, hide = true, num_args = 0..=1, require_equals = true, default_missing_value = "",
          value_parser = removed("removed in 2.0; leader election always uses Leases"))]
    pub leader_election_type: Option<Removed>,
    #[arg(long, hide = true, num_args = 0..=1, require_equals = true, default_missing_value = "",
          value_parser = removed("retries are unlimited; see --retry-interval-start/--retry-interval-max"))]
    pub provisioning_retry_count: Option<Removed>,
    #[arg(long, hide = true, num_args = 0..=1, require_equals = true, default_missing_value = "",
          value_parser = removed("retries are unlimited; see --retry-interval-start/--retry-interval-max"))]
    pub deletion_retry_count: Option<Removed>,
}

impl Args {
    /// The feature gates, refusing names the provisioner does not know.
    pub fn feature_gates(&self) -> Result<Features, sidecar_runtime::flags::ValueError> {
        let gates = self.common.feature_gates();
        gates.check_known(&KNOWN_GATES)?;
        let defaults = Features::default();
        Ok(Features {
            topology: gates.enabled(TOPOLOGY, defaults.topology),
            volume_attributes_class: gates.enabled(VOLUME_ATTRIBUTES_CLASS, defaults.volume_attributes_class),
            cross_namespace_volume_data_source: gates
                .enabled(CROSS_NAMESPACE_VOLUME_DATA_SOURCE, defaults.cross_namespace_volume_data_source),
        })
    }

    /// The flags that shape requests and volumes, applied to a provisioner for `driver_name`.
    pub fn provisioner(&self, driver_name: &str, features: Features) -> Provisioner {
        let mut provisioner = Provisioner::new(driver_name);
        provisioner.volume_name_prefix = self.volume_name_prefix.clone();
        provisioner.volume_name_uuid_length = self.volume_name_uuid_length;
        provisioner.default_fs_type = self.default_fstype.clone();
        provisioner.extra_create_metadata = self.extra_create_metadata;
        provisioner.controller_publish_readonly = self.controller_publish_readonly;
        provisioner.strict_topology = self.strict_topology;
        provisioner.immediate_topology = self.immediate_topology;
        provisioner.prevent_volume_mode_conversion = self.prevent_volume_mode_conversion;
        provisioner.features = features;
        provisioner
    }

    /// Node mode's settings: the node, what NodeGetInfo said about it, and the `--node-deployment-*` flags.
    pub fn node_deployment(&self, node_name: String, info: NodeGetInfoResponse) -> NodeDeployment {
        NodeDeployment {
            node_name,
            node_id: info.node_id,
            topology: info.accessible_topology.map(|t| t.segments.into_iter().collect()).unwrap_or_default(),
            immediate_binding: self.node_deployment_immediate_binding,
            base_delay: self.node_deployment_base_delay,
            max_delay: self.node_deployment_max_delay,
        }
    }

    /// With `--enable-capacity`: the namespace and owner of the capacity objects, from the environment.
    pub fn capacity_placement(
        &self,
        namespace_env: Option<String>,
        pod_name_env: Option<String>,
    ) -> Result<Option<CapacityPlacement>, MissingCapacityEnv> {
        if !self.enable_capacity {
            return Ok(None);
        }
        let namespace = namespace_env.filter(|n| !n.is_empty()).ok_or(MissingCapacityEnv::Namespace)?;
        let owner = match u32::try_from(self.capacity_ownerref_level) {
            // Negative: no owner.
            Err(_) => None,
            Ok(levels) => Some((pod_name_env.filter(|p| !p.is_empty()).ok_or(MissingCapacityEnv::PodName)?, levels)),
        };
        Ok(Some(CapacityPlacement { namespace, owner }))
    }

    /// Flags that ask for something this implementation does not have, for a startup warning.
    pub fn unsupported(&self) -> Vec<&'static str> {
        let mut unsupported = Vec::new();
        if self.enable_pprof {
            unsupported.push("--enable-pprof");
        }
        unsupported
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        sidecar_runtime::flags::try_parse_from(std::iter::once("csi-provisioner").chain(args.iter().copied()))
    }

    #[test]
    fn upstream_defaults() {
        let args = parse(&[]).unwrap();
        assert_eq!(args.common.csi_address, "/run/csi/socket");
        assert_eq!(args.timeout, Duration::from_secs(10));
        assert_eq!(args.volume_name_prefix, "pvc");
        assert_eq!(args.volume_name_uuid_length, -1);
        assert_eq!(args.worker_threads, 100);
        assert_eq!(args.retry.retry_interval_start, Duration::from_secs(1));
        assert_eq!(args.retry.retry_interval_max, Duration::from_secs(300));
        assert!(!args.strict_topology && args.immediate_topology && args.prevent_volume_mode_conversion);
        assert!(!args.extra_create_metadata && !args.controller_publish_readonly && !args.enable_capacity);
        assert_eq!(args.capacity_poll_interval, Duration::from_secs(60));
        assert_eq!(args.capacity_ownerref_level, 1);
        assert_eq!((args.kube_api_capacity_qps, args.kube_api_capacity_burst), (1.0, 5));
        assert_eq!(args.node_deployment_base_delay, Duration::from_secs(20));
        assert_eq!(args.node_deployment_max_delay, Duration::from_secs(60));
        assert_eq!(args.snapshot_orphan_sweep_interval, Duration::from_secs(300));
        assert_eq!(args.feature_gates().unwrap(), Features::default());
        assert!(args.unsupported().is_empty());
    }

    #[test]
    fn go_style_manifests_parse() {
        let args = parse(&[
            "-csi-address=/csi/csi.sock",
            "--v=5",
            "--timeout=30s",
            "--extra-create-metadata",
            "--immediate-topology=false",
            "--volume-name-uuid-length=8",
            "--feature-gates=Topology=false,VolumeAttributesClass=true",
            "--default-fstype=ext4",
            "--enable-capacity",
            "--capacity-ownerref-level=-1",
            "--leader-election",
            "--http-endpoint=:8080",
        ])
        .unwrap();
        assert_eq!(args.common.csi_address, "/csi/csi.sock");
        assert_eq!(args.timeout, Duration::from_secs(30));
        assert!(args.extra_create_metadata && !args.immediate_topology);
        assert!(!args.feature_gates().unwrap().topology);
        assert!(args.unsupported().is_empty(), "--enable-capacity is supported");
        let provisioner = args.provisioner("d", args.feature_gates().unwrap());
        assert_eq!(provisioner.volume_name_uuid_length, 8);
        assert_eq!(provisioner.default_fs_type, "ext4");
        assert!(!provisioner.immediate_topology);
    }

    #[test]
    fn unknown_gates_and_removed_flags_are_refused() {
        assert!(parse(&["--feature-gates=NoSuchGate=true"]).unwrap().feature_gates().is_err());
        for flag in [
            "--provisioner=x",
            "-connection-timeout=5s",
            "--enable-leader-election",
            "--leader-election-type=leases",
            "--provisioning-retry-count=3",
            "-deletion-retry-count=3",
        ] {
            let message = parse(&[flag]).expect_err(flag).to_string();
            let name = flag.trim_start_matches('-').split('=').next().unwrap();
            assert!(message.contains(&format!("--{name}")), "{message}");
            assert!(message.contains("no longer supported"), "{message}");
        }
        assert!(parse(&["--leader-election", "--timeout=1s"]).is_ok());
    }

    #[test]
    fn node_deployment_is_supported() {
        assert!(!parse(&[]).unwrap().node_deployment);
        let node_mode = parse(&["--node-deployment"]).unwrap();
        assert!(node_mode.node_deployment);
        assert!(node_mode.unsupported().is_empty(), "--node-deployment is supported");
    }

    #[test]
    fn node_deployment_settings() {
        let args = parse(&[
            "--node-deployment",
            "--node-deployment-immediate-binding=false",
            "--node-deployment-base-delay=1s",
            "--node-deployment-max-delay=2s",
        ])
        .unwrap();
        let info = NodeGetInfoResponse {
            node_id: "id-1".into(),
            max_volumes_per_node: 0,
            accessible_topology: Some(csi_client::proto::Topology {
                segments: [("topology.hostpath.csi/node".to_string(), "n1".to_string())].into(),
            }),
        };
        let local = args.node_deployment("n1".into(), info);
        assert_eq!((local.node_name.as_str(), local.node_id.as_str()), ("n1", "id-1"));
        assert_eq!(local.topology.get("topology.hostpath.csi/node").map(String::as_str), Some("n1"));
        assert!(!local.immediate_binding);
        assert_eq!((local.base_delay, local.max_delay), (Duration::from_secs(1), Duration::from_secs(2)));
        let defaults = parse(&["--node-deployment"]).unwrap();
        let local = defaults.node_deployment("n1".into(), NodeGetInfoResponse::default());
        assert!(local.immediate_binding && local.topology.is_empty(), "no topology reported, none assumed");
    }

    #[test]
    fn capacity_placement_comes_from_the_environment() {
        let env = |v: Option<&str>| v.map(str::to_string);
        let off = parse(&[]).unwrap();
        let owned = parse(&["--enable-capacity"]).unwrap();
        let pod_level = parse(&["--enable-capacity", "--capacity-ownerref-level=0"]).unwrap();
        let unowned = parse(&["--enable-capacity", "--capacity-ownerref-level=-1"]).unwrap();
        let placed = |namespace: &str, owner: Option<(&str, u32)>| {
            Ok(Some(CapacityPlacement { namespace: namespace.into(), owner: owner.map(|(p, l)| (p.into(), l)) }))
        };
        // (rule, args, NAMESPACE, POD_NAME, result)
        let table = [
            ("capacity off: nothing needed", &off, None, None, Ok(None)),
            ("65: NAMESPACE is required", &owned, None, Some("p"), Err(MissingCapacityEnv::Namespace)),
            ("68: the default level 1 needs POD_NAME", &owned, Some("ns"), None, Err(MissingCapacityEnv::PodName)),
            ("68: level 1", &owned, Some("ns"), Some("p"), placed("ns", Some(("p", 1)))),
            ("68: level 0", &pod_level, Some("ns"), Some("p"), placed("ns", Some(("p", 0)))),
            ("68: level -1 needs no pod", &unowned, Some("ns"), None, placed("ns", None)),
        ];
        for (rule, args, namespace, pod, want) in table {
            assert_eq!(args.capacity_placement(env(namespace), env(pod)), want, "{rule}");
        }
    }
}
