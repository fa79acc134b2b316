//! The driver-probing health check (`sidecar_runtime::http::driver_health_router`), in process, against a driver
//! whose Probe says ready, says not ready, fails, or never answers.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use csi_client::proto::identity_server::{Identity, IdentityServer};
use csi_client::proto::{GetPluginInfoRequest, GetPluginInfoResponse, ProbeRequest, ProbeResponse};
use csi_client::{CsiClient, Endpoint, OperationMetrics};
use sidecar_runtime::http::driver_health_router;
use tower::ServiceExt as _;

/// What the fake driver's Probe does.
#[derive(Clone, Copy, Debug)]
enum Probe {
    Ready,
    NotReady,
    /// `ready` left out: ready, says the spec.
    Silent,
    Fails,
    Hangs,
}

#[derive(Clone)]
struct Driver {
    probe: Arc<Mutex<Probe>>,
}

#[tonic::async_trait]
impl Identity for Driver {
    async fn get_plugin_info(
        &self,
        _: tonic::Request<GetPluginInfoRequest>,
    ) -> Result<tonic::Response<GetPluginInfoResponse>, tonic::Status> {
        Ok(tonic::Response::new(GetPluginInfoResponse { name: "fake.csi".into(), ..Default::default() }))
    }

    async fn probe(&self, _: tonic::Request<ProbeRequest>) -> Result<tonic::Response<ProbeResponse>, tonic::Status> {
        let probe = *self.probe.lock().unwrap();
        match probe {
            Probe::Ready => Ok(tonic::Response::new(ProbeResponse { ready: Some(true) })),
            Probe::NotReady => Ok(tonic::Response::new(ProbeResponse { ready: Some(false) })),
            Probe::Silent => Ok(tonic::Response::new(ProbeResponse { ready: None })),
            Probe::Fails => Err(tonic::Status::failed_precondition("disk pool offline")),
            Probe::Hangs => std::future::pending().await,
        }
    }
}

#[tokio::test]
async fn healthz_answers_with_the_drivers_probe() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("csi.sock");
    let driver = Driver { probe: Arc::new(Mutex::new(Probe::Ready)) };
    let listener = tokio::net::UnixListener::bind(&socket).unwrap();
    let server = tonic::transport::Server::builder()
        .add_service(IdentityServer::new(driver.clone()))
        .serve_with_incoming(tokio_stream::wrappers::UnixListenerStream::new(listener));
    tokio::spawn(server);

    let endpoint: Endpoint = socket.display().to_string().parse().unwrap();
    let connection = csi_client::connect(&endpoint, Duration::from_secs(5)).await.unwrap();
    let metrics = OperationMetrics::register(&mut prometheus_client::registry::Registry::default());
    let probe_timeout = Duration::from_millis(300);
    let router = driver_health_router("/healthz", CsiClient::new(&connection, probe_timeout, metrics));

    // (what Probe does, status, body)
    let table = [
        (Probe::Ready, StatusCode::OK, "ok"),
        (Probe::Silent, StatusCode::OK, "ok"),
        (Probe::NotReady, StatusCode::INTERNAL_SERVER_ERROR, "driver responded but is not ready"),
        (
            Probe::Fails,
            StatusCode::INTERNAL_SERVER_ERROR,
            "rpc error: code = FailedPrecondition desc = disk pool offline",
        ),
        (
            Probe::Hangs,
            StatusCode::INTERNAL_SERVER_ERROR,
            "rpc error: code = DeadlineExceeded desc = context deadline exceeded",
        ),
        (Probe::Ready, StatusCode::OK, "ok"),
    ];
    for (probe, status, body) in table {
        *driver.probe.lock().unwrap() = probe;
        let response = router.clone().oneshot(Request::get("/healthz").body(Body::empty()).unwrap()).await.unwrap();
        let got_status = response.status();
        let got_body = axum::body::to_bytes(response.into_body(), 1 << 16).await.unwrap();
        assert_eq!((got_status, String::from_utf8_lossy(&got_body).as_ref()), (status, body), "{probe:?}");
    }
}
