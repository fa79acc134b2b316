//! csi-provisioner: creates a PersistentVolume through the CSI driver for each claim that asks for one, and deletes
//! volumes their reclaim policy lets go. A drop-in for the upstream image: same flags, Lease, events and metrics.
//! The wiring is [`provisioner::start`], which `csi-sidecars` runs too.

use provisioner::flags::Args;
use provisioner::start::{self, Config};
use sidecar_runtime::Sidecar;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Args = sidecar_runtime::flags::parse();
    let config = Config::from_args(args)?;
    config.common().exit_if_version_requested(env!("CARGO_PKG_VERSION"));
    let mut sidecar = Sidecar::start(&config.common()).await?;
    let driver = sidecar.connect_driver(config.timeout()).await?;
    let provisioner = start::start(config, &mut sidecar, &driver).await?;
    if let Some(address) = sidecar.serve_http().await? {
        tracing::info!(%address, "serving metrics and health checks");
    }
    sidecar.run_all(vec![provisioner], None).await?;
    Ok(())
}
