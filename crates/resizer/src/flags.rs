//! The csi-resizer command line: the common sidecar flags plus the resizer's own, with upstream defaults, in Go syntax.

use std::time::Duration;

use clap::parser::ValueSource;
use clap::{Arg, ArgMatches};
use sidecar_runtime::flags::{go_bool, go_duration};
use sidecar_runtime::{CommonArgs, FeatureGates, RetryArgs};

use crate::translate::names::{
    GATE_ANNOTATE_FS_RESIZE, GATE_RELEASE_LEADER_ELECTION_ON_EXIT, GATE_VOLUME_ATTRIBUTES_CLASS,
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

    #[command(flatten)]
    pub timeouts: CallTimeouts,

    /// Add csi.storage.k8s.io/pvc/name, pvc/namespace and pv/name to ControllerModifyVolume's mutable parameters.
    #[arg(long, num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = go_bool)]
    pub extra_modify_metadata: bool,

    /// After FailedPrecondition, retry expansion only once no pod uses the claim (watches every Pod).
    #[arg(long, num_args = 0..=1, require_equals = true, default_value = "true", default_missing_value = "true", value_parser = go_bool)]
    pub handle_volume_inuse_error: bool,
}

/// `--timeout`, `--resize-timeout` and `--modify-timeout` (external-resizer cmd/csi-resizer/main.go,
/// resolveOperationTimeouts): `--timeout` bounds the wait for the driver and the calls made at startup, and, when given
/// on the command line (at any value, its default too), ControllerExpandVolume and ControllerModifyVolume as well;
/// otherwise those two calls take `--resize-timeout` and `--modify-timeout`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallTimeouts {
    pub timeout: Duration,
    /// `--timeout` was given on the command line.
    pub timeout_given: bool,
    pub resize_timeout: Duration,
    pub modify_timeout: Duration,
}

const TIMEOUT: &str = "timeout";
const RESIZE_TIMEOUT: &str = "resize-timeout";
const MODIFY_TIMEOUT: &str = "modify-timeout";

impl CallTimeouts {
    /// The limit of one ControllerExpandVolume call.
    pub fn expand(&self) -> Duration {
        if self.timeout_given { self.timeout } else { self.resize_timeout }
    }

    /// The limit of one ControllerModifyVolume call.
    pub fn modify(&self) -> Duration {
        if self.timeout_given { self.timeout } else { self.modify_timeout }
    }

    /// The longest any call may take: how long in-flight work may drain at shutdown.
    pub fn longest(&self) -> Duration {
        self.timeout.max(self.expand()).max(self.modify())
    }
}

// Written by hand rather than derived: whether `--timeout` was given is only known from clap's value source.
impl clap::Args for CallTimeouts {
    fn augment_args(command: clap::Command) -> clap::Command {
        let duration = |name: &'static str, value_name: &'static str, help: &'static str| {
            Arg::new(name).long(name).value_name(value_name).default_value("10s").value_parser(go_duration).help(help)
        };
        command
            .arg(duration(
                TIMEOUT,
                "TIMEOUT",
                "Timeout of the wait for the CSI driver and of the calls made at startup; when given, also of every \
                 ControllerExpandVolume and ControllerModifyVolume call, whatever --resize-timeout and --modify-timeout say",
            ))
            .arg(duration(RESIZE_TIMEOUT, "RESIZE_TIMEOUT", "Timeout of each ControllerExpandVolume call, unless --timeout is given"))
            .arg(duration(MODIFY_TIMEOUT, "MODIFY_TIMEOUT", "Timeout of each ControllerModifyVolume call, unless --timeout is given"))
    }

    fn augment_args_for_update(command: clap::Command) -> clap::Command {
        Self::augment_args(command)
    }
}

impl clap::FromArgMatches for CallTimeouts {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let duration = |name: &str| matches.get_one::<Duration>(name).copied().unwrap_or(Duration::from_secs(10));
        Ok(CallTimeouts {
            timeout: duration(TIMEOUT),
            timeout_given: matches.value_source(TIMEOUT) == Some(ValueSource::CommandLine),
            resize_timeout: duration(RESIZE_TIMEOUT),
            modify_timeout: duration(MODIFY_TIMEOUT),
        })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

/// The feature gates the resizer knows, after defaults. RecoverVolumeExpansionFailure is not among them: external-resizer
/// v2.3.0 removed it (recovery is always on) and refuses it as an unrecognized gate, as this parser does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Features {
    pub annotate_fs_resize: bool,
    /// `None` when not set explicitly: decided by API discovery at startup (modification runs if storage.k8s.io/v1
    /// serves VolumeAttributesClass).
    pub volume_attributes_class: Option<bool>,
    pub release_leader_election_on_exit: bool,
}

