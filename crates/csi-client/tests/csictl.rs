//! The csictl binary against an in-process plugin.

mod fake_plugin;

use std::process::Output;
use std::time::{Duration, Instant};

use fake_plugin::{FakePlugin, start};

async fn csictl(args: &[&str]) -> Output {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::process::Command::new(env!("CARGO_BIN_EXE_csictl")).args(args).output().await.unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test]
async fn info_as_json_names_the_driver() {
    let running = start(FakePlugin { name: "json.csi".into(), ..Default::default() });
    let socket = running.socket.display().to_string();
    let out = csictl(&["--endpoint", &socket, "info", "-o", "json"]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(info["name"], "json.csi");
    assert_eq!(info["vendor_version"], "1.0.0");
}

#[tokio::test]
async fn create_volume_prints_the_id_but_never_the_secret() {
    let running = start(FakePlugin { name: "create.csi".into(), ..Default::default() });
    let socket = format!("unix://{}", running.socket.display());
    let out = csictl(&[
        "--endpoint",
        &socket,
        "create-volume",
        "pvc-9",
        "--size",
        "1Gi",
        "--secret",
        "password=top-secret-value",
    ])
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("id-pvc-9"), "{stdout}");
    assert!(!stdout.contains("top-secret-value") && !text(&out.stderr).contains("top-secret-value"));
}

#[tokio::test]
async fn a_plugin_error_names_the_code_and_exits_non_zero() {
    let running = start(FakePlugin { name: "err.csi".into(), ..Default::default() });
    let socket = running.socket.display().to_string();
    // The fake plugin serves no DeleteVolume.
    let out = csictl(&["--endpoint", &socket, "delete-volume", "vol-1"]).await;
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(stderr.contains("code = Unimplemented"), "{stderr}");
    assert!(stderr.contains("/csi.v1.Controller/DeleteVolume"), "{stderr}");
}

#[tokio::test]
async fn a_missing_socket_fails_clearly_within_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("nothing-here.sock").display().to_string();
    let started = Instant::now();
    let out = csictl(&["--endpoint", &socket, "--timeout", "2s", "info"]).await;
    assert!(started.elapsed() < Duration::from_secs(8), "{:?}", started.elapsed());
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(stderr.contains("could not connect to CSI driver") && stderr.contains("nothing-here.sock"), "{stderr}");
}

#[tokio::test]
async fn bad_usage_is_rejected_by_name() {
    let out = csictl(&["create-volume"]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("<NAME>"), "{}", text(&out.stderr));
    let out = csictl(&["--endpoint", "tcp://1.2.3.4:5", "info"]).await;
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("only unix sockets"), "{}", text(&out.stderr));
}

#[tokio::test]
async fn publish_and_unpublish_name_their_calls() {
    let running = start(FakePlugin { name: "attach.csi".into(), ..Default::default() });
    let socket = running.socket.display().to_string();
    // The fake plugin serves neither: the error names the call that was made.
    for (args, method) in [
        (&["publish-volume", "vol-1", "--node-id", "n1"][..], "ControllerPublishVolume"),
        (&["unpublish-volume", "vol-1", "--node-id", "n1"][..], "ControllerUnpublishVolume"),
    ] {
        let mut argv = vec!["--endpoint", socket.as_str()];
        argv.extend(args);
        let out = csictl(&argv).await;
        assert!(!out.status.success());
        let stderr = text(&out.stderr);
        assert!(stderr.contains(&format!("/csi.v1.Controller/{method}")), "{stderr}");
    }
    let missing_node = csictl(&["--endpoint", &socket, "publish-volume", "vol-1"]).await;
    assert!(text(&missing_node.stderr).contains("--node-id"), "a node is required to publish");
}
