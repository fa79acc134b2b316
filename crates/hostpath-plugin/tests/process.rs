//! The built binary: Go-style flags, a stale socket, SIGTERM, and state kept across process restarts.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{GI, create_request, mount};
use csi_client::proto::controller_client::ControllerClient;
use csi_client::proto::identity_client::IdentityClient;
use csi_client::proto::{GetPluginInfoRequest, ListVolumesRequest};

const BINARY: &str = env!("CARGO_BIN_EXE_hostpath-plugin");

/// Starts the binary with its log in `log`, which the test prints if it fails.
fn spawn(args: &[String], log: &Path) -> Child {
    let log = std::fs::OpenOptions::new().create(true).append(true).open(log).unwrap();
    Command::new(BINARY).args(args).stdin(Stdio::null()).stdout(Stdio::null()).stderr(log).spawn().unwrap()
}

/// Prints the plugin's log when the test panics.
struct ShowLogOnFailure<'a>(&'a Path);

impl Drop for ShowLogOnFailure<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("plugin log:\n{}", std::fs::read_to_string(self.0).unwrap_or_default());
        }
    }
}

async fn connect(socket: &Path) -> tonic::transport::Channel {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let endpoint = tonic::transport::Endpoint::from_shared(format!("unix://{}", socket.display())).unwrap();
        match endpoint.connect().await {
            Ok(channel) => return channel,
            Err(e) if Instant::now() > deadline => panic!("plugin did not come up: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// Sends SIGTERM and waits for a clean exit. Waiting must not block the runtime: the plugin's graceful
/// shutdown needs the test's open connections to answer it.
async fn terminate(mut child: Child) {
    // SAFETY: kill(2) with a PID this test spawned and still owns (not yet reaped).
    let sent = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    assert_eq!(sent, 0);
    // Less than the plugin's 5 s drain timeout: open idle connections must not hold up the shutdown.
    let deadline = Instant::now() + Duration::from_secs(4);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "exit status {status}");
            return;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("plugin did not stop after SIGTERM");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn the_binary_takes_go_style_flags_keeps_state_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("csi.sock");
    let state = dir.path().join("state");
    let log = dir.path().join("plugin.log");
    let _show_log = ShowLogOnFailure(&log);
    // A socket file left behind by a killed plugin must not stop the next one.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    assert!(socket.exists());

    let args = vec![
        format!("-endpoint=unix://{}", socket.display()),
        format!("-statedir={}", state.display()),
        "-nodeid=process-node".to_string(),
        "-driver-name=process.csi.test".to_string(),
        "-v=5".to_string(),
    ];
    let child = spawn(&args, &log);
    let channel = connect(&socket).await;
    let info =
        IdentityClient::new(channel.clone()).get_plugin_info(GetPluginInfoRequest {}).await.unwrap().into_inner();
    assert_eq!(info.name, "process.csi.test");
    let created = ControllerClient::new(channel)
        .create_volume(create_request("survives", GI, mount()))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    terminate(child).await;
    assert!(!socket.exists(), "the socket is removed on shutdown");

    // Bare-path endpoint and long flags this time; the volume is still there.
    let args = vec![
        "--endpoint".to_string(),
        socket.display().to_string(),
        format!("--state-dir={}", state.display()),
        "--node-id=process-node".to_string(),
    ];
    let child = spawn(&args, &log);
    let listed =
        ControllerClient::new(connect(&socket).await).list_volumes(ListVolumesRequest::default()).await.unwrap();
    let ids: Vec<String> = listed.into_inner().entries.into_iter().map(|e| e.volume.unwrap().volume_id).collect();
    assert_eq!(ids, vec![created.volume_id]);
    terminate(child).await;
}

#[test]
fn the_binary_refuses_missing_required_flags() {
    let output = Command::new(BINARY).arg("--state-dir=/tmp/unused").output().unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("--node-id"));
}
