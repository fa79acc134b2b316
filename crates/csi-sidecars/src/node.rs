//! The sidecars that run under no Lease: livenessprobe (controller or node pod) and the registrar (node pod). They
//! share the process's one driver connection and `/metrics`; each serves its health check where its own binary
//! would, except that with the process's `--http-endpoint` the check joins the process's `/healthz` there (which
//! then answers `ok` only when every check passes).
//!
//! A set of only these needs no Kubernetes client ([`run_without_kubernetes`]): the node pod's
//! `--sidecars=registrar,livenessprobe` runs with no credentials, as upstream's two binaries do.

use std::sync::Arc;
use std::time::Duration;

use csi_client::{CsiClient, Endpoint, OperationMetrics};
use prometheus_client::registry::Registry;
use sidecar_runtime::http::{HealthCheck, HttpOptions, driver_health_router, driver_probe_check, serve_router};
use sidecar_runtime::{CommonArgs, SetupError, Shutdown};
use tokio::task::JoinHandle;

use crate::flags::Kind;

/// How long to wait for the driver, and for its name: in effect, forever, as upstream's livenessprobe and
/// registrar do.
const WAIT_FOR_DRIVER: Duration = Duration::from_secs(365 * 24 * 3600);

/// livenessprobe's flags, checked as its binary checks them.
pub struct LivenessProbe {
    args: livenessprobe::flags::Args,
    servers: livenessprobe::translate::startup::Servers,
}

impl LivenessProbe {
    pub fn from_args(args: livenessprobe::flags::Args) -> Result<LivenessProbe, SetupError> {
        let servers =
            livenessprobe::translate::startup::servers(&args).map_err(|e| SetupError::message(e.to_string()))?;
        Ok(LivenessProbe { args, servers })
    }

    /// `--probe-timeout`.
    pub fn timeout(&self) -> Duration {
        self.args.probe_timeout
    }
}

/// The registrar's flags, checked as its binary checks them.
pub struct Registrar {
    args: node_driver_registrar::flags::Args,
    health_address: Option<String>,
}

impl Registrar {
    /// The deprecated `--mode=kubelet-registration-probe`, under which the single binary exits 0 at once, is
    /// refused: it is an exec probe's command, not a sidecar to run beside others.
    pub fn from_args(args: node_driver_registrar::flags::Args) -> Result<Registrar, SetupError> {
        use node_driver_registrar::translate::startup::{MODE_REGISTRATION_PROBE, Startup, startup};
        match startup(&args).map_err(|e| SetupError::message(e.to_string()))? {
            Startup::ExitAsProbe => Err(SetupError::message(format!(
                "--mode={MODE_REGISTRATION_PROBE} is an exec probe of the csi-node-driver-registrar binary, not a \
                 mode csi-sidecars runs"
            ))),
            Startup::Register { health_address } => Ok(Registrar { args, health_address }),
        }
    }

    /// `--timeout`.
    pub fn timeout(&self) -> Duration {
        self.args.timeout
    }
}

/// A sidecar that runs under no Lease.
pub enum NodeSidecar {
    LivenessProbe(LivenessProbe),
    Registrar(Registrar),
}

/// What [`start`] leaves running.
pub struct Started {
    /// For the process's `/healthz` on `--http-endpoint`.
    pub checks: Vec<HealthCheck>,
    /// The registrar's serving, which ends with its exit status (1: the kubelet refused the driver).
    pub registrar: Option<JoinHandle<i32>>,
}

/// Starts `sidecars` on the driver connection `csi` to the driver `driver`; the registrar's socket is served
/// until `shutdown`.
pub async fn start(
    sidecars: Vec<NodeSidecar>,
    csi: &CsiClient,
    driver: &str,
    shutdown: &Shutdown,
) -> Result<Started, SetupError> {
    let mut started = Started { checks: Vec::new(), registrar: None };
    for sidecar in sidecars {
        match sidecar {
            NodeSidecar::LivenessProbe(LivenessProbe { args, servers }) => {
                let csi = csi.with_timeout(args.probe_timeout);
                if args.http_endpoint.is_empty() {
                    let router = driver_health_router("/healthz", csi);
                    let bound = serve_router(&servers.health_address, router).await.map_err(refused)?;
                    tracing::info!(address = %bound, "livenessprobe: serving /healthz");
                } else {
                    started.checks.push(driver_probe_check(csi));
                }
            }
            NodeSidecar::Registrar(Registrar { args, health_address }) => {
                use node_driver_registrar::translate::registration::socket_path;
                // With the process's --http-endpoint the socket check is part of its /healthz; with --health-port
                // it is served alone there, as the single binary does.
                let own_address = match args.http_endpoint.is_empty() {
                    true => health_address,
                    false => {
                        let socket = socket_path(&args.plugin_registration_path, driver);
                        started.checks.push(node_driver_registrar::health_server::socket_health_check(
                            socket,
                            driver.to_string(),
                            args.timeout,
                        ));
                        None
                    }
                };
                let (driver, shutdown) = (driver.to_string(), shutdown.clone());
                started.registrar = Some(tokio::spawn(async move {
                    node_driver_registrar::start::register(&args, &driver, own_address, &shutdown).await
                }));
            }
        }
    }
    Ok(started)
}

