//! livenessprobe's life, in upstream's order: flags checked, the driver's name asked (waiting for the driver as long
//! as it takes: until then nothing listens, so the kubelet's probe fails with "connection refused"), then `/healthz`
//! (and the metrics) served until SIGTERM/SIGINT.
//!
//! Every `/healthz` calls Probe over one connection to the driver, which is dialled again after the driver restarts;
//! upstream dials anew for each probe, with the same answers.

use std::sync::Arc;
use std::time::Duration;

use csi_client::{CsiClient, Endpoint, OperationMetrics};
use prometheus_client::registry::Registry;
use sidecar_runtime::Shutdown;
use sidecar_runtime::http::{driver_health_router, metrics_router, serve_router};

use crate::VERSION;
use crate::flags::Args;
use crate::translate::startup::{Metrics, servers};

/// How long to wait for the driver, and for its name: in effect, forever, as upstream.
const WAIT_FOR_DRIVER: Duration = Duration::from_secs(365 * 24 * 3600);

/// Runs livenessprobe; answers the process's exit status.
pub async fn run(args: Args) -> i32 {
    let servers = match servers(&args) {
        Ok(servers) => servers,
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
async fn connect(csi_address: &str, probe_timeout: Duration, metrics: OperationMetrics) -> anyhow::Result<CsiClient> {
    let endpoint: Endpoint = csi_address.parse()?;
    let connection = csi_client::connect(&endpoint, WAIT_FOR_DRIVER).await?;
    let csi = CsiClient::new(&connection, probe_timeout, metrics);
    let name = csi.with_timeout(WAIT_FOR_DRIVER).driver_info().await?.name;
    tracing::info!(driver = %name, "CSI driver name");
    Ok(csi)
}
