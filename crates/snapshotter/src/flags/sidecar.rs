//! The csi-snapshotter command line (external-snapshotter cmd/csi-snapshotter/main.go, and csi-lib-utils'
//! standardflags).

use std::time::Duration;

use sidecar_runtime::flags::{go_bool, go_duration};
use sidecar_runtime::{CommonArgs, RetryArgs};

use super::{Features, FlagError, RemovedArgs};
use crate::translate::sidecar::Snapshotter;

#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "csi-snapshotter",
    about = "Cuts and deletes the snapshots of one CSI driver's VolumeSnapshotContents"
)]
pub struct Args {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub retry: RetryArgs,

    /// Deadline of each CSI call, and of the startup checks.
    #[arg(long, default_value = "1m", value_parser = go_duration)]
    pub timeout: Duration,
    /// Resync period of the watch caches: every content is looked at again this often.
    #[arg(long, default_value = "15m", value_parser = go_duration)]
    pub resync_period: Duration,
    /// Prefix of the CreateSnapshot names.
    #[arg(long, default_value = "snapshot")]
    pub snapshot_name_prefix: String,
    /// Length of the VolumeSnapshot UID in CreateSnapshot names: -1 keeps it whole, N keeps N characters without dashes.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub snapshot_name_uuid_length: i64,
    /// Prefix of the CreateVolumeGroupSnapshot names.
    #[arg(long, default_value = "groupsnapshot")]
    pub groupsnapshot_name_prefix: String,
    /// Length of the VolumeGroupSnapshot UID in CreateVolumeGroupSnapshot names, as --snapshot-name-uuid-length.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub groupsnapshot_name_uuid_length: i64,
    /// Workers per queue (contents, and group contents).
    #[arg(long, default_value_t = 10)]
    pub worker_threads: usize,
    /// Add the VolumeSnapshot name and namespace and the content name to the CreateSnapshot parameters.
    #[arg(long, num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = go_bool)]
    pub extra_create_metadata: bool,
    /// One csi-snapshotter per node, handling only the contents labelled with its node; needs env NODE_NAME.
    #[arg(long, num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = go_bool)]
    pub node_deployment: bool,

    #[command(flatten)]
    pub removed: RemovedArgs,
}

impl Args {
    /// The feature gates, once the command line is known to be one upstream accepts.
    pub fn validate(&self) -> Result<Features, FlagError> {
        let features = Features::from_gates(&self.common.feature_gates())?;
        if self.node_deployment && self.common.leader_election {
            return Err(FlagError::NodeDeploymentWithLeaderElection);
        }
        if self.snapshot_name_prefix.is_empty() {
            return Err(FlagError::EmptySnapshotNamePrefix);
        }
        if features.volume_group_snapshot && self.groupsnapshot_name_prefix.is_empty() {
            return Err(FlagError::EmptyGroupSnapshotNamePrefix);
        }
        Ok(features)
    }

    /// The flags the content rules read, for `driver_name`; `list_snapshots` from ControllerGetCapabilities.
    pub fn snapshotter(&self, driver_name: &str, list_snapshots: bool) -> Snapshotter {
        Snapshotter {
            driver_name: driver_name.to_string(),
            snapshot_name_prefix: self.snapshot_name_prefix.clone(),
            snapshot_name_uuid_length: self.snapshot_name_uuid_length,
            extra_create_metadata: self.extra_create_metadata,
            list_snapshots,
        }
    }
}

#[cfg(test)]
mod tests {
    use sidecar_runtime::flags::ValueError;

    use super::*;

    fn parse(argv: &[&str]) -> Result<Args, clap::Error> {
        crate::flags::parse_as("csi-snapshotter", argv)
    }

    #[test]
    fn upstream_defaults() {
        let args = parse(&[]).unwrap();
        assert_eq!(args.common.csi_address, "/run/csi/socket");
        assert_eq!(args.timeout, Duration::from_secs(60));
        assert_eq!(args.resync_period, Duration::from_secs(15 * 60));
        assert_eq!((args.snapshot_name_prefix.as_str(), args.snapshot_name_uuid_length), ("snapshot", -1));
        assert_eq!(
            (args.groupsnapshot_name_prefix.as_str(), args.groupsnapshot_name_uuid_length),
            ("groupsnapshot", -1)
        );
        assert_eq!(args.worker_threads, 10);
        assert!(!args.extra_create_metadata && !args.node_deployment && !args.common.leader_election);
        assert_eq!(args.retry.retry_interval_start, Duration::from_secs(1));
        assert_eq!(args.retry.retry_interval_max, Duration::from_secs(300));
        assert_eq!((args.common.kube_api_qps, args.common.kube_api_burst), (5.0, 10));
        let features = args.validate().unwrap();
        assert!(features.volume_group_snapshot, "group snapshots are on by default since v8.7.0");
        assert!(!features.release_leader_election_on_exit);
        assert_eq!(args.snapshotter("d", false), Snapshotter::new("d"));
    }

