//! The csi-node-driver-registrar command line: upstream node-driver-registrar v2's flags with their defaults
//! (kubernetes-csi/node-driver-registrar, cmd/csi-node-driver-registrar/main.go), in Go syntax, plus the standard
//! logging flags every kubernetes-csi binary has.

use std::time::Duration;

use sidecar_runtime::StandardArgs;
use sidecar_runtime::flags::{go_bool, go_duration};

#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "csi-node-driver-registrar",
    about = "Registers a CSI driver with the kubelet through the kubelet's plugin registration socket"
)]
pub struct Args {
    /// Print the version and exit.
    #[arg(long, num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = go_bool)]
    pub version: bool,

    /// Path of the CSI driver socket inside this container.
    #[arg(long, default_value = "/run/csi/socket")]
    pub csi_address: String,

    /// Path of the CSI driver socket on the host, which the kubelet dials (required).
    #[arg(long, default_value = "")]
    pub kubelet_registration_path: String,

    /// The kubelet's plugin registration directory, as mounted in this container; the registration socket
    /// <driver>-reg.sock is made there.
    #[arg(long, default_value = "/registration")]
    pub plugin_registration_path: String,

    /// Timeout of the calls to the driver (GetPluginInfo) and of the health check's call to the registration socket.
    #[arg(long, default_value = "1s", value_parser = go_duration)]
    pub timeout: Duration,

    /// Deprecated: TCP port of /healthz on every interface; 0 disables it. Cannot be set with --http-endpoint.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub health_port: i64,

    /// Address (host:port) of the HTTP server of /healthz, which checks the registration socket. Empty: disabled.
    /// Cannot be set with --health-port.
    #[arg(long, default_value = "")]
    pub http_endpoint: String,

    /// Deprecated: kubelet-registration-probe exits 0 at once (that probe is no longer needed); any other value
    /// registers.
    #[arg(long, default_value = "")]
    pub mode: String,

    /// Accepted for compatibility; there is no Go profiler to serve.
    #[arg(long, num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = go_bool)]
    pub enable_pprof: bool,

    /// Deprecated upstream and without effect.
    #[arg(long, default_value = "0s", value_parser = go_duration)]
    pub connection_timeout: Duration,

    #[command(flatten)]
    pub standard: StandardArgs,
}

#[cfg(test)]
mod tests {
    use sidecar_runtime::flags::{STANDARD_FLAGS, long_flag_names};

    use super::*;

    /// Upstream v2's own flags; it also has the standard logging flags and automaxprocs.
    const UPSTREAM_OWN_FLAGS: [&str; 10] = [
        "connection-timeout",
        "csi-address",
        "enable-pprof",
        "health-port",
        "http-endpoint",
        "kubelet-registration-path",
        "mode",
        "plugin-registration-path",
        "timeout",
        "version",
    ];

    fn parse(args: &[&str]) -> Result<Args, clap::Error> {
        sidecar_runtime::flags::try_parse_from(std::iter::once("csi-node-driver-registrar").chain(args.iter().copied()))
    }

    #[test]
    fn accepts_every_upstream_flag_and_no_other() {
        let mut upstream: Vec<&str> = UPSTREAM_OWN_FLAGS.iter().chain(&STANDARD_FLAGS).copied().collect();
        upstream.sort();
        assert_eq!(long_flag_names::<Args>(), upstream, "19 flags, as upstream's -h lists them");
    }

    #[test]
    fn defaults_are_upstream() {
        let args = parse(&[]).unwrap();
        assert_eq!(args.csi_address, "/run/csi/socket");
        assert_eq!(args.kubelet_registration_path, "");
        assert_eq!(args.plugin_registration_path, "/registration");
        assert_eq!(args.timeout, Duration::from_secs(1));
        assert_eq!(args.health_port, 0);
        assert_eq!(args.http_endpoint, "");
        assert_eq!(args.mode, "");
        assert!(!args.enable_pprof && !args.version);
        assert_eq!(args.connection_timeout, Duration::ZERO);
        assert_eq!(args.standard.verbosity, 0);
    }

    #[test]
    fn reads_go_syntax() {
        // As in csi-driver-host-path's node DaemonSet, then every other form Go's flag package takes.
        let args = parse(&[
            "--v=5",
            "--csi-address=/csi/csi.sock",
            "--kubelet-registration-path=/var/lib/kubelet/plugins/csi-hostpath/csi.sock",
            "-plugin-registration-path",
            "/registration",
            "-timeout=2s",
            "-health-port=9809",
            "-mode=kubelet-registration-probe",
            "-enable-pprof",
            "--connection-timeout=15s",
            "-logging-format=json",
            "-automaxprocs=false",
        ])
        .unwrap();
        assert_eq!(args.standard.verbosity, 5);
        assert_eq!(args.csi_address, "/csi/csi.sock");
        assert_eq!(args.kubelet_registration_path, "/var/lib/kubelet/plugins/csi-hostpath/csi.sock");
        assert_eq!(args.plugin_registration_path, "/registration");
        assert_eq!(args.timeout, Duration::from_secs(2));
        assert_eq!(args.health_port, 9809);
        assert_eq!(args.mode, "kubelet-registration-probe");
        assert!(args.enable_pprof);
        assert_eq!(args.connection_timeout, Duration::from_secs(15));
        assert_eq!(parse(&["-http-endpoint=:9809", "-v", "3"]).unwrap().http_endpoint, ":9809");
        assert!(!parse(&["-enable-pprof=false"]).unwrap().enable_pprof);
        assert_eq!(parse(&["-timeout=1s", "-timeout=3s"]).unwrap().timeout, Duration::from_secs(3), "last one wins");
        for bad in [&["--kubeconfig=/x"][..], &["-timeout=soon"], &["-health-port=x"], &["-enable-pprof", "true"]] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
