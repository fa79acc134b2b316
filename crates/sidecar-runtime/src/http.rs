//! The HTTP endpoint of `--http-endpoint`: Prometheus metrics on
//! `--metrics-path`, `/healthz`, and `/healthz/leader-election` (client-go's
//! health adaptor: failing only while this process leads but has not managed to
//! renew for the lease duration plus 20 s). With the deprecated
//! `--metrics-address` only metrics are served, as upstream.
//!
//! Also the pieces other HTTP servers are made of: [`listen`] with Go's address
//! forms, [`metrics_router`], [`serve_router`], and [`driver_health_router`], a
//! health check that asks the CSI driver's Probe (livenessprobe's `/healthz`),
//! for any sidecar that wants more than "the process answers".

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::future::BoxFuture;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

use csi_client::{CallError, CsiClient};

use crate::flags::CommonArgs;
use crate::leader_election::{HEALTH_TOLERANCE, LeaderStatus};

/// OpenMetrics text, which `prometheus-client` writes and Prometheus reads.
const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("listening on {address}: {source}")]
    Listen { address: String, source: std::io::Error },
}

/// What the endpoint serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpOptions {
    /// `host:port`, Go style: `:8080` means every interface.
    pub address: String,
    pub metrics_path: String,
    /// False for `--metrics-address`, which serves metrics only.
    pub health: bool,
}

impl HttpOptions {
    /// `None` when neither `--http-endpoint` nor `--metrics-address` is set.
    pub fn from_args(args: &CommonArgs) -> Option<HttpOptions> {
        let address = args.http_address()?;
        Some(HttpOptions {
            address: address.to_string(),
            metrics_path: args.metrics_path.clone(),
            health: !args.metrics_only(),
        })
    }
}

/// One check of a `/healthz`: `Ok`, or the reason it fails (the answer's body).
pub type HealthCheck = Arc<dyn Fn() -> BoxFuture<'static, Result<(), String>> + Send + Sync>;

#[derive(Clone)]
struct AppState {
    registry: Arc<Registry>,
    leader: Option<LeaderStatus>,
    checks: Arc<[HealthCheck]>,
}

/// The routes. `leader` is the elector's status when leader election is on;
/// `/healthz/leader-election` is only served then, as csi-lib-utils does. `/healthz` answers `ok` when every one of
/// `checks` passes (none: the process answers, as upstream's sidecars), else 500 with the first failure's reason.
pub fn router(
    options: &HttpOptions,
    registry: Arc<Registry>,
    leader: Option<LeaderStatus>,
    checks: Vec<HealthCheck>,
) -> Router {
    let mut router = Router::new().route(&options.metrics_path, get(metrics));
    if options.health {
        router = router.route("/healthz", get(health));
        if leader.is_some() {
            router = router.route("/healthz/leader-election", get(leader_election_health));
        }
    }
    router.with_state(AppState { registry, leader, checks: checks.into() })
}

/// Prometheus metrics on `path`, alone.
pub fn metrics_router(path: &str, registry: Arc<Registry>) -> Router {
    Router::new().route(path, get(metrics)).with_state(AppState { registry, leader: None, checks: Arc::new([]) })
}

/// `path` answers with the driver's Probe, called through `csi` (whose timeout bounds it): 200 `ok` when the
/// driver is ready, 500 with the reason when it is not, fails or does not answer in time. As kubernetes-csi
/// livenessprobe's `/healthz`, which kubelet liveness probes point at.
pub fn driver_health_router(path: &str, csi: CsiClient) -> Router {
    let state = AppState { registry: Arc::default(), leader: None, checks: Arc::new([driver_probe_check(csi)]) };
    Router::new().route(path, get(health)).with_state(state)
}

/// The driver's Probe through `csi` (whose timeout bounds it) as a [`HealthCheck`], failing as
/// [`driver_health_router`] answers.
pub fn driver_probe_check(csi: CsiClient) -> HealthCheck {
    Arc::new(move || {
        let csi = csi.clone();
        Box::pin(async move {
            match probe_answer(&csi.probe().await) {
                (StatusCode::OK, _) => Ok(()),
                (_, reason) => Err(reason),
            }
        })
    })
}

async fn health(State(state): State<AppState>) -> (StatusCode, String) {
    health_answer(&state.checks, crate::watch::dead_watch()).await
}