fn refused(error: impl std::error::Error + Send + Sync + 'static) -> SetupError {
    SetupError::message(error.to_string())
}

/// Runs a set of sidecars none of which uses Kubernetes: waits for the driver as long as it takes (nothing listens
/// until then, so a kubelet probe fails with "connection refused", as upstream's), then serves until SIGTERM/SIGINT
/// (exit 0) or the kubelet's refusal of the driver (exit 1). Answers the exit status.
pub async fn run_without_kubernetes(common: &CommonArgs, sidecars: Vec<NodeSidecar>, call_timeout: Duration) -> i32 {
    let kinds: Vec<&str> = sidecars
        .iter()
        .map(|s| match s {
            NodeSidecar::LivenessProbe(_) => Kind::LivenessProbe.name(),
            NodeSidecar::Registrar(_) => Kind::Registrar.name(),
        })
        .collect();
    let shutdown = Shutdown::on_signals();
    let mut registry = Registry::default();
    let metrics = OperationMetrics::register(&mut registry);
    sidecar_runtime::process_metrics::register(&mut registry);
    let Some(connected) = shutdown.unless_triggered(connect(&common.csi_address, call_timeout, metrics)).await else {
        return 0;
    };
    let (csi, driver) = match connected {
        Ok(connected) => connected,
        Err(error) => {
            tracing::error!(%error, "failed to get the CSI driver name");
            return 1;
        }
    };
    tracing::info!(%driver, sidecars = %kinds.join(","), "CSI driver name; sidecars starting");
    let started = match start(sidecars, &csi, &driver, &shutdown).await {
        Ok(started) => started,
        Err(error) => {
            tracing::error!(%error, "starting the sidecars");
            return 1;
        }
    };
    if let Some(options) = HttpOptions::from_args(common) {
        match sidecar_runtime::http::serve(&options, Arc::new(registry), None, started.checks).await {
            Ok(address) => tracing::info!(%address, "serving metrics and health checks"),
            Err(error) => {
                tracing::error!(%error, "failed to start the HTTP server");
                return 1;
            }
        }
    }
    match started.registrar {
        Some(registrar) => registrar.await.unwrap_or(1),
        None => {
            shutdown.triggered().await;
            0
        }
    }
}

/// Waits for the driver and asks its name; the client's calls then run under `call_timeout`.
async fn connect(
    csi_address: &str,
    call_timeout: Duration,
    metrics: OperationMetrics,
) -> anyhow::Result<(CsiClient, String)> {
    let endpoint: Endpoint = csi_address.parse()?;
    let connection = csi_client::connect(&endpoint, WAIT_FOR_DRIVER).await?;
    let csi = CsiClient::new(&connection, call_timeout, metrics);
    let name = csi.with_timeout(WAIT_FOR_DRIVER).driver_info().await?.name;
    Ok((csi, name))
}

#[cfg(test)]
mod tests {
    use crate::flags::{Kind, split};
    use crate::sidecars::{ConfigError, Configured};

    fn configured(line: &[&str]) -> Result<Vec<Configured>, String> {
        let argv = std::iter::once("csi-sidecars").chain(line.iter().copied()).map(Into::into).collect();
        let line = split(argv).map_err(|e| e.to_string())?;
        line.sidecars.into_iter().map(|(kind, argv)| Configured::parse(kind, argv).map_err(message)).collect()
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
        let kinds: Vec<(Kind, u64)> = configured.iter().map(|c| (c.kind(), c.timeout().as_secs())).collect();
        assert_eq!(kinds, [(Kind::Registrar, 1), (Kind::LivenessProbe, 5), (Kind::Attacher, 15)]);
        let leased: Vec<Kind> =
            configured.into_iter().filter_map(|c| c.into_node_sidecar().err()).map(|c| c.kind()).collect();
        assert_eq!(leased, [Kind::Attacher], "only the attacher runs under a Lease");
    }
}
