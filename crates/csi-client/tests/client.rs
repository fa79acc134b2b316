//! csi-client against an in-process tonic plugin on a real unix socket.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use csi_client::proto::{self, controller_server, identity_server};
use csi_client::{CsiClient, Disposition, Endpoint, OperationMetrics, connect};
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;
use tokio::net::UnixListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::{Request, Response, Status};

/// A plugin whose answers each test scripts.
#[derive(Clone, Default)]
struct FakePlugin {
    name: String,
    probes: Arc<Mutex<VecDeque<Result<Option<bool>, tonic::Code>>>>,
    create_delay: Duration,
    seen_secrets: Arc<Mutex<Vec<String>>>,
}

#[tonic::async_trait]
impl identity_server::Identity for FakePlugin {
    async fn get_plugin_info(
        &self,
        _: Request<proto::GetPluginInfoRequest>,
    ) -> Result<Response<proto::GetPluginInfoResponse>, Status> {
        Ok(Response::new(proto::GetPluginInfoResponse {
            name: self.name.clone(),
            vendor_version: "1.0.0".into(),
            manifest: Default::default(),
        }))
    }

    async fn probe(&self, _: Request<proto::ProbeRequest>) -> Result<Response<proto::ProbeResponse>, Status> {
        let next = self.probes.lock().unwrap().pop_front().unwrap_or(Ok(Some(true)));
        match next {
            Ok(ready) => Ok(Response::new(proto::ProbeResponse { ready })),
            Err(code) => Err(Status::new(code, "scripted probe failure")),
        }
    }
}

#[tonic::async_trait]
impl controller_server::Controller for FakePlugin {
    async fn create_volume(
        &self,
        request: Request<proto::CreateVolumeRequest>,
    ) -> Result<Response<proto::CreateVolumeResponse>, Status> {
        tokio::time::sleep(self.create_delay).await;
        let request = request.into_inner();
        self.seen_secrets.lock().unwrap().extend(request.secrets.values().cloned());
        if request.name.is_empty() {
            return Err(Status::invalid_argument("name missing"));
        }
        Ok(Response::new(proto::CreateVolumeResponse {
            volume: Some(proto::Volume { volume_id: format!("id-{}", request.name), capacity_bytes: 1, ..Default::default() }),
        }))
    }
}

struct Running {
    _dir: tempfile::TempDir,
    socket: PathBuf,
    stop: Option<oneshot::Sender<()>>,
    server: JoinHandle<()>,
}

impl Running {
    /// Stops the plugin the way an exiting process does: its connections close.
    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.server.await.unwrap();
    }
}

fn serve(plugin: FakePlugin, socket: &Path) -> (oneshot::Sender<()>, JoinHandle<()>) {
    let listener = UnixListener::bind(socket).unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(identity_server::IdentityServer::new(plugin.clone()))
            .add_service(controller_server::ControllerServer::new(plugin))
            .serve_with_incoming_shutdown(UnixListenerStream::new(listener), async {
                let _ = stopped.await;
            })
            .await
            .unwrap();
    });
    (stop, server)
}

fn start(plugin: FakePlugin) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("csi.sock");
    let (stop, server) = serve(plugin, &socket);
    Running { _dir: dir, socket, stop: Some(stop), server }
}

fn endpoint(socket: &Path) -> Endpoint {
    format!("unix://{}", socket.display()).parse().unwrap()
}

fn metrics_text(registry: &Registry) -> String {
    let mut out = String::new();
    encode(&mut out, registry).unwrap();
    out
}

#[tokio::test]
async fn missing_socket_fails_within_the_timeout_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("absent.sock");
    let started = Instant::now();
    let err = connect(&endpoint(&socket), Duration::from_millis(1500)).await.unwrap_err();
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(1400) && waited < Duration::from_secs(5), "{waited:?}");
    let text = err.to_string();
    assert!(text.contains("could not connect to CSI driver"), "{text}");
    assert!(text.contains(&socket.display().to_string()), "{text}");
}

#[tokio::test]
async fn waits_for_a_plugin_that_starts_late() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("late.sock");
    let late = socket.clone();
    let server = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(1200)).await;
        let (_stop, server) = serve(FakePlugin { name: "late.csi".into(), ..Default::default() }, &late);
        server.await.unwrap();
    });
    let connection = connect(&endpoint(&socket), Duration::from_secs(10)).await.unwrap();
    let client = CsiClient::new(&connection, Duration::from_secs(5), OperationMetrics::default());
    assert_eq!(client.driver_info().await.unwrap().name, "late.csi");
    server.abort();
}

#[tokio::test]
async fn notices_when_the_plugin_goes_away() {
    let running = start(FakePlugin { name: "gone.csi".into(), ..Default::default() });
    let connection = connect(&endpoint(&running.socket), Duration::from_secs(5)).await.unwrap();
    let client = CsiClient::new(&connection, Duration::from_secs(5), OperationMetrics::default());
    client.driver_info().await.unwrap();
    assert!(!connection.is_lost());

    running.stop().await;
    tokio::time::timeout(Duration::from_secs(5), connection.lost()).await.expect("loss not noticed");
    assert!(connection.is_lost());
    // A call after the loss fails as in-progress (not a definite answer).
    let err = client.probe().await.unwrap_err();
    assert_eq!(err.disposition(), Disposition::InProgress, "{err}");
}

