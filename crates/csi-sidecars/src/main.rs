//! csi-sidecars: any set of the sidecars in one process (`--sidecars=provisioner,attacher,livenessprobe` in the
//! controller pod, `--sidecars=registrar,livenessprobe` in the node pod), with one driver connection, one watch
//! cache per kind, one /metrics and health endpoint. Each sidecar keeps its upstream Lease, events and metric names;
//! one that fails stops the process with a message naming it.

use anyhow::Context;
use csi_sidecars::flags::{self, ProcessArgs};
use csi_sidecars::node;
use csi_sidecars::sidecars::shared_lease_name;
use sidecar_runtime::{Beside, ConfigError, Configured, Sidecar, Started};

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
    let mut configured: Vec<Box<dyn Configured>> = Vec::new();
    for (kind, argv) in line.sidecars {
        match kind.configure(argv) {
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

    let call_timeout = configured.iter().map(|c| c.timeout()).max().unwrap_or_default();
    let selected: Vec<&'static str> = configured.iter().map(|c| c.description().name).collect();
    if !configured.iter().any(|c| c.description().uses_kubernetes()) {
        sidecar_runtime::logging::init(&process.common)?;
        std::process::exit(node::run_without_kubernetes(&process.common, configured, call_timeout).await);
    }

    let mut sidecar = Sidecar::start(&process.common).await?;
    let driver = sidecar.connect_driver(call_timeout).await?;
    let shutdown = sidecar.shutdown().clone();
    // Those under a Lease first, each in the order given; then those under none.
    configured.sort_by_key(|c| c.description().lease.is_none());
    let (mut loops, mut exits) = (Vec::new(), Vec::new());
    for config in configured {
        let (name, leased) = (config.description().name, config.description().lease.is_some());
        let beside = Beside { sidecar: Some(&mut sidecar), driver: &driver, shutdown: &shutdown, selected: &selected };
        let started = config.start(beside).await.map_err(anyhow::Error::new);
        // A sidecar under a Lease is named in its failure; the others' own messages name them.
        let started = if leased { started.with_context(|| format!("starting {name}"))? } else { started? };
        match started {
            Started::Loop(running) => loops.push(running),
            Started::Serving { check, exit } => {
                check.into_iter().for_each(|check| sidecar.add_health_check(check));
                exits.extend(exit);
            }
        }
    }
    let names: Vec<&str> = loops.iter().map(|l| l.name.as_str()).collect();
    tracing::info!(sidecars = %names.join(","), caches = sidecar.caches().kinds(), "sidecars started");
    if let Some(address) = sidecar.serve_http().await? {
        tracing::info!(%address, "serving metrics and health checks");
    }
    let shared_lease = line.leader_election_shared.then(|| shared_lease_name(&driver.name));
    for exit in exits {
        // The kubelet's refusal of the driver ends the process as it ends the registrar's binary.
        tokio::spawn(async move {
            if let Ok(status @ 1..) = exit.await {
                std::process::exit(status);
            }
        });
    }
    sidecar.run_all(loops, shared_lease.as_deref()).await?;
    Ok(())
}
