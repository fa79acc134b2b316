//! csi-sidecars: any set of the sidecars in one process (`--sidecars=provisioner,attacher,livenessprobe` in the
//! controller pod, `--sidecars=registrar,livenessprobe` in the node pod), with one driver connection, one watch
//! cache per kind, one /metrics and health endpoint. Each sidecar keeps its upstream Lease, events and metric names;
//! one that fails stops the process with a message naming it.

use csi_sidecars::flags::{self, Kind, ProcessArgs};
use csi_sidecars::node;
use csi_sidecars::sidecars::{ConfigError, Configured, shared_lease_name};
use sidecar_runtime::Sidecar;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let argv: Vec<_> = std::env::args_os().collect();
    if argv.iter().skip(1).any(|a| a == "--help" || a == "-h" || a == "-help") {
        // A closed stdout (`| head`) is no error worth reporting.
        let _ = flags::command().print_long_help();
        std::process::exit(0);
    }
    let line = flags::split(argv).unwrap_or_else(|err| {
        eprintln!("error: {err}\n\nFor more information, try '--help'.");
        std::process::exit(2)
    });
    let process: ProcessArgs = sidecar_runtime::flags::try_parse_from(line.process).unwrap_or_else(|err| err.exit());
    let mut configured = Vec::new();
    for (kind, argv) in line.sidecars {
        match Configured::parse(kind, argv) {
            Ok(config) => configured.push(config),
            Err(ConfigError::Flags { sidecar, source }) => {
                eprintln!("the flags of {sidecar}:");
                source.exit()
            }
            Err(err) => {
                eprintln!("error: {err}");
                std::process::exit(2)
            }
        }
    }
    // After every sidecar's flags and gates are checked, as upstream's flag parsing refuses them before `--version`.
    process.common.exit_if_version_requested(env!("CARGO_PKG_VERSION"));

    let call_timeout = configured.iter().map(Configured::timeout).max().unwrap_or_default();
    let uses_kubernetes = configured.iter().any(|c| c.kind().uses_kubernetes());
    let group_sidecar = configured.iter().any(|c| c.kind() == Kind::GroupSnapshotter);
    let (mut leased, mut unleased) = (Vec::new(), Vec::new());
    for config in configured {
        match config.into_node_sidecar() {
            Ok(node_sidecar) => unleased.push(node_sidecar),
            Err(config) => leased.push(*config),
        }
    }
    if !uses_kubernetes {
        sidecar_runtime::logging::init(&process.common)?;
        std::process::exit(node::run_without_kubernetes(&process.common, unleased, call_timeout).await);
    }

    let mut sidecar = Sidecar::start(&process.common).await?;
    let driver = sidecar.connect_driver(call_timeout).await?;
    let mut loops = Vec::new();
    for config in leased {
        let name = config.kind().name();
        let started = config.start(&mut sidecar, &driver, group_sidecar).await;
        loops.push(started.map_err(|err| anyhow::Error::new(err).context(format!("starting {name}")))?);
    }
    let unleased = node::start(unleased, &driver.csi, &driver.name, sidecar.shutdown()).await?;
    unleased.checks.into_iter().for_each(|check| sidecar.add_health_check(check));
    let names: Vec<&str> = loops.iter().map(|l| l.name.as_str()).collect();
    tracing::info!(sidecars = %names.join(","), caches = sidecar.caches().kinds(), "sidecars started");
    if let Some(address) = sidecar.serve_http().await? {
        tracing::info!(%address, "serving metrics and health checks");
    }
    let shared_lease = line.leader_election_shared.then(|| shared_lease_name(&driver.name));
    if let Some(registrar) = unleased.registrar {
        // The kubelet's refusal of the driver ends the process as it ends the registrar's binary.
        tokio::spawn(async move {
            if let Ok(status @ 1..) = registrar.await {
                std::process::exit(status);
            }
        });
    }
    sidecar.run_all(loops, shared_lease.as_deref()).await?;
    Ok(())
}
