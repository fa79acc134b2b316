//! The registrar's life, in upstream's order: flags checked, the driver's name asked (waiting for the driver as
//! long as it takes), the registration socket served with `/healthz` beside it, until SIGTERM/SIGINT (exit 0) or
//! the kubelet's refusal (exit 1). The socket is removed on either way out.

use std::time::Duration;

use csi_client::{CsiClient, Endpoint, OperationMetrics};
use sidecar_runtime::Shutdown;
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::UnixListenerStream;

use crate::authority::LocalAuthority;

use crate::flags::Args;
use crate::proto::registration_server::RegistrationServer;
use crate::registration_server::{self, RegistrationService};
use crate::translate::registration::{plugin_info, socket_path};
use crate::translate::startup::{Startup, startup};
use crate::{VERSION, health_server};

/// How long to wait for the driver's socket: in effect, forever, as upstream.
const WAIT_FOR_DRIVER: Duration = Duration::from_secs(365 * 24 * 3600);

/// Runs the registrar; answers the process's exit status.
pub async fn run(args: Args) -> i32 {
    let health_address = match startup(&args) {
        Ok(Startup::ExitAsProbe) => return 0,
        Ok(Startup::Register { health_address }) => health_address,
        Err(error) => {
            tracing::error!("{error}");
            return 1;
        }
    };
    tracing::info!(version = VERSION, mode = %args.mode, "running node-driver-registrar");
    if !args.connection_timeout.is_zero() {
        tracing::info!("--connection-timeout is deprecated and has no effect");
    }
    if args.enable_pprof {
        tracing::warn!("--enable-pprof has no effect: there is no Go profiler to serve");
    }
    let shutdown = Shutdown::on_signals();
    let Some(driver) = shutdown.unless_triggered(driver_name(&args.csi_address, args.timeout)).await else {
        return 0;
    };
    let driver = match driver {
        Ok(driver) => driver,
        Err(error) => {
            tracing::error!(%error, "error retrieving the CSI driver name");
            return 1;
        }
    };
    tracing::info!(driver = %driver, "CSI driver name");
    register(&args, &driver, health_address, &shutdown).await
}

/// Connects to the driver (waiting for its socket) and asks GetPluginInfo within `timeout`.
async fn driver_name(csi_address: &str, timeout: Duration) -> anyhow::Result<String> {
    let endpoint: Endpoint = csi_address.parse()?;
    let connection = csi_client::connect(&endpoint, WAIT_FOR_DRIVER).await?;
    // No metrics are served: the registry only satisfies the client.
    let metrics = OperationMetrics::register(&mut prometheus_client::registry::Registry::default());
    let csi = CsiClient::new(&connection, timeout, metrics);
    Ok(csi.driver_info().await?.name)
}

/// Serves the registration socket (and `/healthz` on `health_address`) until shutdown or refusal; answers the exit
/// status. `csi-sidecars` runs it too, with the driver's name its one connection learnt.
pub async fn register(args: &Args, driver: &str, health_address: Option<String>, shutdown: &Shutdown) -> i32 {
    let socket = socket_path(&args.plugin_registration_path, driver);
    let listener = match registration_server::bind(&socket) {
        Ok(listener) => listener,
        Err(error) => {
            tracing::error!(%error, "cannot serve the registration socket");
            return 1;
        }
    };
    tracing::info!(socket = %socket.display(), "registration server started");
    let (refused, mut refusal) = mpsc::channel(1);
    let service = RegistrationService { info: plugin_info(driver, &args.kubelet_registration_path), refused };
    if let Some(address) = health_address {
        match health_server::serve(&address, socket.clone(), driver.to_string(), args.timeout).await {
            Ok(bound) => tracing::info!(address = %bound, "serving /healthz"),
            Err(error) => {
                tracing::error!(%error, "cannot serve /healthz");
                registration_server::remove(&socket);
                return 1;
            }
        }
    }
    let serving =
        tonic::transport::Server::builder().add_service(RegistrationServer::new(service)).serve_with_incoming_shutdown(
            UnixListenerStream::new(listener).map(|accepted| accepted.map(LocalAuthority::new)),
            shutdown.triggered(),
        );
    let status = tokio::select! {
        served = serving => match served {
            Ok(()) => 0,
            Err(error) => {
                tracing::error!(%error, "registration server stopped serving");
                1
            }
        },
        Some(_) = refusal.recv() => 1,
    };
    registration_server::remove(&socket);
    status
}
