//! csi-client against an in-process tonic plugin on a real unix socket.

mod fake_plugin;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use csi_client::proto;
use csi_client::{Call, CsiClient, Disposition, OperationMetrics, connect};
use fake_plugin::{FakePlugin, endpoint, serve, start};
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;
use tokio::net::UnixListener;

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
    assert_eq!(err.disposition_for(Call::CreateVolume), Disposition::InProgress, "{err}");
}

#[tokio::test]
async fn notices_a_plugin_that_dies_without_goodbye() {
    // The client talks to a proxy in front of the plugin; aborting the proxy
    // closes the socket abruptly, as a killed plugin process does.
    let running = start(FakePlugin { name: "killed.csi".into(), ..Default::default() });
    let front = running.dir.path().join("front.sock");
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
    assert_eq!(err.disposition_for(Call::CreateVolume), Disposition::Infeasible);

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
    let err =
        client.create_volume(proto::CreateVolumeRequest { name: "v".into(), ..Default::default() }).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    assert_eq!(err.code(), tonic::Code::DeadlineExceeded, "{err}");
    assert_eq!(err.disposition_for(Call::CreateVolume), Disposition::InProgress);
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
    assert_eq!(err.disposition_for(Call::DeleteVolume), Disposition::Final);
}

#[tokio::test]
async fn publish_and_unpublish_reach_the_controller_service_under_their_method_names() {
    let running = start(FakePlugin { name: "attach.csi".into(), ..Default::default() });
    let mut registry = Registry::default();
    let metrics = OperationMetrics::register(&mut registry);
    let connection = connect(&endpoint(&running.socket), Duration::from_secs(5)).await.unwrap();
    let client = CsiClient::new(&connection, Duration::from_secs(5), metrics);
    client.driver_info().await.unwrap();
    // The fake serves neither call: the answer and the metric show which RPC was asked.
    let publish = client.controller_publish_volume(proto::ControllerPublishVolumeRequest::default()).await;
    let unpublish = client.controller_unpublish_volume(proto::ControllerUnpublishVolumeRequest::default()).await;
    assert_eq!(publish.unwrap_err().code(), tonic::Code::Unimplemented);
    assert_eq!(unpublish.unwrap_err().code(), tonic::Code::Unimplemented);
    let text = metrics_text(&registry);
    for method in ["ControllerPublishVolume", "ControllerUnpublishVolume"] {
        let needle = format!(r#"method_name="/csi.v1.Controller/{method}",grpc_status_code="Unimplemented"}} 1"#);
        assert!(text.contains(&needle), "missing {needle}\n{text}");
    }
}

#[tokio::test]
async fn a_fenced_call_never_reaches_the_plugin() {
    let plugin = FakePlugin { name: "fenced.csi".into(), ..Default::default() };
    let running = start(plugin.clone());
    let connection = connect(&endpoint(&running.socket), Duration::from_secs(5)).await.unwrap();
    let open = Arc::new(Mutex::new(false));
    let gate = open.clone();
    let fence: csi_client::Fence =
        Arc::new(move || if *gate.lock().unwrap() { Ok(()) } else { Err("lease l last renewed 12s ago".to_string()) });
    let client = CsiClient::new(&connection, Duration::from_secs(5), OperationMetrics::default()).with_fence(fence);
    let request = || proto::CreateVolumeRequest {
        name: "v".into(),
        secrets: [("key".to_string(), "marker".to_string())].into(),
        ..Default::default()
    };
    let err = client.create_volume(request()).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unavailable, "{err}");
    assert!(err.to_string().contains("not called: lease l last renewed 12s ago"), "{err}");
    assert_eq!(err.disposition_for(Call::CreateVolume), Disposition::InProgress, "retried, never taken as final");
    assert!(plugin.seen_secrets.lock().unwrap().is_empty(), "the plugin saw no call");
    // Clones made after the fence keep it (with_timeout, as csi-sidecars gives each sidecar its own).
    assert!(client.with_timeout(Duration::from_secs(1)).create_volume(request()).await.is_err());
    *open.lock().unwrap() = true;
    client.create_volume(request()).await.unwrap();
    assert_eq!(*plugin.seen_secrets.lock().unwrap(), vec!["marker".to_string()]);
}
