//! The built binary with `--proxy-endpoint`, as Kubernetes' csi-mock-proxy.yaml runs it: connections on the CSI
//! socket paired one to one with connections on the TCP port, bytes copied both ways, a close on either side closing
//! both, and a CSI driver on the TCP side answering a client of the socket.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser as _;
use csi_client::proto::GetPluginInfoRequest;
use csi_client::proto::identity_client::IdentityClient;
use csi_client::proto::identity_server::IdentityServer;
use hostpath_plugin::Plugin;
use hostpath_plugin::flags::Flags;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpStream, UnixStream};

const BINARY: &str = env!("CARGO_BIN_EXE_hostpath-plugin");

/// The proxy process; killed when dropped (a test that passes stops it with SIGTERM first).
struct Proxy {
    child: Child,
    port: u16,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the binary with the manifest's flags (Go style, no state directory) on a free port of 127.0.0.1.
fn start(socket: &Path, log: &Path) -> Proxy {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let log = std::fs::File::create(log).unwrap();
    let child = Command::new(BINARY)
        .args(["-v=5", "-nodeid=proxy-node"])
        .arg(format!("-endpoint={}", socket.display()))
        .arg(format!("-proxy-endpoint=tcp://127.0.0.1:{port}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    Proxy { child, port }
}

/// Waits until both listeners are up: the socket file exists and the port takes a connection (which is returned,
/// waiting in the backlog as e2e.test's connections opened ahead do).
async fn ready(proxy: &Proxy, socket: &Path) -> TcpStream {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if socket.exists()
            && let Ok(tcp) = TcpStream::connect(("127.0.0.1", proxy.port)).await
        {
            return tcp;
        }
        assert!(Instant::now() < deadline, "the proxy did not come up");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn read_some(stream: &mut (impl tokio::io::AsyncRead + Unpin)) -> Vec<u8> {
    let mut buf = vec![0; 64];
    let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await.expect("read timed out").unwrap();
    buf.truncate(n);
    buf
}

/// Reads until end of stream (0 bytes) or an error, which is how a closed peer shows.
async fn closed(stream: &mut (impl tokio::io::AsyncRead + Unpin)) -> bool {
    let mut buf = [0; 64];
    match tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await {
        Ok(Ok(0)) | Ok(Err(_)) => true,
        Ok(Ok(_)) | Err(_) => false,
    }
}

async fn terminate(mut proxy: Proxy, socket: &Path) {
    // SAFETY: kill(2) with a PID this test spawned and has not reaped.
    assert_eq!(unsafe { libc::kill(proxy.child.id() as libc::pid_t, libc::SIGTERM) }, 0);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(status) = proxy.child.try_wait().unwrap() {
            assert!(status.success(), "exit status {status}");
            break;
        }
        assert!(Instant::now() < deadline, "the proxy did not stop after SIGTERM");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!socket.exists(), "the socket is removed on shutdown");
}

#[tokio::test]
async fn pairs_connections_one_to_one_and_closes_both_sides() {
    let dir = tempfile::tempdir().unwrap();
    let (socket, log) = (dir.path().join("csi.sock"), dir.path().join("proxy.log"));
    let proxy = start(&socket, &log);
    // Three TCP connections opened ahead, before any client of the socket, as e2e.test opens them.
    let mut t1 = ready(&proxy, &socket).await;
    let mut t2 = TcpStream::connect(("127.0.0.1", proxy.port)).await.unwrap();
    let mut t3 = TcpStream::connect(("127.0.0.1", proxy.port)).await.unwrap();

    // The first client of the socket gets the first TCP connection, both ways.
    let mut u1 = UnixStream::connect(&socket).await.unwrap();
    u1.write_all(b"one").await.unwrap();
    assert_eq!(read_some(&mut t1).await, b"one");
    t1.write_all(b"reply one").await.unwrap();
    assert_eq!(read_some(&mut u1).await, b"reply one");

    // The second gets the second; nothing of it reaches the first pair.
    let mut u2 = UnixStream::connect(&socket).await.unwrap();
    u2.write_all(b"two").await.unwrap();
    assert_eq!(read_some(&mut t2).await, b"two");
    t2.write_all(b"reply two").await.unwrap();
    assert_eq!(read_some(&mut u2).await, b"reply two");

    // The socket's client closing closes the TCP side; the TCP side closing closes the socket's client.
    drop(u1);
    assert!(closed(&mut t1).await, "the TCP connection of a closed socket connection is closed");
    drop(t2);
    assert!(closed(&mut u2).await, "the socket connection of a closed TCP connection is closed");

    // A pair made after those closed works as well: the listeners stayed open.
    let mut u3 = UnixStream::connect(&socket).await.unwrap();
    u3.write_all(b"three").await.unwrap();
    assert_eq!(read_some(&mut t3).await, b"three");
    terminate(proxy, &socket).await;
}

#[tokio::test]
async fn a_csi_driver_behind_the_port_answers_a_client_of_the_socket() {
    let dir = tempfile::tempdir().unwrap();
    let (socket, log) = (dir.path().join("csi.sock"), dir.path().join("proxy.log"));
    let proxy = start(&socket, &log);
    let tcp = ready(&proxy, &socket).await;

    // The driver serves gRPC on the connection it opened to the port, as e2e.test's embedded mock driver does.
    let state = dir.path().join("state");
    let args = ["p", "--node-id=n", "--driver-name=behind.proxy.test", &format!("--state-dir={}", state.display())];
    let plugin = Plugin::open(Flags::try_parse_from(args).unwrap().config()).unwrap();
    let incoming =
        tokio_stream::StreamExt::chain(tokio_stream::once(Ok::<_, std::io::Error>(tcp)), tokio_stream::pending());
    tokio::spawn(
        tonic::transport::Server::builder().add_service(IdentityServer::new(plugin)).serve_with_incoming(incoming),
    );

    let endpoint = tonic::transport::Endpoint::from_shared(format!("unix://{}", socket.display())).unwrap();
    let channel = endpoint.connect().await.unwrap();
    let info = IdentityClient::new(channel).get_plugin_info(GetPluginInfoRequest {}).await.unwrap().into_inner();
    assert_eq!(info.name, "behind.proxy.test");
    terminate(proxy, &socket).await;
}

#[test]
fn the_proxy_refuses_an_endpoint_that_is_not_tcp() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(BINARY)
        .arg(format!("--endpoint={}", dir.path().join("csi.sock").display()))
        .args(["--node-id=n", "--proxy-endpoint=127.0.0.1:9000"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("tcp://HOST:PORT"), "{output:?}");
}