#[tokio::test]
async fn notices_a_plugin_that_dies_without_goodbye() {
    // The client talks to a proxy in front of the plugin; aborting the proxy
    // closes the socket abruptly, as a killed plugin process does.
    let running = start(FakePlugin { name: "killed.csi".into(), ..Default::default() });
    let front = running._dir.path().join("front.sock");
    let listener = UnixListener::bind(&front).unwrap();
    let backend = running.socket.clone();
    let proxy = tokio::spawn(async move {
        let (mut client_side, _) = listener.accept().await.unwrap();
        let mut plugin_side = tokio::net::UnixStream::connect(backend).await.unwrap();
        let _ = tokio::io::copy_bidirectional(&mut client_side, &mut plugin_side).await;
    });
    let connection = connect(&endpoint(&front), Duration::from_secs(5)).await.unwrap();
    let client = CsiClient::new(&connection, Duration::from_secs(5), OperationMetrics::default());
    client.driver_info().await.unwrap();
    assert!(!connection.is_lost());

    proxy.abort();
    tokio::time::timeout(Duration::from_secs(5), connection.lost()).await.expect("loss not noticed");
}

#[tokio::test]
async fn calls_are_measured_with_upstream_labels() {
    let running = start(FakePlugin { name: "metrics.csi".into(), ..Default::default() });
    let mut registry = Registry::default();
    let metrics = OperationMetrics::register(&mut registry);
    let connection = connect(&endpoint(&running.socket), Duration::from_secs(5)).await.unwrap();
    let client = CsiClient::new(&connection, Duration::from_secs(5), metrics);

    client.driver_info().await.unwrap();
    client.create_volume(proto::CreateVolumeRequest { name: "v1".into(), ..Default::default() }).await.unwrap();
    let err = client.create_volume(proto::CreateVolumeRequest::default()).await.unwrap_err();
    assert_eq!(err.disposition(), Disposition::Infeasible);

    let text = metrics_text(&registry);
    for needle in [
        r#"csi_sidecar_operations_seconds_count{driver_name="unknown-driver",method_name="/csi.v1.Identity/GetPluginInfo",grpc_status_code="OK"} 1"#,
        r#"csi_sidecar_operations_seconds_count{driver_name="metrics.csi",method_name="/csi.v1.Controller/CreateVolume",grpc_status_code="OK"} 1"#,
        r#"csi_sidecar_operations_seconds_count{driver_name="metrics.csi",method_name="/csi.v1.Controller/CreateVolume",grpc_status_code="InvalidArgument"} 1"#,
    ] {
        assert!(text.contains(needle), "missing {needle}\n{text}");
    }
}

#[tokio::test]
async fn a_slow_call_times_out_as_deadline_exceeded() {
    let plugin = FakePlugin { name: "slow.csi".into(), create_delay: Duration::from_secs(3), ..Default::default() };
    let running = start(plugin);
    let mut registry = Registry::default();
    let metrics = OperationMetrics::register(&mut registry);
    let connection = connect(&endpoint(&running.socket), Duration::from_secs(5)).await.unwrap();
    let client = CsiClient::new(&connection, Duration::from_millis(300), metrics);

    let started = Instant::now();
    let err = client.create_volume(proto::CreateVolumeRequest { name: "v".into(), ..Default::default() }).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    assert_eq!(err.code(), tonic::Code::DeadlineExceeded, "{err}");
    assert_eq!(err.disposition(), Disposition::InProgress);
    assert!(metrics_text(&registry).contains(r#"grpc_status_code="DeadlineExceeded"} 1"#));
}

#[tokio::test]
async fn probe_retries_until_ready_and_stops_on_a_real_error() {
    let probes = VecDeque::from([Ok(Some(false)), Err(tonic::Code::DeadlineExceeded), Ok(None)]);
    let plugin = FakePlugin { name: "probe.csi".into(), probes: Arc::new(Mutex::new(probes)), ..Default::default() };
    let running = start(plugin.clone());
    let connection = connect(&endpoint(&running.socket), Duration::from_secs(5)).await.unwrap();
    let client = CsiClient::new(&connection, Duration::from_secs(5), OperationMetrics::default());
    client.probe_until_ready().await.unwrap();
    assert!(plugin.probes.lock().unwrap().is_empty(), "every scripted probe was used");

    plugin.probes.lock().unwrap().push_back(Err(tonic::Code::FailedPrecondition));
    let err = client.probe_until_ready().await.unwrap_err();
    assert!(err.to_string().contains("FailedPrecondition"), "{err}");
}

#[tokio::test]
async fn secrets_reach_the_plugin_but_not_the_log_format() {
    let plugin = FakePlugin { name: "secret.csi".into(), ..Default::default() };
    let running = start(plugin.clone());
    let connection = connect(&endpoint(&running.socket), Duration::from_secs(5)).await.unwrap();
    let client = CsiClient::new(&connection, Duration::from_secs(5), OperationMetrics::default());
    let request = proto::CreateVolumeRequest {
        name: "v".into(),
        secrets: [("password".to_string(), "s3cr3t-value".to_string())].into(),
        ..Default::default()
    };
    assert!(!format!("{request:?}").contains("s3cr3t-value"));
    client.create_volume(request).await.unwrap();
    assert_eq!(*plugin.seen_secrets.lock().unwrap(), vec!["s3cr3t-value".to_string()]);
}

#[tokio::test]
async fn unimplemented_services_answer_unimplemented() {
    let running = start(FakePlugin { name: "partial.csi".into(), ..Default::default() });
    let connection = connect(&endpoint(&running.socket), Duration::from_secs(5)).await.unwrap();
    let client = CsiClient::new(&connection, Duration::from_secs(5), OperationMetrics::default());
    let err = client.delete_volume(proto::DeleteVolumeRequest::default()).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unimplemented);
    assert_eq!(err.disposition(), Disposition::Final);
}
