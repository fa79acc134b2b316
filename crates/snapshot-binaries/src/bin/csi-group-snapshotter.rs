//! csi-group-snapshotter: csi-snapshotter's group loop alone, for a driver whose single snapshots are served
//! elsewhere (or not at all). Same flags as csi-snapshotter; the gate CSIVolumeGroupSnapshot is implied. The wiring
//! is [`group_snapshotter::start`], which `csi-sidecars` runs too.

use sidecar_runtime::Sidecar;
use snapshot_binaries::group_snapshotter;
use snapshotter::flags::sidecar::Args;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Args = sidecar_runtime::flags::parse();
    let config = group_snapshotter::config(args)?;
    config.common().exit_if_version_requested(env!("CARGO_PKG_VERSION"));
    let mut sidecar = Sidecar::start(&config.common()).await?;
    let driver = sidecar.connect_driver(config.timeout()).await?;
    let groups = group_snapshotter::start(config, &mut sidecar, &driver).await?;
    if let Some(address) = sidecar.serve_http().await? {
        tracing::info!(%address, "serving metrics and health checks");
    }
    sidecar.run_all(vec![groups], None).await?;
    Ok(())
}
