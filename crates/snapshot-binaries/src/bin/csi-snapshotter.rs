//! csi-snapshotter: cuts and deletes the snapshots of one CSI driver's VolumeSnapshotContents. A drop-in for the
//! upstream image: same flags, Lease, events, annotations and metrics. The wiring is
//! [`snapshot_binaries::snapshotter::start`], which `csi-sidecars` runs too.

use ::snapshotter::flags::sidecar::Args;
use sidecar_runtime::Sidecar;
use snapshot_binaries::snapshotter::{self, Config};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Args = sidecar_runtime::flags::parse();
    let config = Config::from_args(args)?;
    config.common().exit_if_version_requested(env!("CARGO_PKG_VERSION"));
    let mut sidecar = Sidecar::start(&config.common()).await?;
    let driver = sidecar.connect_driver(config.timeout()).await?;
    let snapshotter = match snapshotter::start(config, &mut sidecar, &driver, true).await {
        Ok(snapshotter) => snapshotter,
        // Upstream exits 1 after logging a driver without snapshots; the log line is written already.
        Err(sidecar_runtime::SetupError::Refused(_)) => std::process::exit(1),
        Err(err) => return Err(err.into()),
    };
    if let Some(address) = sidecar.serve_http().await? {
        tracing::info!(%address, "serving metrics and health checks");
    }
    sidecar.run_all(vec![snapshotter], None).await?;
    Ok(())
}
