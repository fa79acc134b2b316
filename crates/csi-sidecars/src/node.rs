//! A set of sidecars none of which uses Kubernetes (livenessprobe in either pod, the registrar in the node pod): the
//! node pod's `--sidecars=registrar,livenessprobe` runs with no Kubernetes client and no credentials, as upstream's
//! two binaries do. They share the process's one driver connection and `/metrics`; each serves its health check
//! where its own binary would, except that with the process's `--http-endpoint` the check joins the process's
//! `/healthz` there (which then answers `ok` only when every check passes).

use std::sync::Arc;
use std::time::Duration;

use csi_client::OperationMetrics;
use prometheus_client::registry::Registry;
use sidecar_runtime::http::HttpOptions;
use sidecar_runtime::{Beside, CommonArgs, Configured, Shutdown, Started};
use tokio::task::JoinSet;

/// Runs `sidecars`: waits for the driver as long as it takes (nothing listens until then, so a kubelet probe fails
/// with "connection refused", as upstream's), then serves until SIGTERM/SIGINT (exit 0) or the end of a sidecar's
/// task (the kubelet's refusal of the driver: exit 1). Answers the exit status.
pub async fn run_without_kubernetes(
    common: &CommonArgs,
    sidecars: Vec<Box<dyn Configured>>,
    call_timeout: Duration,
) -> i32 {
    let names: Vec<&'static str> = sidecars.iter().map(|s| s.description().name).collect();
    let shutdown = Shutdown::on_signals();
    let mut registry = Registry::default();
    let metrics = OperationMetrics::register(&mut registry);
    sidecar_runtime::process_metrics::register(&mut registry);
    let waiting = sidecar_runtime::wait_for_driver(&common.csi_address, call_timeout, metrics);
    let Some(connected) = shutdown.unless_triggered(waiting).await else {
        return 0;
    };
    let driver = match connected {
        Ok(driver) => driver,
        Err(error) => {
            tracing::error!(%error, "failed to get the CSI driver name");
            return 1;
        }
    };
    tracing::info!(driver = %driver.name, sidecars = %names.join(","), "CSI driver name; sidecars starting");
    let (mut checks, mut exits) = (Vec::new(), JoinSet::new());
    for config in sidecars {
        let beside = Beside { sidecar: None, driver: &driver, shutdown: &shutdown, selected: &names };
        match config.start(beside).await {
            Ok(Started::Serving { check, exit }) => {
                checks.extend(check);
                if let Some(exit) = exit {
                    exits.spawn(async move { exit.await.unwrap_or(1) });
                }
            }
            Ok(Started::Loop(running)) => {
                tracing::error!(sidecar = %running.name, "a sidecar under a Lease needs a Kubernetes client");
                return 1;
            }
            Err(error) => {
                tracing::error!(%error, "starting the sidecars");
                return 1;
            }
        }
    }
    if let Some(options) = HttpOptions::from_args(common) {
        match sidecar_runtime::http::serve(&options, Arc::new(registry), None, checks).await {
            Ok(address) => tracing::info!(%address, "serving metrics and health checks"),
            Err(error) => {
                tracing::error!(%error, "failed to start the HTTP server");
                return 1;
            }
        }
    }
    match exits.is_empty() {
        false => exits.join_next().await.and_then(Result::ok).unwrap_or(1),
        true => {
            shutdown.triggered().await;
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use sidecar_runtime::{ConfigError, Configured};

    use crate::flags::split;

    fn configured(line: &[&str]) -> Result<Vec<Box<dyn Configured>>, String> {
        let argv = std::iter::once("csi-sidecars").chain(line.iter().copied()).map(Into::into).collect();
        let line = split(argv).map_err(|e| e.to_string())?;
        line.sidecars.into_iter().map(|(kind, argv)| kind.configure(argv).map_err(message)).collect()
    }

    fn message(error: ConfigError) -> String {
        match error {
            ConfigError::Flags { sidecar, source } => format!("{sidecar}: {}", source.kind()),
            refused => refused.to_string(),
        }
    }

    #[test]
    fn refused_as_their_binaries_refuse() {
        let path = "--kubelet-registration-path=/var/lib/kubelet/plugins/d/csi.sock";
        // (command line, refusal)
        let table: [(&[&str], &str); 4] = [
            (&["--sidecars=registrar,livenessprobe"], "registrar: kubelet-registration-path is a required parameter"),
            (
                &["--sidecars=livenessprobe", "--livenessprobe.health-port=9898", "--http-endpoint=:8080"],
                "livenessprobe: only one of `--health-port` and `--http-endpoint` can be explicitly set",
            ),
            (
                &["--sidecars=registrar", path, "--registrar.health-port=9809", "--http-endpoint=:8080"],
                "registrar: only one of `--health-port` and `--http-endpoint` can be set",
            ),
            (
                &["--sidecars=registrar", path, "--mode=kubelet-registration-probe"],
                "registrar: --mode=kubelet-registration-probe is an exec probe of the csi-node-driver-registrar \
                 binary, not a mode csi-sidecars runs",
            ),
        ];
        for (line, refusal) in table {
            assert_eq!(configured(line).err().as_deref(), Some(refusal), "{line:?}");
        }
    }

    #[test]
    fn the_node_pods_set_runs_without_lease_and_with_each_timeout() {
        let path = "--kubelet-registration-path=/var/lib/kubelet/plugins/d/csi.sock";
        let line = ["--sidecars=registrar,livenessprobe,attacher", path, "--livenessprobe.probe-timeout=5s"];
        let configured = configured(&line).unwrap();
        let kinds: Vec<(&str, u64)> =
            configured.iter().map(|c| (c.description().name, c.timeout().as_secs())).collect();
        assert_eq!(kinds, [("registrar", 1), ("livenessprobe", 5), ("attacher", 15)]);
        let leased: Vec<&str> =
            configured.iter().map(|c| c.description()).filter(|d| d.lease.is_some()).map(|d| d.name).collect();
        assert_eq!(leased, ["attacher"], "only the attacher runs under a Lease");
    }
}
