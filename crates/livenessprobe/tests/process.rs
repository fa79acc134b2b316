//! livenessprobe as a process, against hostpath-plugin serving in the test, its Probe made to fail or hang by the
//! plugin's fault injection, and the plugin stopped and started again.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser as _;
use hostpath_plugin::flags::Flags;
use hostpath_plugin::{Plugin, server};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::oneshot;

struct Driver {
    dir: tempfile::TempDir,
    stop: Option<oneshot::Sender<()>>,
    served: Option<tokio::task::JoinHandle<()>>,
}

impl Driver {
    fn new() -> Self {
        Self { dir: tempfile::tempdir().unwrap(), stop: None, served: None }
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("csi.sock")
    }

    /// Replaces the plugin's fault rules (it reads the file again when it changes).
    fn set_faults(&self, json: &str) {
        let next = self.dir.path().join("faults.json.next");
        std::fs::write(&next, json).unwrap();
        std::fs::rename(&next, self.dir.path().join("faults.json")).unwrap();
    }

    /// Serves hostpath-plugin on the socket, as its command line would set it up.
    fn start(&mut self) {
        let state_dir = format!("--state-dir={}", self.dir.path().join("state").display());
        let faults = format!("--fault-config={}", self.dir.path().join("faults.json").display());
        let config =
            Flags::try_parse_from(["hostpath-plugin", "--node-id=node-1", &state_dir, &faults]).unwrap().config();
        let plugin = Plugin::open(config).unwrap();
        let listener = server::bind(&self.socket()).unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        self.stop = Some(stop);
        self.served = Some(tokio::spawn(async move {
            server::serve(plugin, listener, async {
                let _ = stopped.await;
            })
            .await
            .unwrap();
        }));
    }

    /// Stops serving; the socket stays, refusing connections, as after the driver's container died.
    async fn stop(&mut self) {
        if let (Some(stop), Some(served)) = (self.stop.take(), self.served.take()) {
            let _ = stop.send(());
            served.await.unwrap();
        }
    }
}

struct Probe {
    child: Child,
}

impl Probe {
    fn start(driver: &Driver, flags: &[&str]) -> Self {
        let child = Command::new(env!("CARGO_BIN_EXE_livenessprobe"))
            .arg(format!("--csi-address={}", driver.socket().display()))
            .args(flags)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        Self { child }
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// GET `path` on 127.0.0.1:`port`: status code and body; `None` when nothing listens.
async fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.ok()?;
    stream.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let status = response.split(' ').nth(1).and_then(|code| code.parse().ok()).unwrap_or(0);
    let body = response.split_once("\r\n\r\n").map(|(_, body)| body.to_string()).unwrap_or_default();
    Some((status, body))
}

/// Polls `/healthz` until it answers `status`; answers the body.
async fn healthz_until(port: u16, status: u16) -> String {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let answer = get(port, "/healthz").await;
        if let Some((got, body)) = &answer
            && *got == status
        {
            return body.clone();
        }
        assert!(Instant::now() < deadline, "/healthz never answered {status}; last: {answer:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn healthz_follows_the_drivers_probe() {
    let mut driver = Driver::new();
    let port = free_port();
    let _probe = Probe::start(&driver, &[&format!("--http-endpoint=127.0.0.1:{port}"), "--probe-timeout=1s"]);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(get(port, "/healthz").await, None, "nothing listens before the driver is there");

    driver.start();
    assert_eq!(healthz_until(port, 200).await, "ok");

    driver.set_faults(r#"{"Probe": {"code": "Unavailable", "message": "backend restarting"}}"#);
    assert_eq!(healthz_until(port, 500).await, "rpc error: code = Unavailable desc = backend restarting");

    // A Probe that outlasts --probe-timeout.
    driver.set_faults(r#"{"Probe": {"latency_ms": 10000}}"#);
    assert_eq!(healthz_until(port, 500).await, "rpc error: code = DeadlineExceeded desc = context deadline exceeded");
    driver.set_faults("{}");
    assert_eq!(healthz_until(port, 200).await, "ok");

    // The driver's process goes and comes back.
    driver.stop().await;
    let body = healthz_until(port, 500).await;
    assert!(body.contains("rpc error"), "{body}");
    driver.start();
    assert_eq!(healthz_until(port, 200).await, "ok");

    // With --http-endpoint, the Probe calls are in the metrics beside /healthz.
    let (status, metrics) = get(port, "/metrics").await.unwrap();
    assert_eq!(status, 200);
    let probes = metrics.lines().find(|l| l.starts_with("csi_sidecar_operations_seconds_count") && l.contains("Probe"));
    assert!(probes.is_some_and(|l| l.contains("driver_name=\"hostpath.csi.k8s.io\"")), "{metrics}");
}

#[tokio::test]
async fn health_port_and_separate_metrics_and_exits() {
    let mut driver = Driver::new();
    driver.start();
    let (health, metrics) = (free_port(), free_port());
    let mut probe =
        Probe::start(&driver, &[&format!("-health-port={health}"), &format!("-metrics-address=127.0.0.1:{metrics}")]);
    assert_eq!(healthz_until(health, 200).await, "ok");
    assert_eq!(get(health, "/metrics").await.unwrap().0, 404, "no metrics beside --health-port");
    let (status, text) = get(metrics, "/metrics").await.unwrap();
    assert!(status == 200 && text.contains("csi_sidecar_operations_seconds"), "{status} {text}");

    // SIGTERM ends it with 0.
    // SAFETY: kill has no memory effects; the pid is our child's.
    unsafe { libc::kill(probe.child.id() as libc::pid_t, libc::SIGTERM) };
    assert_eq!(probe.child.wait().unwrap().code(), Some(0));

    // Flags upstream refuses together.
    for flags in [&["-http-endpoint=:1", "-health-port=2"][..], &["-http-endpoint=:1", "-metrics-address=:2"]] {
        let status = Command::new(env!("CARGO_BIN_EXE_livenessprobe")).args(flags).stderr(Stdio::null()).status();
        assert_eq!(status.unwrap().code(), Some(1), "{flags:?}");
    }
    driver.stop().await;
}
