//! Connecting to the CSI driver as every upstream sidecar does at start: wait
//! for its socket as long as it takes (the driver container may start later
//! than ours), exit 1 if that connection is ever lost (the kubelet restarts us
//! next to the restarted driver), wait until Probe says ready, and learn the
//! driver's name, which names the Lease, the events and the metrics.
//!
//! A SIGTERM during that wait ends the process at once, as it ends upstream's: a pod whose driver never starts must
//! still stop when it is deleted, and there is nothing in flight to finish yet.

use std::time::Duration;

use csi_client::client::ProbeError;
use csi_client::connection::{self, ConnectError, EndpointError};
use csi_client::{Connection, CsiClient, Endpoint, OperationMetrics};

use crate::Sidecar;

/// How long to wait for the driver's socket (and, for the sidecars without a Lease, its name): in effect, forever,
/// as upstream's sidecars wait.
pub const WAIT_FOREVER: Duration = Duration::from_secs(365 * 24 * 3600);

#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    #[error(transparent)]
    Endpoint(#[from] EndpointError),
    #[error(transparent)]
    Connect(#[from] ConnectError),
    #[error(transparent)]
    Probe(#[from] ProbeError),
}

/// The connected, ready CSI driver.
pub struct Driver {
    pub connection: Connection,
    /// Calls under `--timeout`, measured in `csi_sidecar_operations_seconds`.
    pub csi: CsiClient,
    /// What GetPluginInfo answered.
    pub name: String,
}

impl Sidecar {
    /// Connects to the driver at `--csi-address` and registers the CSI
    /// operation metrics; every call then runs under `call_timeout`.
    pub async fn connect_driver(&mut self, call_timeout: Duration) -> Result<Driver, DriverError> {
        let endpoint: Endpoint = self.args().csi_address.parse()?;
        let metrics = OperationMetrics::register(self.registry());
        let shutdown = self.shutdown().clone();
        // Under leader election every call first asks whether this process may still act as the leader.
        let fence = self.args().leader_election.then(|| self.leader_status().fence());
        tokio::select! {
            driver = connect_and_probe(endpoint.clone(), call_timeout, metrics) => driver.map(|mut driver| {
                if let Some(fence) = fence {
                    driver.csi = driver.csi.with_fence(fence);
                }
                driver
            }),
            () = shutdown.triggered() => {
                tracing::info!(endpoint = %endpoint, "shutdown requested while waiting for the CSI driver, exiting");
                std::process::exit(0)
            }
        }
    }
}

/// Waits for the socket at `csi_address` as long as it takes.
pub async fn wait_for_socket(csi_address: &str) -> Result<Connection, DriverError> {
    let endpoint: Endpoint = csi_address.parse()?;
    Ok(connection::connect(&endpoint, WAIT_FOREVER).await?)
}

/// Waits for the driver and asks its name, both as long as it takes, as upstream's livenessprobe does: no Probe,
/// and a lost connection is dialled again rather than ending the process. The client's calls then run under
/// `call_timeout`.
pub async fn wait_for_driver(
    csi_address: &str,
    call_timeout: Duration,
    metrics: OperationMetrics,
) -> Result<Driver, DriverError> {
    let connection = wait_for_socket(csi_address).await?;
    let csi = CsiClient::new(&connection, call_timeout, metrics);
    let name = csi.with_timeout(WAIT_FOREVER).driver_info().await?.name;
    Ok(Driver { connection, csi, name })
}

/// Waits for the socket, then for Probe to say ready, and asks the driver's name.
async fn connect_and_probe(
    endpoint: Endpoint,
    call_timeout: Duration,
    metrics: OperationMetrics,
) -> Result<Driver, DriverError> {
    let connection = connection::connect(&endpoint, WAIT_FOREVER).await?;
    let watched = connection.clone();
    tokio::spawn(async move {
        watched.lost().await;
        connection::exit_on_connection_loss(&watched.endpoint);
    });
    let csi = CsiClient::new(&connection, call_timeout, metrics);
    csi.probe_until_ready().await?;
    let name = csi.driver_info().await?.name;
    tracing::info!(driver = %name, "detected CSI driver");
    Ok(Driver { connection, csi, name })
}
