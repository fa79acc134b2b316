//! livenessprobe: `/healthz` answered by the CSI driver's Probe. A drop-in for the upstream image: same flags,
//! port and answers. The life of the process is [`livenessprobe::start::run`].

use livenessprobe::flags::Args;
use livenessprobe::{VERSION, start};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Args = sidecar_runtime::flags::parse();
    sidecar_runtime::flags::exit_if_version_requested(args.version, VERSION);
    sidecar_runtime::logging::init_standard(&args.standard)?;
    std::process::exit(start::run(args).await)
}
