//! csi-node-driver-registrar: registers a CSI driver with the kubelet. A drop-in for the upstream image: same flags,
//! socket, health check and exits. The life of the process is [`node_driver_registrar::start::run`].

use node_driver_registrar::flags::Args;
use node_driver_registrar::{VERSION, start};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Args = sidecar_runtime::flags::parse();
    sidecar_runtime::flags::exit_if_version_requested(args.version, VERSION);
    sidecar_runtime::logging::init_standard(&args.standard)?;
    std::process::exit(start::run(args).await)
}
