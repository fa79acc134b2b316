//! The command-line flags every sidecar shares, with upstream names, defaults
//! and Go syntax (csi-lib-utils `standardflags` plus the component-base logging
//! flags).
//!
//! A sidecar flattens [`CommonArgs`] (and [`RetryArgs`] where it retries per
//! object) into its own `clap::Parser` and parses with [`parse`], which accepts
//! the Go forms driver manifests use. `--timeout` is left to each sidecar: its
//! default differs (10 s for the provisioner and resizer, 1 m for the
//! snapshotter, none for the snapshot-controller). Declare it with
//! `value_parser = sidecar_runtime::flags::go_duration`.
//!
//! Boolean flags take Go's forms `--flag`, `--flag=true`, `--flag=false` (never a
//! separate `true` argument). A sidecar declares its own booleans the same way as
//! `leader_election` below:
//! `#[arg(long, num_args = 0..=1, require_equals = true, default_value = "false",
//! default_missing_value = "true", value_parser = go_bool)]`.

mod argv;
mod duration;
mod node_deployment;
mod removed;
mod values;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

pub use argv::normalize_go_args;
pub use duration::{DurationError, parse_go_duration};
pub use node_deployment::{MissingNodeName, NODE_NAME_ENV, node_name};
pub use removed::{Removed, removed};
pub use values::{FeatureGates, KUBERNETES_GATES, ValueError, parse_go_bool, parse_labels};

/// clap value parser for Go durations (`15s`, `1m30s`, `500ms`).
pub fn go_duration(input: &str) -> Result<Duration, DurationError> {
    parse_go_duration(input)
}

/// clap value parser for Go booleans (`true`, `false`, `1`, `0`, `t`, `f`, ...).
pub fn go_bool(input: &str) -> Result<bool, ValueError> {
    parse_go_bool(input)
}

/// A path where an empty value stands for "unset", as a Go string flag takes `--kubeconfig=` (Helm templates often
/// render it so); clap's own path parser refuses an empty value.
fn path_or_empty(input: &str) -> Result<PathBuf, std::convert::Infallible> {
    Ok(PathBuf::from(input))
}

fn feature_gates(input: &str) -> Result<FeatureGates, ValueError> {
    FeatureGates::parse(input)
}

fn labels(input: &str) -> Result<Labels, ValueError> {
    parse_labels(input).map(Labels)
}

/// One `--leader-election-labels` occurrence.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Labels(pub BTreeMap<String, String>);

/// `--logging-format`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LoggingFormat {
    #[default]
    Text,
    Json,
}

/// csi-lib-utils `standardflags` plus `--master`, `--feature-gates` and the
/// logging flags: everything the upstream sidecars accept in common.
#[derive(Debug, Clone, clap::Args)]
pub struct CommonArgs {
    /// Print the version and exit.
    #[arg(long, num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = go_bool)]
    pub version: bool,

    /// Address of the CSI driver socket: a path (unix socket) or a gRPC target.
    #[arg(long, default_value = "/run/csi/socket")]
    pub csi_address: String,

    /// Absolute path to the kubeconfig file. Without it, $KUBECONFIG, then the in-cluster config.
    #[arg(long, value_parser = path_or_empty)]
    pub kubeconfig: Option<PathBuf>,

    /// Address of the Kubernetes API server, overriding the one in the kubeconfig.
    #[arg(long)]
    pub master: Option<String>,

    /// Enable leader election on a coordination.k8s.io Lease.
    #[arg(long, num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = go_bool)]
    pub leader_election: bool,

    /// Namespace of the leader-election Lease. Defaults to the pod's namespace.
    #[arg(long)]
    pub leader_election_namespace: Option<String>,

    /// How long non-leaders wait after the last observed renewal before taking over.
    #[arg(long, default_value = "15s", value_parser = go_duration)]
    pub leader_election_lease_duration: Duration,

    /// How long the leader keeps retrying to renew before it gives up leadership.
    #[arg(long, default_value = "10s", value_parser = go_duration)]
    pub leader_election_renew_deadline: Duration,

    /// How often electors try to acquire or renew the Lease.
    #[arg(long, default_value = "5s", value_parser = go_duration)]
    pub leader_election_retry_period: Duration,

    /// Labels for the Lease, written key:value,key2:value2.
    #[arg(long, value_parser = labels)]
    pub leader_election_labels: Vec<Labels>,

