//! The snapshot-controller command line (external-snapshotter cmd/snapshot-controller/main.go).

use std::time::Duration;

use sidecar_runtime::flags::{go_bool, go_duration};
use sidecar_runtime::{CommonArgs, RetryArgs};

use super::{Features, FlagError, RemovedArgs};

#[derive(Debug, Clone, clap::Parser)]
#[command(name = "snapshot-controller", about = "Binds VolumeSnapshots to VolumeSnapshotContents, one per cluster")]
pub struct Args {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(flatten)]
    pub retry: RetryArgs,

    /// Resync period of the watch caches: every object is looked at again this often.
    #[arg(long, default_value = "15m", value_parser = go_duration)]
    pub resync_period: Duration,
    /// Workers per queue (snapshots, contents, and with group snapshots two more).
    #[arg(long, default_value_t = 10)]
    pub worker_threads: usize,
    /// Label each dynamic content with the node of its volume, for csi-snapshotters run with --node-deployment.
    #[arg(long, num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = go_bool)]
    pub enable_distributed_snapshotting: bool,
    /// Record the volume mode of the source in each content, so restores cannot change it.
    #[arg(long, num_args = 0..=1, require_equals = true, default_value = "true", default_missing_value = "true", value_parser = go_bool)]
    pub prevent_volume_mode_conversion: bool,
    /// How long to wait at start for the snapshot CRDs before exiting.
    #[arg(long, default_value = "30s", value_parser = go_duration)]
    pub retry_crd_interval_max: Duration,

    #[command(flatten)]
    pub removed: RemovedArgs,
}

impl Args {
    /// The feature gates, once the command line is known to be one upstream accepts.
    pub fn validate(&self) -> Result<Features, FlagError> {
        Ok(Features::from_gates(&self.common.feature_gates())?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(argv: &[&str]) -> Result<Args, clap::Error> {
        crate::flags::parse_as("snapshot-controller", argv)
    }

    #[test]
    fn upstream_defaults() {
        let args = parse(&[]).unwrap();
        assert_eq!(args.resync_period, Duration::from_secs(15 * 60));
        assert_eq!(args.worker_threads, 10);
        assert!(!args.enable_distributed_snapshotting && args.prevent_volume_mode_conversion);
        assert_eq!(args.retry_crd_interval_max, Duration::from_secs(30));
        assert_eq!(args.retry.retry_interval_start, Duration::from_secs(1));
        assert_eq!(args.retry.retry_interval_max, Duration::from_secs(300));
        assert!(!args.common.leader_election);
        assert_eq!(args.common.leader_election_lease_duration, Duration::from_secs(15));
        assert_eq!(args.common.leader_election_renew_deadline, Duration::from_secs(10));
        assert_eq!(args.common.leader_election_retry_period, Duration::from_secs(5));
        assert_eq!((args.common.kube_api_qps, args.common.kube_api_burst), (5.0, 10));
        assert_eq!(args.common.http_address(), None);
        assert_eq!(args.common.metrics_path, "/metrics");
        let features = args.validate().unwrap();
        assert!(features.volume_group_snapshot, "group snapshots are on by default since v8.7.0");
        assert!(!features.release_leader_election_on_exit);
    }

    #[test]
    fn every_upstream_flag_in_go_syntax() {
        let args = parse(&[
            "-kubeconfig=/etc/kubeconfig",
            "--resync-period=1m",
            "-worker-threads=20",
            "--leader-election",
            "--leader-election-namespace=kube-system",
            "--leader-election-lease-duration=20s",
            "--leader-election-renew-deadline=15s",
            "--leader-election-retry-period=3s",
            "--kube-api-qps=50",
            "--kube-api-burst=100",
            "--http-endpoint=:8080",
            "--metrics-path=/m",
            "--retry-interval-start=2s",
            "--retry-interval-max=1m",
            "--enable-distributed-snapshotting",
            "--prevent-volume-mode-conversion=false",
            "--retry-crd-interval-max=1m30s",
            "--feature-gates=CSIVolumeGroupSnapshot=true,ReleaseLeaderElectionOnExit=true",
            "--automaxprocs",
            "-v=5",
            "--vmodule=x=5",
            "--logging-format=json",
            "--log-flush-frequency=5s",
            "--log-text-split-stream",
            "--log-text-info-buffer-size=0",
            "--log-json-split-stream=false",
            "--log-json-info-buffer-size=0",
            "--version=false",
        ])
        .unwrap();
        assert_eq!(args.resync_period, Duration::from_secs(60));
        assert_eq!(args.worker_threads, 20);
        assert!(args.enable_distributed_snapshotting && !args.prevent_volume_mode_conversion);
        assert_eq!(args.retry_crd_interval_max, Duration::from_secs(90));
        assert_eq!(args.common.http_address(), Some(":8080"));
        assert_eq!(args.common.leader_election_namespace.as_deref(), Some("kube-system"));
        let features = args.validate().unwrap();
        assert!(features.volume_group_snapshot && features.release_leader_election_on_exit);
    }

    #[test]
    fn refused_command_lines() {
        // Removed in v8.2: refused while parsing, naming the flag and its replacement.
        for argv in [["--enable-volume-group-snapshots"], ["-enable-volume-group-snapshots=false"]] {
            let error = parse(&argv).expect_err(argv[0]).to_string();
            assert!(error.contains("--enable-volume-group-snapshots"), "{error}");
            assert!(error.contains("use --feature-gates=CSIVolumeGroupSnapshot=true"), "{error}");
        }
        // An unknown gate parses, and validation refuses it.
        assert!(parse(&["--feature-gates=Topology=true"]).unwrap().validate().is_err());
        // Flags the controller never had, in any version, stay unknown.
        for argv in [["--timeout=1m"], ["--snapshot-name-prefix=x"]] {
            assert!(parse(&argv).is_err(), "{argv:?}");
        }
    }
}
