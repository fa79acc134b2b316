//! The registrar's life, in upstream's order: flags checked, the driver's name asked (waiting for the driver as
//! long as it takes), the registration socket served with `/healthz` beside it, until SIGTERM/SIGINT (exit 0) or
//! the kubelet's refusal (exit 1). The socket is removed on either way out.
//!
//! Beside other sidecars (`csi-sidecars`), [`Config::from_args`] and [`start`] serve the same socket for the driver
//! the process's one connection learnt.

use std::time::Duration;

use csi_client::{CsiClient, OperationMetrics};
use sidecar_runtime::describe::Metrics;
use sidecar_runtime::{Beside, Described, Description, SetupError, Shutdown, Started};
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::UnixListenerStream;

use crate::authority::LocalAuthority;

use crate::flags::Args;
use crate::proto::registration_server::RegistrationServer;
use crate::registration_server::{self, RegistrationService};
use crate::translate::registration::{plugin_info, socket_path};
use crate::translate::startup::{MODE_REGISTRATION_PROBE, Startup, startup};
use crate::{VERSION, health_server};

/// The sidecar's name in `csi-sidecars --sidecars` and in its messages.
pub const NAME: &str = "registrar";

/// The flags, checked as the binary checks them.
pub struct Config {
    args: Args,
    health_address: Option<String>,
}

impl Config {
    /// The deprecated `--mode=kubelet-registration-probe`, under which the binary exits 0 at once, is refused: it
    /// is an exec probe's command, not a sidecar to run beside others.
    pub fn from_args(args: Args) -> Result<Config, SetupError> {
        match startup(&args).map_err(|e| SetupError::message(e.to_string()))? {
            Startup::ExitAsProbe => Err(SetupError::message(format!(
                "--mode={MODE_REGISTRATION_PROBE} is an exec probe of the csi-node-driver-registrar binary, not a \
                 mode csi-sidecars runs"
            ))),
            Startup::Register { health_address } => Ok(Config { args, health_address }),
        }
    }

    /// `--timeout`.
    pub fn timeout(&self) -> Duration {
        self.args.timeout
    }
}

/// Serves the registration socket of `driver` until `shutdown`, in a task whose end is the exit status. With
/// `--http-endpoint` (the process's) the socket check joins the process's `/healthz`; with `--health-port` it is
/// served alone there, as the binary does.
pub fn start(config: Config, driver: &str, shutdown: &Shutdown) -> Started {
    let Config { args, health_address } = config;
    let (own_address, check) = match args.http_endpoint.is_empty() {
        true => (health_address, None),
        false => {
            let socket = socket_path(&args.plugin_registration_path, driver);
            (None, Some(health_server::socket_health_check(socket, driver.to_string(), args.timeout)))
        }
    };
    let (driver, shutdown) = (driver.to_string(), shutdown.clone());
    let exit = tokio::spawn(async move { register(&args, &driver, own_address, &shutdown).await });
    Started::Serving { check, exit: Some(exit) }
}

/// csi-node-driver-registrar, as `csi-sidecars` and the e2e harness find it.
pub struct Registrar;

impl Described for Registrar {
    const DESCRIPTION: Description = Description {
        name: NAME,
        binary: "csi-node-driver-registrar",
        lease: None,
        rbac: None,
        metrics: Metrics::None,
    };
    type Args = Args;
    type Config = Config;

    fn from_args(args: Args) -> Result<Config, SetupError> {
        Config::from_args(args)
    }

    fn timeout(config: &Config) -> Duration {
        config.timeout()
    }

    async fn start(config: Config, beside: Beside<'_>) -> Result<Started, SetupError> {
        Ok(start(config, &beside.driver.name, beside.shutdown))
    }
}

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
    let connection = sidecar_runtime::wait_for_socket(csi_address).await?;
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