/// Not ok while a watch cache is dead (`dead`: why), then every check in order; the first failure is the answer.
pub(crate) async fn health_answer(checks: &[HealthCheck], dead: Option<String>) -> (StatusCode, String) {
    if let Some(reason) = dead {
        tracing::error!(%reason, "health check failed");
        return (StatusCode::INTERNAL_SERVER_ERROR, reason);
    }
    for check in checks.iter() {
        if let Err(reason) = check().await {
            tracing::error!(%reason, "health check failed");
            return (StatusCode::INTERNAL_SERVER_ERROR, reason);
        }
    }
    if !checks.is_empty() {
        tracing::trace!("health check succeeded");
    }
    (StatusCode::OK, "ok".to_string())
}

/// The HTTP answer for one Probe's outcome; an error reads as grpc-go prints it, as upstream's body does.
fn probe_answer(outcome: &Result<bool, CallError>) -> (StatusCode, String) {
    match outcome {
        Ok(true) => (StatusCode::OK, "ok".to_string()),
        Ok(false) => (StatusCode::INTERNAL_SERVER_ERROR, "driver responded but is not ready".to_string()),
        Err(error) => (StatusCode::INTERNAL_SERVER_ERROR, error.go_text()),
    }
}

/// Binds `options.address` and serves in a background task until the process
/// ends (health checks must keep answering while work drains). Returns the
/// bound address, useful with port 0.
pub async fn serve(
    options: &HttpOptions,
    registry: Arc<Registry>,
    leader: Option<LeaderStatus>,
    checks: Vec<HealthCheck>,
) -> Result<SocketAddr, HttpError> {
    let address = serve_router(&options.address, router(options, registry, leader, checks)).await?;
    tracing::info!(%address, metrics = %options.metrics_path, "serving HTTP");
    Ok(address)
}

/// Binds `address` (Go's forms, see [`listen`]) and serves `app` in a background task until the process ends.
/// Returns the bound address, useful with port 0.
pub async fn serve_router(address: &str, app: Router) -> Result<SocketAddr, HttpError> {
    let listener = listen(address).await?;
    let bound = listener.local_addr().map_err(|source| HttpError::Listen { address: address.to_string(), source })?;
    tokio::spawn(async move {
        if let Err(err) = axum::serve(listener, app).await {
            tracing::error!(error = %err, "HTTP server failed");
        }
    });
    Ok(bound)
}

/// Go's `net.Listen("tcp", ":8080")` listens on every interface; so does this,
/// preferring dual-stack and falling back to IPv4 where IPv6 is off.
pub async fn listen(address: &str) -> Result<TcpListener, HttpError> {
    let error = |source| HttpError::Listen { address: address.to_string(), source };
    match address.strip_prefix(':') {
        Some(port) => match TcpListener::bind(format!("[::]:{port}")).await {
            Ok(listener) => Ok(listener),
            Err(_) => TcpListener::bind(format!("0.0.0.0:{port}")).await.map_err(error),
        },
        None => TcpListener::bind(address).await.map_err(error),
    }
}

async fn metrics(State(state): State<AppState>) -> Response {
    let mut body = String::new();
    match prometheus_client::encoding::text::encode(&mut body, &state.registry) {
        Ok(()) => ([(header::CONTENT_TYPE, METRICS_CONTENT_TYPE)], body).into_response(),
        Err(err) => (StatusCode::INTERNAL_SERVER_ERROR, format!("encoding metrics: {err}")).into_response(),
    }
}

