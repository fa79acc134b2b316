//! The csi-external-health-monitor-controller command line: the flags every sidecar shares plus the health monitor's
//! own, with upstream's defaults, in Go syntax (external-health-monitor cmd/csi-external-health-monitor-controller/
//! main.go). `upstream-flags.txt` is upstream's list; the tests check every one of them is accepted with the same
//! default. Upstream has no retry flags (it retries nothing per volume: every check comes round again).

use std::time::Duration;

use sidecar_runtime::flags::{go_bool, go_duration};
use sidecar_runtime::{CommonArgs, FeatureGates};

use crate::translate::names::GATE_RELEASE_LEADER_ELECTION_ON_EXIT;

#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "csi-external-health-monitor-controller",
    about = "Reports the CSI driver's volume health on the PersistentVolumeClaims"
)]
pub struct Args {
    #[command(flatten)]
    pub common: CommonArgs,

    /// How often each PV's volume is asked for its health (drivers without LIST_VOLUME_HEALTH).
    #[arg(long, default_value = "1m", value_parser = go_duration)]
    pub monitor_interval: Duration,

    /// Upstream's informer resync; accepted: every monitored PV comes round every --monitor-interval (or listing)
    /// anyway.
    #[arg(long, default_value = "10m", value_parser = go_duration)]
    pub resync: Duration,

    /// Timeout of each CSI call.
    #[arg(long, default_value = "15s", value_parser = go_duration)]
    pub timeout: Duration,

    /// How often the driver lists the volumes' health (drivers with LIST_VOLUME_HEALTH).
    #[arg(long, default_value = "5m", value_parser = go_duration)]
    pub list_volumes_interval: Duration,

    /// How often every monitored PV is queued again (besides the watch, which queues each PV once bound).
    #[arg(long, default_value = "5m", value_parser = go_duration)]
    pub volume_list_add_interval: Duration,

    /// Upstream's node watcher interval; accepted, the node watcher is not implemented.
    #[arg(long, default_value = "5m", value_parser = go_duration)]
    pub node_list_add_interval: Duration,

    /// Concurrent per-volume checks.
    #[arg(long, default_value_t = 10)]
    pub worker_threads: usize,

    /// Upstream's node watcher (events on claims whose pods' nodes fail); accepted, not implemented: a warning.
    #[arg(long, num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = go_bool)]
    pub enable_node_watcher: bool,
}

/// The feature gates the health monitor knows, after defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Features {
    pub release_leader_election_on_exit: bool,
}

pub const KNOWN_GATES: [&str; 1] = [GATE_RELEASE_LEADER_ELECTION_ON_EXIT];

impl Args {
    /// The feature gates; an unknown gate is an error.
    pub fn features(&self) -> Result<Features, sidecar_runtime::flags::ValueError> {
        let gates: FeatureGates = self.common.feature_gates();
        gates.check_known(&KNOWN_GATES)?;
        Ok(Features { release_leader_election_on_exit: gates.enabled(GATE_RELEASE_LEADER_ELECTION_ON_EXIT, false) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(list: &[&str]) -> Args {
        let argv = std::iter::once("csi-external-health-monitor-controller").chain(list.iter().copied());
        sidecar_runtime::flags::try_parse_from(argv).expect("flags parse")
    }

    #[test]
    fn every_upstream_flag_is_accepted_with_its_default() {
        // external-health-monitor v0.18.0's -h.
        let list = include_str!("../upstream-flags.txt");
        sidecar_runtime::flags::assert_upstream_flags::<Args>("csi-external-health-monitor-controller", list, 31);
    }

    #[test]
    fn health_monitor_defaults() {
        let args = parse(&[]);
        assert_eq!(args.monitor_interval, Duration::from_secs(60));
        assert_eq!(args.resync, Duration::from_secs(600));
        assert_eq!(args.timeout, Duration::from_secs(15));
        let five_minutes = Duration::from_secs(300);
        assert_eq!((args.list_volumes_interval, args.volume_list_add_interval), (five_minutes, five_minutes));
        assert_eq!(args.node_list_add_interval, five_minutes);
        assert_eq!((args.worker_threads, args.enable_node_watcher), (10, false));
        assert_eq!(args.features().unwrap(), Features { release_leader_election_on_exit: false });
    }

    #[test]
    fn go_syntax_and_gates() {
        let args = parse(&[
            "-monitor-interval=30s",
            "--list-volumes-interval=1m30s",
            "-worker-threads=3",
            "-enable-node-watcher",
            "--feature-gates=ReleaseLeaderElectionOnExit=true",
        ]);
        assert_eq!(args.monitor_interval, Duration::from_secs(30));
        assert_eq!(args.list_volumes_interval, Duration::from_secs(90));
        assert_eq!((args.worker_threads, args.enable_node_watcher), (3, true));
        assert_eq!(args.features().unwrap(), Features { release_leader_election_on_exit: true });
        assert!(!parse(&["-enable-node-watcher=false"]).enable_node_watcher);
        assert!(parse(&["--feature-gates=NoSuchGate=true"]).features().is_err());
    }
}
