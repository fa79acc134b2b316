//! csi-resizer: expands volumes (ControllerExpandVolume) and modifies them through VolumeAttributesClass
//! (ControllerModifyVolume). A drop-in for the upstream image: same flags, Lease, events and status writes.
//! The wiring is [`resizer::start`], which `csi-sidecars` runs too.

use resizer::flags::Args;
use resizer::start::{self, Config};
use sidecar_runtime::Sidecar;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Args = sidecar_runtime::flags::parse();
    let config = Config::from_args(args)?;
    config.common().exit_if_version_requested(env!("CARGO_PKG_VERSION"));
    let mut sidecar = Sidecar::start(&config.common()).await?;
    let driver = sidecar.connect_driver(config.timeout()).await?;
    let resizer = start::start(config, &mut sidecar, &driver).await?;
    if let Some(address) = sidecar.serve_http().await? {
        tracing::info!(%address, "serving metrics and health checks");
    }
    sidecar.run_all(vec![resizer], None).await?;
    Ok(())
}
