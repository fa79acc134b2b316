//! The csi-attacher command line: the flags every sidecar shares plus external-attacher's own, with upstream's
//! defaults, in Go syntax (external-attacher cmd/csi-attacher/main.go). `upstream-flags.txt` is upstream's list, from
//! its binary's `-h`; the tests check every one of them is accepted with the same default.

use std::time::Duration;

use sidecar_runtime::flags::go_duration;
use sidecar_runtime::{CommonArgs, FeatureGates, RetryArgs};

use crate::translate::names::{GATE_MUTABLE_CSI_NODE_ALLOCATABLE_COUNT, GATE_RELEASE_LEADER_ELECTION_ON_EXIT};

#[derive(Debug, Clone, clap::Parser)]
#[command(name = "csi-attacher", about = "Attaches and detaches CSI volumes for VolumeAttachments")]
pub struct Args {
    #[command(flatten)]
    pub common: CommonArgs,

    #[command(flatten)]
    pub retry: RetryArgs,

    /// Resync period of the watch caches: every VolumeAttachment (and every PV whose finalizer may go) is looked at
    /// again this often.
    #[arg(long, default_value = "10m", value_parser = go_duration)]
    pub resync: Duration,

    /// Timeout of ControllerPublishVolume, ControllerUnpublishVolume and ListVolumes (and of the start-up calls).
    #[arg(long, default_value = "15s", value_parser = go_duration)]
    pub timeout: Duration,

    /// Concurrent workers of each queue: attach, detach, and PVs.
    #[arg(long, default_value_t = 10)]
    pub worker_threads: usize,

    /// Entries per ListVolumes page in the reconciliation; 0: as many as the driver gives.
    #[arg(long, default_value_t = 0)]
    pub max_entries: i32,

    /// Filesystem of a mounted volume whose PV names none.
    #[arg(long, default_value = "")]
    pub default_fstype: String,

    /// How often VolumeAttachments are checked against ListVolumes' published nodes (drivers with
    /// LIST_VOLUMES_PUBLISHED_NODES).
    #[arg(long, default_value = "1m", value_parser = go_duration)]
    pub reconcile_sync: Duration,

    /// Characters of a CSI response logged at most (-v=5); 0 or less: no limit.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub max_grpc_log_length: i64,
}

/// The feature gates the attacher knows, after defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Features {
    /// `status.attachError.errorCode` written (GA, on).
    pub attach_error_code: bool,
    pub release_leader_election_on_exit: bool,
}

pub const KNOWN_GATES: [&str; 2] = [GATE_MUTABLE_CSI_NODE_ALLOCATABLE_COUNT, GATE_RELEASE_LEADER_ELECTION_ON_EXIT];

impl Args {
    /// The feature gates; an unknown gate is an error, as upstream.
    pub fn features(&self) -> Result<Features, sidecar_runtime::flags::ValueError> {
        let gates: FeatureGates = self.common.feature_gates();
        gates.check_known(&KNOWN_GATES)?;
        Ok(Features {
            attach_error_code: gates.enabled(GATE_MUTABLE_CSI_NODE_ALLOCATABLE_COUNT, true),
            release_leader_election_on_exit: gates.enabled(GATE_RELEASE_LEADER_ELECTION_ON_EXIT, false),
        })
    }

    /// `--max-grpc-log-length` as the CSI client's cap (0: none).
    pub fn log_length_cap(&self) -> usize {
        usize::try_from(self.max_grpc_log_length.max(0)).unwrap_or(usize::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(list: &[&str]) -> Args {
        let argv = std::iter::once("csi-attacher").chain(list.iter().copied());
        sidecar_runtime::flags::try_parse_from(argv).expect("flags parse")
    }

    #[test]
    fn every_upstream_flag_is_accepted_with_its_default() {
        // external-attacher v4.13.0's -h.
        let list = include_str!("../upstream-flags.txt");
        sidecar_runtime::flags::assert_upstream_flags::<Args>("csi-attacher", list, 33);
    }

    #[test]
    fn attacher_defaults() {
        let args = parse(&[]);
        assert_eq!(args.resync, Duration::from_secs(600));
        assert_eq!(args.reconcile_sync, Duration::from_secs(60));
        assert_eq!(args.timeout, Duration::from_secs(15));
        assert_eq!((args.worker_threads, args.max_entries, args.max_grpc_log_length), (10, 0, -1));
        assert_eq!(args.default_fstype, "");
        assert_eq!(args.log_length_cap(), 0, "-1: no limit");
        assert_eq!(parse(&["-max-grpc-log-length=100"]).log_length_cap(), 100);
        assert_eq!(
            args.features().unwrap(),
            Features { attach_error_code: true, release_leader_election_on_exit: false }
        );
    }

    #[test]
    fn go_syntax_and_gates() {
        let args = parse(&[
            "-worker-threads=3",
            "--timeout=1m30s",
            "-reconcile-sync=30s",
            "-default-fstype=ext4",
            "-max-entries=50",
            "--feature-gates=MutableCSINodeAllocatableCount=false,ReleaseLeaderElectionOnExit=true",
        ]);
        assert_eq!(args.worker_threads, 3);
        assert_eq!(args.timeout, Duration::from_secs(90));
        assert_eq!(args.reconcile_sync, Duration::from_secs(30));
        assert_eq!((args.default_fstype.as_str(), args.max_entries), ("ext4", 50));
        assert_eq!(
            args.features().unwrap(),
            Features { attach_error_code: false, release_leader_election_on_exit: true }
        );
        assert!(parse(&["--feature-gates=NoSuchGate=true"]).features().is_err());
    }
}
