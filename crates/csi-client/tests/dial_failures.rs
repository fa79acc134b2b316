//! While the plugin cannot be reached, each reason a dial fails for is logged by name at warning level (what a
//! sidecar shows at its default verbosity), at the first failure and when it changes, on real sockets: a missing
//! one, one nobody listens on, and one this user may not write to.

use std::io::Write;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use csi_client::{Endpoint, connect};

/// Log lines written while a test runs (its runtime is single-threaded, so the subscriber set for the thread sees
/// everything `connect` logs).
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Lines {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    fn still_connecting(&self) -> Vec<String> {
        self.text().lines().filter(|l| l.contains("still connecting to CSI driver")).map(str::to_string).collect()
    }
}

/// Runs `connect` against `socket` for `timeout` (it must fail) and returns what it logged at INFO and above.
async fn logged_while_connecting(socket: &Path, timeout: Duration) -> Lines {
    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let endpoint: Endpoint = socket.display().to_string().parse().unwrap();
    connect(&endpoint, timeout).await.expect_err("nothing can be connected to");
    lines
}

#[tokio::test]
async fn a_missing_socket_is_named_at_the_first_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("absent.sock");
    let started = Instant::now();
    let lines = logged_while_connecting(&socket, Duration::from_millis(2500)).await;
    let waiting = lines.still_connecting();
    assert_eq!(waiting.len(), 1, "one line in 2.5 s (the same reason is repeated every 5 s): {}", lines.text());
    assert!(waiting[0].contains("WARN"), "at warning level: {}", waiting[0]);
    assert!(waiting[0].contains("reason=\"no such file\""), "{}", waiting[0]);
    assert!(waiting[0].contains(&socket.display().to_string()), "{}", waiting[0]);
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn a_socket_nobody_listens_on_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("stale.sock");
    // A driver that exited leaves its socket file behind.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    let lines = logged_while_connecting(&socket, Duration::from_millis(1500)).await;
    let waiting = lines.still_connecting();
    assert_eq!(waiting.len(), 1, "{}", lines.text());
    assert!(waiting[0].contains("reason=\"connection refused\""), "{}", waiting[0]);
}

#[tokio::test]
async fn a_new_reason_is_logged_when_it_appears() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("later.sock");
    let stale = socket.clone();
    // The socket file appears (without a listener) after the first attempt.
    let appear = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    });
    let lines = logged_while_connecting(&socket, Duration::from_millis(3800)).await;
    appear.await.unwrap();
    let reasons: Vec<&str> = lines
        .still_connecting()
        .iter()
        .map(|l| if l.contains("no such file") { "no such file" } else { "connection refused" })
        .collect();
    assert_eq!(reasons, ["no such file", "connection refused"], "{}", lines.text());
}

/// A root driver's socket (mode 0755 by its umask) and a client that is not root: `connect(2)` needs write
/// permission, so it is refused. As root, the client is csictl run as user 65532 (root itself is never refused);
/// otherwise the socket is made read-only for its owner, this user.
#[tokio::test]
async fn a_socket_this_user_may_not_write_is_named_with_its_owner_and_mode() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let socket = dir.path().join("root-driver.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let as_root = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"));
    let mode = if as_root { 0o755 } else { 0o555 };
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(mode)).unwrap();

    let mut command = if as_root {
        let mut c = std::process::Command::new("setpriv");
        c.args(["--reuid=65532", "--regid=65532", "--clear-groups", env!("CARGO_BIN_EXE_csictl")]);
        c
    } else {
        std::process::Command::new(env!("CARGO_BIN_EXE_csictl"))
    };
    let socket_text = socket.display().to_string();
    let output = command
        .args(["--endpoint", &socket_text, "--timeout", "1500ms", "probe"])
        .env("CSICTL_LOG", "warn")
        .env("NO_COLOR", "1")
        .output()
        .expect("running csictl (setpriv from util-linux when root)");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    let line = stderr.lines().find(|l| l.contains("still connecting to CSI driver")).unwrap_or_else(|| {
        panic!("no still-connecting line: {stderr}");
    });
    assert!(line.contains("reason=\"permission denied\""), "{line}");
    assert!(line.contains(&format!("with mode {mode:04o}")), "{line}");
    if as_root {
        assert!(line.contains("owned by 0:0"), "{line}");
        assert!(line.contains("this process runs as 65532:65532"), "{line}");
    }
}
