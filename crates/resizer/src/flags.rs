//! The csi-resizer command line: the common sidecar flags plus the resizer's own, with upstream defaults, in Go syntax.

use std::time::Duration;

use sidecar_runtime::flags::{go_bool, go_duration};
use sidecar_runtime::{CommonArgs, FeatureGates, RetryArgs};

use crate::translate::names::{
    GATE_ANNOTATE_FS_RESIZE, GATE_RECOVER_VOLUME_EXPANSION_FAILURE, GATE_RELEASE_LEADER_ELECTION_ON_EXIT,
    GATE_VOLUME_ATTRIBUTES_CLASS,
};

#[derive(Debug, Clone, clap::Parser)]
#[command(name = "csi-resizer", about = "Expands and modifies CSI volumes for PersistentVolumeClaims")]
pub struct Args {
    #[command(flatten)]
    pub common: CommonArgs,

    #[command(flatten)]
    pub retry: RetryArgs,

    /// Resync period of the watch caches: every claim is looked at again this often.
    #[arg(long, default_value = "10m", value_parser = go_duration)]
    pub resync_period: Duration,

    /// Concurrent workers (one queue keyed by claim serves expansion and modification).
    #[arg(long, default_value_t = 10)]
    pub workers: usize,

    /// Timeout of every CSI call (probe, capabilities, ControllerExpandVolume, ControllerModifyVolume).
    #[arg(long, default_value = "10s", value_parser = go_duration)]
    pub timeout: Duration,

    /// Add csi.storage.k8s.io/pvc/name, pvc/namespace and pv/name to ControllerModifyVolume's mutable parameters.
    #[arg(long, num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = go_bool)]
    pub extra_modify_metadata: bool,

    /// After FailedPrecondition, retry expansion only once no pod uses the claim (watches every Pod).
    #[arg(long, num_args = 0..=1, require_equals = true, default_value = "true", default_missing_value = "true", value_parser = go_bool)]
    pub handle_volume_inuse_error: bool,
}

/// The feature gates the resizer knows, after defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Features {
    pub recover_volume_expansion_failure: bool,
    pub annotate_fs_resize: bool,
    /// `None` when not set explicitly: decided by API discovery at startup (modification runs if storage.k8s.io/v1
    /// serves VolumeAttributesClass).
    pub volume_attributes_class: Option<bool>,
    pub release_leader_election_on_exit: bool,
}

pub const KNOWN_GATES: [&str; 4] = [
    GATE_RECOVER_VOLUME_EXPANSION_FAILURE,
    GATE_ANNOTATE_FS_RESIZE,
    GATE_VOLUME_ATTRIBUTES_CLASS,
    GATE_RELEASE_LEADER_ELECTION_ON_EXIT,
];

impl Args {
    /// The feature gates; an unknown gate is an error, as upstream.
    pub fn features(&self) -> Result<Features, sidecar_runtime::flags::ValueError> {
        let gates: FeatureGates = self.common.feature_gates();
        gates.check_known(&KNOWN_GATES)?;
        Ok(Features {
            recover_volume_expansion_failure: gates.enabled(GATE_RECOVER_VOLUME_EXPANSION_FAILURE, true),
            annotate_fs_resize: gates.enabled(GATE_ANNOTATE_FS_RESIZE, true),
            volume_attributes_class: gates.explicit(GATE_VOLUME_ATTRIBUTES_CLASS),
            release_leader_election_on_exit: gates.enabled(GATE_RELEASE_LEADER_ELECTION_ON_EXIT, false),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(list: &[&str]) -> Args {
        let argv = std::iter::once("csi-resizer").chain(list.iter().copied());
        sidecar_runtime::flags::try_parse_from(argv).expect("flags parse")
    }

    #[test]
    fn upstream_defaults() {
        let args = parse(&[]);
        assert_eq!(args.workers, 10);
        assert_eq!(args.timeout, Duration::from_secs(10));
        assert_eq!(args.resync_period, Duration::from_secs(600));
        assert!(args.handle_volume_inuse_error && !args.extra_modify_metadata);
        assert_eq!(args.retry.retry_interval_start, Duration::from_secs(1));
        assert_eq!(args.retry.retry_interval_max, Duration::from_secs(300));
        assert_eq!(args.common.csi_address, "/run/csi/socket");
        let features = args.features().unwrap();
        assert_eq!(
            features,
            Features {
                recover_volume_expansion_failure: true,
                annotate_fs_resize: true,
                volume_attributes_class: None,
                release_leader_election_on_exit: false,
            }
        );
    }

    #[test]
    fn go_syntax_and_gates() {
        let args = parse(&[
            "-workers=3",
            "--timeout=30s",
            "--handle-volume-inuse-error=false",
            "--extra-modify-metadata",
            "--feature-gates=VolumeAttributesClass=false,RecoverVolumeExpansionFailure=false",
        ]);
        assert_eq!(args.workers, 3);
        assert_eq!(args.timeout, Duration::from_secs(30));
        assert!(!args.handle_volume_inuse_error && args.extra_modify_metadata);
        let features = args.features().unwrap();
        assert_eq!(features.volume_attributes_class, Some(false));
        assert!(!features.recover_volume_expansion_failure);
        assert!(parse(&["--feature-gates=NoSuchGate=true"]).features().is_err());
        // Every upstream flag is accepted, including the Go-only ones.
        parse(&[
            "--master=https://127.0.0.1:6443",
            "--resync-period=1m",
            "--retry-interval-start=2s",
            "--retry-interval-max=1m",
            "--leader-election",
            "--leader-election-namespace=kube-system",
            "--leader-election-lease-duration=20s",
            "--leader-election-renew-deadline=15s",
            "--leader-election-retry-period=3s",
            "--leader-election-labels=a:b",
            "--kube-api-qps=20",
            "--kube-api-burst=40",
            "--http-endpoint=:8080",
            "--metrics-path=/m",
            "--automaxprocs",
            "--logging-format=json",
            "--log-flush-frequency=5s",
            "--log-text-split-stream",
            "--log-text-info-buffer-size=0",
            "--log-json-split-stream=false",
            "--log-json-info-buffer-size=0",
            "--vmodule=x=5",
            "-v=5",
        ]);
    }
}