    #[test]
    fn every_upstream_flag_in_go_syntax() {
        let args = parse(&[
            // The csi-lib-utils flags are sidecar-runtime's, tested there; one of them in its Go form.
            "-csi-address=/csi/csi.sock",
            "--timeout=2m",
            "--resync-period=30m",
            "--snapshot-name-prefix=snap",
            "--snapshot-name-uuid-length=8",
            "--groupsnapshot-name-prefix=group",
            "--groupsnapshot-name-uuid-length=4",
            "-worker-threads=3",
            "--extra-create-metadata",
            "--retry-interval-start=500ms",
            "--retry-interval-max=10m",
            "--feature-gates=CSIVolumeGroupSnapshot=true",
            "--log-json-split-stream",
            "--log-json-info-buffer-size=0",
        ])
        .unwrap();
        assert_eq!(args.common.csi_address, "/csi/csi.sock");
        assert_eq!(args.timeout, Duration::from_secs(120));
        assert_eq!(args.resync_period, Duration::from_secs(1800));
        assert_eq!((args.groupsnapshot_name_prefix.as_str(), args.groupsnapshot_name_uuid_length), ("group", 4));
        assert_eq!(args.worker_threads, 3);
        assert_eq!(args.retry.retry_interval_start, Duration::from_millis(500));
        assert!(args.validate().unwrap().volume_group_snapshot);
        let snapshotter = args.snapshotter("hostpath.csi.k8s.io", true);
        assert_eq!(
            snapshotter,
            Snapshotter {
                driver_name: "hostpath.csi.k8s.io".into(),
                snapshot_name_prefix: "snap".into(),
                snapshot_name_uuid_length: 8,
                extra_create_metadata: true,
                list_snapshots: true,
            }
        );
        let node = parse(&["--node-deployment"]).unwrap();
        assert!(node.validate().is_ok() && node.node_deployment);
        assert!(parse(&["--metrics-address=:9000"]).unwrap().common.metrics_only());
    }

    #[test]
    fn refused_command_lines() {
        // (rule, arguments, error)
        let table = [
            (
                "node deployment with leader election",
                &["--node-deployment", "--leader-election"][..],
                FlagError::NodeDeploymentWithLeaderElection,
            ),
            ("empty snapshot name prefix", &["--snapshot-name-prefix="][..], FlagError::EmptySnapshotNamePrefix),
            (
                "empty group snapshot name prefix with group snapshots on",
                &["--groupsnapshot-name-prefix=", "--feature-gates=CSIVolumeGroupSnapshot=true"][..],
                FlagError::EmptyGroupSnapshotNamePrefix,
            ),
            (
                "an unknown gate",
                &["--feature-gates=Topology=true"][..],
                FlagError::FeatureGates(ValueError::UnknownGate("Topology".into())),
            ),
        ];
        for (rule, argv, want) in table {
            assert_eq!(parse(argv).unwrap().validate(), Err(want), "{rule}");
        }
        let unused = parse(&["--groupsnapshot-name-prefix=", "--feature-gates=CSIVolumeGroupSnapshot=false"]).unwrap();
        assert!(unused.validate().is_ok(), "the group prefix matters only with group snapshots");
        // Removed in v8.2: refused while parsing, naming the flag and its replacement.
        for argv in [["--enable-volume-group-snapshots=true"], ["-enable-volume-group-snapshots"]] {
            let message = parse(&argv).expect_err(argv[0]).to_string();
            assert!(message.contains("--enable-volume-group-snapshots"), "{message}");
            assert!(message.contains("use --feature-gates=CSIVolumeGroupSnapshot=true"), "{message}");
        }
        // Both HTTP addresses: refused while parsing, naming both flags.
        let error = parse(&["--http-endpoint=:8080", "--metrics-address=:9000"]).unwrap_err().to_string();
        assert!(error.contains("--http-endpoint") && error.contains("--metrics-address"), "{error}");
    }
}
