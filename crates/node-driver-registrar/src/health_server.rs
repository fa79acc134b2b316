//! `/healthz` of `--http-endpoint` (or `--health-port`): checks the registration socket the way the kubelet uses
//! it, by dialling it and asking GetInfo, and answers as [`crate::translate::health`] says.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use hyper_util::rt::TokioIo;
use sidecar_runtime::http::{HealthCheck, HttpError, serve_router};
use tokio::net::UnixStream;
use tonic::transport::Channel;

use crate::proto::InfoRequest;
use crate::proto::registration_client::RegistrationClient;
use crate::registration_server::socket_exists;
use crate::translate::health::{SocketCheck, answer};

/// Serves `/healthz` on `address` in the background; answers the bound address.
pub async fn serve(address: &str, socket: PathBuf, driver: String, timeout: Duration) -> Result<SocketAddr, HttpError> {
    let app = Router::new().route(
        "/healthz",
        get(move || {
            let (socket, driver) = (socket.clone(), driver.clone());
            async move {
                let answer = answer(&check(&socket, timeout).await, &driver);
                match answer.status {
                    200 => tracing::trace!("health check succeeded"),
                    _ => tracing::error!(reason = %answer.body, "health check failed"),
                }
                (StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR), answer.body)
            }
        }),
    );
    serve_router(address, app).await
}

/// The same check as one of several behind a shared `/healthz` (`csi-sidecars`): any failure answers 500 there.
pub fn socket_health_check(socket: PathBuf, driver: String, timeout: Duration) -> HealthCheck {
    Arc::new(move || {
        let (socket, driver) = (socket.clone(), driver.clone());
        Box::pin(async move {
            let answer = answer(&check(&socket, timeout).await, &driver);
            if answer.status == 200 { Ok(()) } else { Err(answer.body) }
        })
    })
}

/// What is at the registration socket: nothing, something unusable, or a server that answers GetInfo (within
/// `timeout`) with some name.
pub async fn check(socket: &Path, timeout: Duration) -> SocketCheck {
    match socket_exists(socket) {
        Ok(true) => {}
        Ok(false) => return SocketCheck::Missing,
        Err(error) => return SocketCheck::Unusable(error.to_string()),
    }
    match tokio::time::timeout(timeout, get_info(socket)).await {
        Ok(Ok(name)) => SocketCheck::Answered { name },
        Ok(Err(reason)) => SocketCheck::Unreachable(reason),
        Err(_) => SocketCheck::Unreachable(format!("no answer from node-registrar socket within {timeout:?}")),
    }
}

/// A client of the registration socket at `socket`, as the kubelet's plugin watcher dials it.
pub async fn registration_client(socket: &Path) -> Result<RegistrationClient<Channel>, String> {
    let path = socket.to_path_buf();
    let connector = tower::service_fn(move |_: tonic::transport::Uri| {
        let path = path.clone();
        async move { UnixStream::connect(path).await.map(TokioIo::new) }
    });
    // The URI is required by tonic but unused: the connector dials the socket.
    let channel = tonic::transport::Endpoint::from_static("http://registration.socket")
        .connect_with_connector(connector)
        .await
        .map_err(|e| format!("error connecting to node-registrar socket {}: {e}", socket.display()))?;
    Ok(RegistrationClient::new(channel))
}

async fn get_info(socket: &Path) -> Result<String, String> {
    let info = registration_client(socket)
        .await?
        .get_info(InfoRequest {})
        .await
        .map_err(|e| format!("error getting info from node-registrar socket: {}", e.message()))?;
    Ok(info.into_inner().name)
}
