//! A minimal "sidecar" with no controller: it elects a leader on a Lease and
//! serves metrics and health, nothing else. The e2e tests start it twice to
//! check leader election against the real control plane.

use std::time::Duration;

use sidecar_runtime::{CommonArgs, Sidecar};

#[derive(Debug, clap::Parser)]
#[command(name = "sidecar-runtime-elector", about = "Leader election on a Lease, for tests")]
struct Args {
    #[command(flatten)]
    common: CommonArgs,

    /// Name of the Lease (sanitised like the sidecars' lock names).
    #[arg(long, default_value = "sidecar-runtime-elector")]
    lock_name: String,

    /// Leader-election identity instead of the hostname, so that several
    /// electors can run on one host.
    #[arg(long)]
    identity: Option<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Args = sidecar_runtime::flags::parse();
    args.common.exit_if_version_requested(env!("CARGO_PKG_VERSION"));
    let mut sidecar = Sidecar::start(&args.common).await?;
    if let Some(identity) = &args.identity {
        sidecar.set_leader_identity(identity);
    }
    if let Some(address) = sidecar.serve_http().await? {
        tracing::info!(%address, "HTTP endpoint ready");
    }
    sidecar
        .run(&args.lock_name, Duration::from_secs(5), |stop| async move {
            tracing::info!("started leading");
            stop.cancelled().await;
            tracing::info!("stopped working");
        })
        .await?;
    tracing::info!("exiting");
    Ok(())
}
