//! csi-external-health-monitor-controller: reports the driver's volume health on the claims (events, and the claims'
//! `status.healthStatus` where the API server keeps it). A drop-in for the upstream image: same flags and Lease.
//! The wiring is [`health_monitor::start`], which `csi-sidecars` runs too.

use health_monitor::flags::Args;
use health_monitor::start::{self, Config};
use sidecar_runtime::Sidecar;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Args = sidecar_runtime::flags::parse();
    let config = Config::from_args(args)?;
    config.common().exit_if_version_requested(env!("CARGO_PKG_VERSION"));
    let mut sidecar = Sidecar::start(&config.common()).await?;
    let driver = sidecar.connect_driver(config.timeout()).await?;
    let monitor = start::start(config, &mut sidecar, &driver).await?;
    if let Some(address) = sidecar.serve_http().await? {
        tracing::info!(%address, "serving metrics and health checks");
    }
    sidecar.run_all(vec![monitor], None).await?;
    Ok(())
}
