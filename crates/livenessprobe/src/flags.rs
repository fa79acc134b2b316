//! The livenessprobe command line: upstream livenessprobe v2's flags with their defaults
//! (kubernetes-csi/livenessprobe, cmd/livenessprobe/main.go), in Go syntax, plus the standard logging flags every
//! kubernetes-csi binary has, and `--version`, which upstream lacks and every binary of this project answers.

use std::time::Duration;

use sidecar_runtime::StandardArgs;
use sidecar_runtime::flags::{go_bool, go_duration};

/// `--health-port`'s default.
pub const DEFAULT_HEALTH_PORT: &str = "9808";

#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "livenessprobe",
    about = "Serves /healthz for kubelet liveness probes by calling the CSI driver's Probe"
)]
pub struct Args {
    /// Print the version and exit.
    #[arg(long, num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = go_bool)]
    pub version: bool,

    /// Address of the CSI driver socket.
    #[arg(long, default_value = "/run/csi/socket")]
    pub csi_address: String,

    /// How long /healthz waits for the driver's Probe.
    #[arg(long, default_value = "3s", value_parser = go_duration)]
    pub probe_timeout: Duration,

    /// Deprecated: TCP port of /healthz on every IPv4 interface. Cannot be set (to another value than the default)
    /// with --http-endpoint.
    #[arg(long, default_value = DEFAULT_HEALTH_PORT)]
    pub health_port: String,

    /// Address (host:port) of the HTTP server of /healthz and the metrics, instead of --health-port. Empty: /healthz
    /// on --health-port. Cannot be set with --metrics-address.
    #[arg(long, default_value = "")]
    pub http_endpoint: String,

    /// Deprecated: address (host:port) of a separate metrics-only HTTP server. Empty: metrics are served only with
    /// --http-endpoint.
    #[arg(long, default_value = "")]
    pub metrics_address: String,

    /// HTTP path of the Prometheus metrics.
    #[arg(long, default_value = "/metrics")]
    pub metrics_path: String,

    #[command(flatten)]
    pub standard: StandardArgs,
}

#[cfg(test)]
mod tests {
    use sidecar_runtime::flags::{STANDARD_FLAGS, long_flag_names};

    use super::*;

    /// Upstream v2's own flags; it also has the standard logging flags and automaxprocs, and no `--version`.
    const UPSTREAM_OWN_FLAGS: [&str; 6] =
        ["csi-address", "health-port", "http-endpoint", "metrics-address", "metrics-path", "probe-timeout"];

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        sidecar_runtime::flags::try_parse_from(std::iter::once("livenessprobe").chain(args.iter().copied()))
    }

    #[test]
    fn accepts_every_upstream_flag_and_version() {
        let mut upstream: Vec<&str> =
            UPSTREAM_OWN_FLAGS.iter().chain(&STANDARD_FLAGS).chain(&["version"]).copied().collect();
        upstream.sort();
        assert_eq!(long_flag_names::<Args>(), upstream, "upstream's 15 flags and --version");
    }

    #[test]
    fn defaults_are_upstream() {
        let args = parse(&[]).unwrap();
        assert_eq!(args.csi_address, "/run/csi/socket");
        assert_eq!(args.probe_timeout, Duration::from_secs(3));
        assert_eq!(args.health_port, "9808");
        assert_eq!(args.http_endpoint, "");
        assert_eq!(args.metrics_address, "");
        assert_eq!(args.metrics_path, "/metrics");
        assert!(!args.version);
    }

    #[test]
    fn reads_go_syntax() {
        // As in csi-driver-host-path's manifests, then the other forms Go's flag package takes.
        let args =
            parse(&["--csi-address=/csi/csi.sock", "--health-port=9898", "-probe-timeout", "5s", "-v=4"]).unwrap();
        assert_eq!(args.csi_address, "/csi/csi.sock");
        assert_eq!(args.health_port, "9898");
        assert_eq!(args.probe_timeout, Duration::from_secs(5));
        assert_eq!(args.standard.verbosity, 4);
        let args = parse(&["-http-endpoint=:9809", "-metrics-path=/m", "-metrics-address", ":9810"]).unwrap();
        assert_eq!((args.http_endpoint.as_str(), args.metrics_path.as_str()), (":9809", "/m"));
        assert_eq!(args.metrics_address, ":9810");
        assert_eq!(parse(&["-probe-timeout=1s", "-probe-timeout=2s"]).unwrap().probe_timeout, Duration::from_secs(2));
        for bad in [&["-probe-timeout=3"][..], &["--leader-election"], &["-timeout=1s"]] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