    /// Client-side rate limit of Kubernetes API requests per second (0: 5, negative: unlimited).
    #[arg(long, default_value_t = 5.0, allow_negative_numbers = true)]
    pub kube_api_qps: f32,

    /// Burst of the Kubernetes API rate limit.
    #[arg(long, default_value_t = 10)]
    pub kube_api_burst: u32,

    /// Address (host:port) of the HTTP server for metrics and health checks. Empty: disabled.
    #[arg(long, conflicts_with = "metrics_address")]
    pub http_endpoint: Option<String>,

    /// Deprecated: address of the metrics-only HTTP server. Use --http-endpoint.
    #[arg(long)]
    pub metrics_address: Option<String>,

    /// HTTP path of the Prometheus metrics.
    #[arg(long, default_value = "/metrics")]
    pub metrics_path: String,

    /// Feature gates, written Name=true,Other=false.
    #[arg(long, value_parser = feature_gates)]
    pub feature_gates: Vec<FeatureGates>,

    /// `-v`, `--logging-format` and the rest every kubernetes-csi binary accepts.
    #[command(flatten)]
    pub standard: StandardArgs,
}

/// The flags every kubernetes-csi binary accepts, sidecars and node-side tools (node-driver-registrar,
/// livenessprobe) alike: component-base's logging flags (`logsapi.AddGoFlags`) and csi-lib-utils' `--automaxprocs`.
#[derive(Debug, Clone, clap::Args)]
pub struct StandardArgs {
    /// Log verbosity, as klog's -v: 0-3 info, 4-5 debug (5 logs every CSI call), 6+ trace.
    #[arg(short = 'v', long = "v", default_value_t = 0, value_name = "LEVEL")]
    pub verbosity: u32,

    /// Log format.
    #[arg(long, value_enum, default_value_t = LoggingFormat::Text)]
    pub logging_format: LoggingFormat,

    /// Accepted for compatibility; has no effect (per-module verbosity is not supported).
    #[arg(long, hide = true)]
    pub vmodule: Option<String>,

    /// Accepted for compatibility; has no effect (a Go runtime setting).
    #[arg(long, hide = true, num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = go_bool)]
    pub automaxprocs: bool,

    /// Accepted for compatibility, with component-base's default; has no effect (logs are written unbuffered).
    #[arg(long, hide = true, default_value = "5s", value_parser = go_duration)]
    pub log_flush_frequency: Duration,

    /// Accepted for compatibility (component-base's alpha logging flags); no effect.
    #[arg(long, hide = true, num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = go_bool)]
    pub log_text_split_stream: bool,
    /// Accepted for compatibility; no effect.
    #[arg(long, hide = true, num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = go_bool)]
    pub log_json_split_stream: bool,
    /// Accepted for compatibility; no effect.
    #[arg(long, hide = true)]
    pub log_text_info_buffer_size: Option<String>,
    /// Accepted for compatibility; no effect.
    #[arg(long, hide = true)]
    pub log_json_info_buffer_size: Option<String>,
}

/// The long names of [`StandardArgs`]' flags, as upstream binaries list them among their own.
pub const STANDARD_FLAGS: [&str; 9] = [
    "automaxprocs",
    "log-flush-frequency",
    "log-json-info-buffer-size",
    "log-json-split-stream",
    "log-text-info-buffer-size",
    "log-text-split-stream",
    "logging-format",
    "v",
    "vmodule",
];

/// The long names of `P`'s flags, sorted: what a test compares with an upstream binary's flag list.
pub fn long_flag_names<P: clap::CommandFactory>() -> Vec<String> {
    let mut names: Vec<String> = P::command().get_arguments().filter_map(|a| a.get_long().map(String::from)).collect();
    names.sort();
    names
}

/// `--retry-interval-start` / `--retry-interval-max`: the per-object backoff of
/// every upstream sidecar's work queues (1 s doubling up to 5 m).
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct RetryArgs {
    /// Initial retry interval of a failed operation; it doubles with each failure.
    #[arg(long, default_value = "1s", value_parser = go_duration)]
    pub retry_interval_start: Duration,

    /// Maximum retry interval of a failed operation.
    #[arg(long, default_value = "5m", value_parser = go_duration)]
    pub retry_interval_max: Duration,
}