async fn leader_election_health(State(state): State<AppState>) -> Response {
    let Some(leader) = &state.leader else { return "ok".into_response() };
    match leader.check(Instant::now(), HEALTH_TOLERANCE) {
        Ok(()) => "ok".into_response(),
        Err(reason) => {
            tracing::warn!(%reason, "leader-election health check failed");
            (StatusCode::SERVICE_UNAVAILABLE, format!("leader-election failed: {reason}")).into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::Request;
    use prometheus_client::metrics::counter::Counter;
    use tower::ServiceExt;

    use super::*;

    fn options(health: bool) -> HttpOptions {
        HttpOptions { address: "127.0.0.1:0".into(), metrics_path: "/metrics".into(), health }
    }

    fn registry() -> Arc<Registry> {
        let mut registry = Registry::default();
        let counter = Counter::<u64>::default();
        counter.inc();
        registry.register("csi_sidecar_test", "A test counter", counter);
        Arc::new(registry)
    }

    async fn get(router: &Router, path: &str) -> (StatusCode, String) {
        let request = Request::get(path).body(Body::empty()).unwrap();
        let response = router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
        (status, String::from_utf8(bytes.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn routes() {
        let leader = LeaderStatus::new();
        let router = router(&options(true), registry(), Some(leader.clone()), Vec::new());
        let (status, body) = get(&router, "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        assert!(body.contains("csi_sidecar_test_total 1"), "{body}");
        assert_eq!(get(&router, "/healthz").await, (StatusCode::OK, "ok".into()));
        assert_eq!(get(&router, "/healthz/leader-election").await, (StatusCode::OK, "ok".into()));
        assert_eq!(get(&router, "/nope").await.0, StatusCode::NOT_FOUND);
    }

    #[tokio::test]
    async fn an_overdue_leader_is_unhealthy() {
        let leader = LeaderStatus::new();
        leader.elector_started("lock", std::time::Duration::from_secs(1), std::time::Duration::from_millis(500));
        leader.renewed(Instant::now() - std::time::Duration::from_secs(60));
        let router = router(&options(true), registry(), Some(leader), Vec::new());
        let (status, body) = get(&router, "/healthz/leader-election").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(body.contains("lock"), "{body}");
    }

    #[tokio::test]
    async fn metrics_address_serves_metrics_only_and_paths_follow_the_flag() {
        let mut only = options(false);
        only.metrics_path = "/custom".into();
        let router = router(&only, registry(), Some(LeaderStatus::new()), Vec::new());
        assert_eq!(get(&router, "/custom").await.0, StatusCode::OK);
        assert_eq!(get(&router, "/metrics").await.0, StatusCode::NOT_FOUND);
        assert_eq!(get(&router, "/healthz").await.0, StatusCode::NOT_FOUND);
        let no_election = super::router(&options(true), registry(), None, Vec::new());
        assert_eq!(get(&no_election, "/healthz/leader-election").await.0, StatusCode::NOT_FOUND);
    }

    fn check(outcome: Result<(), &'static str>) -> HealthCheck {
        Arc::new(move || Box::pin(async move { outcome.map_err(str::to_string) }))
    }

    #[tokio::test]
    async fn healthz_passes_only_when_every_check_does() {
        // (checks, answer)
        let table: [(Vec<HealthCheck>, (StatusCode, &str)); 4] = [
            (vec![], (StatusCode::OK, "ok")),
            (vec![check(Ok(())), check(Ok(()))], (StatusCode::OK, "ok")),
            (vec![check(Ok(())), check(Err("socket gone"))], (StatusCode::INTERNAL_SERVER_ERROR, "socket gone")),
            (
                vec![check(Err("not ready")), check(Err("socket gone"))],
                (StatusCode::INTERNAL_SERVER_ERROR, "not ready"),
            ),
        ];
        for (checks, (status, body)) in table {
            let router = router(&options(true), registry(), None, checks);
            assert_eq!(get(&router, "/healthz").await, (status, body.to_string()));
            assert_eq!(get(&router, "/metrics").await.0, StatusCode::OK, "metrics answer whatever the checks say");
        }
    }

    #[test]
    fn a_driver_probe_becomes_an_http_answer() {
        let unavailable = CallError::Status {
            method: "/csi.v1.Identity/Probe",
            status: tonic::Status::unavailable("backend restarting"),
        };
        let late = CallError::Timeout { method: "/csi.v1.Identity/Probe", timeout: std::time::Duration::from_secs(1) };
        // (Probe's outcome, status, body)
        let table = [
            (Ok(true), StatusCode::OK, "ok"),
            (Ok(false), StatusCode::INTERNAL_SERVER_ERROR, "driver responded but is not ready"),
            (
                Err(unavailable),
                StatusCode::INTERNAL_SERVER_ERROR,
                "rpc error: code = Unavailable desc = backend restarting",
            ),
            (
                Err(late),
                StatusCode::INTERNAL_SERVER_ERROR,
                "rpc error: code = DeadlineExceeded desc = context deadline exceeded",
            ),
        ];
        for (outcome, status, body) in table {
            assert_eq!(probe_answer(&outcome), (status, body.to_string()), "{outcome:?}");
        }
    }

    #[tokio::test]
    async fn serves_over_tcp() {
        let address = serve(&options(true), registry(), None, Vec::new()).await.unwrap();
        let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
        assert!(response.ends_with("ok"), "{response}");
    }
}
