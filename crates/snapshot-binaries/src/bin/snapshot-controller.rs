//! snapshot-controller: binds VolumeSnapshots to VolumeSnapshotContents and creates the contents of dynamic
//! snapshots, once per cluster. A drop-in for the upstream image: same flags, Lease, finalizers and events.

use sidecar_runtime::Sidecar;
use snapshot_binaries::snapshot_controller::{self, Config};
use snapshotter::flags::controller::Args;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Args = sidecar_runtime::flags::parse();
    let config = Config::from_args(args)?;
    config.common().exit_if_version_requested(env!("CARGO_PKG_VERSION"));
    let mut sidecar = Sidecar::start(&config.common()).await?;
    let controller = snapshot_controller::start(config, &mut sidecar).await?;
    if let Some(address) = sidecar.serve_http().await? {
        tracing::info!(%address, "serving metrics and health checks");
    }
    sidecar.run_all(vec![controller], None).await?;
    Ok(())
}
