//! `hostpath-plugin`: parse flags, open the state directory, serve the CSI socket until SIGTERM or
//! SIGINT, then remove the socket.

use std::time::Duration;

use anyhow::Context as _;
use clap::Parser as _;
use hostpath_plugin::flags::{Flags, normalize_go_style};
use hostpath_plugin::{Plugin, proxy, server};
use tokio::signal::unix::{SignalKind, signal};
use tracing_subscriber::EnvFilter;

/// How long calls in flight may take to finish after a shutdown signal.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let flags = Flags::parse_from(normalize_go_style(std::env::args_os()));
    // -v raises this crate's verbosity only; gRPC and HTTP/2 internals stay at warn unless RUST_LOG asks.
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(format!("warn,hostpath_plugin={}", flags.log_level())));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(false).init();

    let socket = server::socket_path(&flags.endpoint)?;
    if let Some(tcp) = &flags.proxy_endpoint {
        let result = proxy::serve(&socket, tcp, async {
            match shutdown_signal().await {
                Ok(name) => tracing::info!(signal = name, "shutting down"),
                Err(e) => tracing::error!(error = %e, "shutting down"),
            }
        })
        .await;
        let _ = std::fs::remove_file(&socket);
        return result;
    }
    let config = flags.config();
    let plugin = Plugin::open(config.clone()).context("opening the state directory")?;
    let listener = server::bind(&socket)?;
    tracing::info!(
        driver = %config.driver_name,
        node = %config.node_id,
        socket = %socket.display(),
        state_dir = %config.state_dir.display(),
        faults = ?config.fault_config,
        node_mounts = config.node_mounts,
        attach_required = config.attach_required,
        version = hostpath_plugin::identity::VERSION,
        "serving"
    );

    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(server::serve(plugin, listener, async {
        let _ = stopped.await;
    }));
    let signal_name = shutdown_signal().await?;
    tracing::info!(signal = signal_name, "shutting down");
    let _ = stop.send(());
    match tokio::time::timeout(DRAIN_TIMEOUT, serving).await {
        Ok(result) => result.context("server task")?.context("serving")?,
        Err(_) => tracing::warn!("calls still running after {DRAIN_TIMEOUT:?}; exiting anyway"),
    }
    let _ = std::fs::remove_file(&socket);
    Ok(())
}

async fn shutdown_signal() -> anyhow::Result<&'static str> {
    let mut terminate = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    Ok(tokio::select! {
        _ = terminate.recv() => "SIGTERM",
        _ = interrupt.recv() => "SIGINT",
    })
}
