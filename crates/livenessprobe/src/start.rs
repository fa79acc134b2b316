//! livenessprobe's life, in upstream's order: flags checked, the driver's name asked (waiting for the driver as long
//! as it takes: until then nothing listens, so the kubelet's probe fails with "connection refused"), then `/healthz`
//! (and the metrics) served until SIGTERM/SIGINT.
//!
//! Every `/healthz` calls Probe over one connection to the driver, which is dialled again after the driver restarts;
//! upstream dials anew for each probe, with the same answers.
//!
//! Beside other sidecars (`csi-sidecars`), [`Config::from_args`] and [`start`] serve the same `/healthz` on the
//! process's one driver connection.

use std::sync::Arc;
use std::time::Duration;

use csi_client::{CsiClient, OperationMetrics};
use prometheus_client::registry::Registry;
use sidecar_runtime::http::{driver_health_router, driver_probe_check, metrics_router, serve_router};
use sidecar_runtime::{Beside, Described, Description, SetupError, Shutdown, Started, describe};

use crate::VERSION;
use crate::flags::Args;
use crate::translate::startup::{Metrics, Servers, servers};

/// The sidecar's name in `csi-sidecars --sidecars` and in its messages.
pub const NAME: &str = "livenessprobe";

/// The flags, checked as the binary checks them.
pub struct Config {
    args: Args,
    servers: Servers,
}

impl Config {
    /// Refuses conflicting endpoints (`--health-port` with `--http-endpoint`, say).
    pub fn from_args(args: Args) -> Result<Config, SetupError> {
        let servers = servers(&args).map_err(|e| SetupError::message(e.to_string()))?;
        Ok(Config { args, servers })
    }

    /// `--probe-timeout`.
    pub fn timeout(&self) -> Duration {
        self.args.probe_timeout
    }
}

/// Serves `/healthz` from the driver's Probe over `csi` (calls under `--probe-timeout`): on its own address, or,
/// with `--http-endpoint` (the process's), as a check that joins the process's `/healthz`.
pub async fn start(config: Config, csi: &CsiClient) -> Result<Started, SetupError> {
    let Config { args, servers } = config;
    let csi = csi.with_timeout(args.probe_timeout);
    if !args.http_endpoint.is_empty() {
        return Ok(Started::Serving { check: Some(driver_probe_check(csi)), exit: None });
    }
    let bound = serve_router(&servers.health_address, driver_health_router("/healthz", csi))
        .await
        .map_err(|e| SetupError::message(e.to_string()))?;
    tracing::info!(address = %bound, "livenessprobe: serving /healthz");
    Ok(Started::Serving { check: None, exit: None })
}

/// livenessprobe, as `csi-sidecars` and the e2e harness find it.
pub struct LivenessProbe;

impl Described for LivenessProbe {
    const DESCRIPTION: Description =
        Description { name: NAME, binary: "livenessprobe", lease: None, rbac: None, metrics: describe::Metrics::Own };
    type Args = Args;
    type Config = Config;

    fn from_args(args: Args) -> Result<Config, SetupError> {
        Config::from_args(args)
    }

    fn timeout(config: &Config) -> Duration {
        config.timeout()
    }

    async fn start(config: Config, beside: Beside<'_>) -> Result<Started, SetupError> {
        start(config, &beside.driver.csi).await
    }
}

/// Runs livenessprobe; answers the process's exit status.
pub async fn run(args: Args) -> i32 {
    let Config { args, servers } = match Config::from_args(args) {
        Ok(config) => config,
        Err(error) => {
            tracing::error!("{error}");
            return 1;
        }
    };
    tracing::info!(version = VERSION, "running livenessprobe");
    let shutdown = Shutdown::on_signals();
    let mut registry = Registry::default();
    let metrics = OperationMetrics::register(&mut registry);
    let Some(csi) = shutdown.unless_triggered(connect(&args.csi_address, args.probe_timeout, metrics)).await else {
        return 0;
    };
    let csi = match csi {
        Ok(csi) => csi,
        Err(error) => {
            tracing::error!(%error, "failed to get the CSI driver name");
            return 1;
        }
    };
    let registry = Arc::new(registry);
    let mut health = driver_health_router("/healthz", csi);
    match servers.metrics {
        Metrics::Off => {}
        Metrics::WithHealth { path } => health = health.merge(metrics_router(&path, registry)),
        Metrics::Separate { address, path } => match serve_router(&address, metrics_router(&path, registry)).await {
            Ok(bound) => tracing::info!(address = %bound, %path, "serving metrics"),
            Err(error) => {
                tracing::error!(%error, "failed to start the metrics endpoint");
                return 1;
            }
        },
    }
    match serve_router(&servers.health_address, health).await {
        Ok(bound) => tracing::info!(address = %bound, "serving /healthz"),
        Err(error) => {
            tracing::error!(%error, "failed to start the HTTP server");
            return 1;
        }
    }
    shutdown.triggered().await;
    0
}

/// Waits for the driver and asks its name (which labels the metrics); the client's calls then run under
/// `probe_timeout`.
async fn connect(
    csi_address: &str,
    probe_timeout: Duration,
    metrics: OperationMetrics,
) -> Result<CsiClient, sidecar_runtime::DriverError> {
    let driver = sidecar_runtime::wait_for_driver(csi_address, probe_timeout, metrics).await?;
    tracing::info!(driver = %driver.name, "CSI driver name");
    Ok(driver.csi)
}