pub const KNOWN_GATES: [&str; 3] =
    [GATE_ANNOTATE_FS_RESIZE, GATE_VOLUME_ATTRIBUTES_CLASS, GATE_RELEASE_LEADER_ELECTION_ON_EXIT];

/// The GA gates among them: setting one is warned about, as upstream's component-base does.
pub const GA_GATES: [&str; 1] = [GATE_VOLUME_ATTRIBUTES_CLASS];

impl Args {
    /// The feature gates; an unknown gate is an error, as upstream.
    pub fn features(&self) -> Result<Features, sidecar_runtime::flags::ValueError> {
        let gates: FeatureGates = self.common.feature_gates();
        gates.check_known(&KNOWN_GATES)?;
        Ok(Features {
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
        let ten = Duration::from_secs(10);
        assert_eq!(
            args.timeouts,
            CallTimeouts { timeout: ten, timeout_given: false, resize_timeout: ten, modify_timeout: ten }
        );
        assert_eq!(args.resync_period, Duration::from_secs(600));
        assert!(args.handle_volume_inuse_error && !args.extra_modify_metadata);
        assert_eq!(args.retry.retry_interval_start, Duration::from_secs(1));
        assert_eq!(args.retry.retry_interval_max, Duration::from_secs(300));
        assert_eq!(args.common.csi_address, "/run/csi/socket");
        let features = args.features().unwrap();
        assert_eq!(
            features,
            Features {
                annotate_fs_resize: true,
                volume_attributes_class: None,
                release_leader_election_on_exit: false
            }
        );
    }

    /// external-resizer cmd/csi-resizer/main.go, resolveOperationTimeouts.
    #[test]
    fn per_call_timeouts() {
        let s = Duration::from_secs;
        type Row<'a> = (&'a str, &'a [&'a str], (Duration, Duration, Duration));
        // (rule, flags, (expand, modify, longest))
        let table: [Row; 7] = [
            ("defaults: 10s each", &[], (s(10), s(10), s(10))),
            ("--resize-timeout alone", &["--resize-timeout=2m"], (s(120), s(10), s(120))),
            ("--modify-timeout alone, Go form", &["-modify-timeout", "30s"], (s(10), s(30), s(30))),
            (
                "--timeout given wins over both",
                &["--resize-timeout=2m", "--modify-timeout=3m", "--timeout=20s"],
                (s(20), s(20), s(20)),
            ),
            (
                "--timeout given at its default value still wins",
                &["--timeout=10s", "--resize-timeout=2m"],
                (s(10), s(10), s(10)),
            ),
            (
                "--timeout given before them wins too",
                &["--timeout=5s", "--resize-timeout=1m", "--modify-timeout=1m"],
                (s(5), s(5), s(5)),
            ),
            ("--timeout given and nothing else", &["--timeout=1m"], (s(60), s(60), s(60))),
        ];
        for (rule, flags, (expand, modify, longest)) in table {
            let timeouts = parse(flags).timeouts;
            assert_eq!((timeouts.expand(), timeouts.modify(), timeouts.longest()), (expand, modify, longest), "{rule}");
        }
        assert!(!parse(&["--resize-timeout=1m"]).timeouts.timeout_given, "--timeout not given");
        assert_eq!(parse(&["--timeout=3s"]).timeouts.timeout, s(3), "--timeout still bounds the startup calls");
    }

    #[test]
    fn go_syntax_and_gates() {
        let args = parse(&[
            "-workers=3",
            "--timeout=30s",
            "--handle-volume-inuse-error=false",
            "--extra-modify-metadata",
            "--feature-gates=VolumeAttributesClass=false,AnnotateFsResize=false",
        ]);
        assert_eq!(args.workers, 3);
        assert_eq!(args.timeouts.timeout, Duration::from_secs(30));
        assert!(!args.handle_volume_inuse_error && args.extra_modify_metadata);
        let features = args.features().unwrap();
        assert_eq!(features.volume_attributes_class, Some(false));
        assert!(!features.annotate_fs_resize);
        assert!(parse(&["--feature-gates=NoSuchGate=true"]).features().is_err());
        // external-resizer v2.3.0 removed RecoverVolumeExpansionFailure and refuses it at either value.
        for value in ["true", "false"] {
            let gate = format!("--feature-gates=RecoverVolumeExpansionFailure={value}");
            assert_eq!(
                parse(&[&gate]).features().unwrap_err().to_string(),
                "unrecognized feature gate: RecoverVolumeExpansionFailure"
            );
        }
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
            "--resize-timeout=1m",
            "--modify-timeout=1m",
        ]);
    }
}