impl CommonArgs {
    /// `--http-endpoint`, or the deprecated `--metrics-address`; empty means off.
    pub fn http_address(&self) -> Option<&str> {
        self.http_endpoint.as_deref().or(self.metrics_address.as_deref()).filter(|a| !a.is_empty())
    }

    /// True when only the deprecated `--metrics-address` is set: upstream then
    /// serves metrics but no health checks.
    pub fn metrics_only(&self) -> bool {
        self.http_endpoint.as_deref().is_none_or(str::is_empty)
            && self.metrics_address.as_deref().is_some_and(|a| !a.is_empty())
    }

    /// All `--feature-gates` occurrences, later ones winning.
    pub fn feature_gates(&self) -> FeatureGates {
        FeatureGates::merged(&self.feature_gates)
    }

    /// All `--leader-election-labels` occurrences, later ones winning.
    pub fn leader_election_labels(&self) -> BTreeMap<String, String> {
        self.leader_election_labels.iter().flat_map(|labels| labels.0.clone()).collect()
    }

    /// `--kubeconfig`, where an empty value means unset (as in Go).
    pub fn kubeconfig(&self) -> Option<&std::path::Path> {
        self.kubeconfig.as_deref().filter(|p| !p.as_os_str().is_empty())
    }

    /// `--master`, where an empty value means unset.
    pub fn master(&self) -> Option<&str> {
        self.master.as_deref().filter(|m| !m.is_empty())
    }

    /// Handles `--version` as upstream does: prints `<program> <version>` and exits 0.
    pub fn exit_if_version_requested(&self, version: &str) {
        exit_if_version_requested(self.version, version);
    }
}

/// `--version` as every kubernetes-csi binary answers it: `<program> <version>` on stdout, exit 0.
pub fn exit_if_version_requested(requested: bool, version: &str) {
    if requested {
        let program = std::env::args().next().unwrap_or_default();
        println!("{program} {version}");
        std::process::exit(0);
    }
}

/// Parses the process arguments into `P`, accepting Go forms. On an error
/// (unknown flag, bad value, conflicting flags) prints clap's message, which
/// names the flag, and exits 2; `--help` prints the usage and exits 0.
pub fn parse<P: clap::Parser>() -> P {
    try_parse_from(std::env::args_os()).unwrap_or_else(|err| err.exit())
}

/// [`parse`] over an explicit argument list (the first item is the program name).
pub fn try_parse_from<P, I, T>(argv: I) -> Result<P, clap::Error>
where
    P: clap::Parser,
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    // Go's flag packages let a repeated flag override the earlier value.
    let mut command = P::command().args_override_self(true);
    let argv = normalize_go_args(&command, argv);
    let matches = command.try_get_matches_from_mut(argv)?;
    P::from_arg_matches(&matches).map_err(|err| err.format(&mut command))
}

/// Checks a sidecar's flags against upstream's `-h` list (`list`: a flag name a line, then the default upstream
/// prints, if any; `#` comments): every upstream flag is accepted, and giving upstream's default explicitly
/// changes nothing, so it is ours too (Go spelling included). For the sidecars' unit tests; panics naming the
/// first flag that fails.
pub fn assert_upstream_flags<P>(binary: &str, list: &str, count: usize)
where
    P: clap::Parser + std::fmt::Debug,
{
    let upstream: Vec<(&str, Option<&str>)> = list
        .lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .map(|line| match line.split_once(' ') {
            Some((name, default)) => (name, Some(default)),
            None => (line, None),
        })
        .collect();
    assert_eq!(upstream.len(), count, "{binary}: upstream's flag count");
    let parse = |flags: &[&str]| {
        let argv = std::iter::once(binary).chain(flags.iter().copied());
        format!("{:?}", try_parse_from::<P, _, _>(argv).expect("flags parse"))
    };
    let command = P::command();
    let ours: Vec<&str> = command.get_arguments().filter_map(|a| a.get_long()).collect();
    let defaults = parse(&[]);
    for (name, default) in upstream {
        assert!(ours.contains(&name), "{binary}: upstream's -{name} is not accepted");
        if let Some(default) = default {
            assert_eq!(
                parse(&[&format!("-{name}={default}")]),
                defaults,
                "{binary}: -{name}={default} is not our default"
            );
        }
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
#[path = "duration_prop.rs"]
mod prop_tests;
