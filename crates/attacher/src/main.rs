//! csi-attacher: attaches and detaches volumes for VolumeAttachments (ControllerPublishVolume and
//! ControllerUnpublishVolume). A drop-in for the upstream image: same flags, Lease, finalizers and status writes.
//! The wiring is [`attacher::start`], which `csi-sidecars` runs too.

use attacher::flags::Args;
use attacher::start::{self, Config};
use sidecar_runtime::Sidecar;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Args = sidecar_runtime::flags::parse();
    // Unknown feature gates are refused before `--version` answers, as upstream's flag parsing refuses them.
    let config = Config::from_args(args)?;
    config.common().exit_if_version_requested(env!("CARGO_PKG_VERSION"));
    let mut sidecar = Sidecar::start(&config.common()).await?;
    let driver = sidecar.connect_driver(config.timeout()).await?;
    let attacher = start::start(config, &mut sidecar, &driver).await?;
    if let Some(address) = sidecar.serve_http().await? {
        tracing::info!(%address, "serving metrics and health checks");
    }
    sidecar.run_all(vec![attacher], None).await?;
    Ok(())
}
