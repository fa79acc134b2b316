//! csi-node-driver-registrar as a process, against hostpath-plugin serving in the test and a fake kubelet that
//! calls the registration socket as the kubelet's plugin watcher does.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use clap::Parser as _;
use hostpath_plugin::flags::Flags;
use hostpath_plugin::{Plugin, server};
use hyper_util::rt::TokioIo;
use node_driver_registrar::proto::registration_client::RegistrationClient;
use node_driver_registrar::proto::{InfoRequest, RegistrationStatus};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tonic::transport::Channel;

const DRIVER: &str = "hostpath.csi.k8s.io";
const HOST_SOCKET: &str = "/var/lib/kubelet/plugins/csi-hostpath/csi.sock";

struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    fn new() -> Self {
        let setup = Self { dir: tempfile::tempdir().unwrap() };
        std::fs::create_dir(setup.registration_dir()).unwrap();
        setup
    }

    fn csi_socket(&self) -> PathBuf {
        self.dir.path().join("csi.sock")
    }

    fn registration_dir(&self) -> PathBuf {
        self.dir.path().join("plugins_registry")
    }

    fn registration_socket(&self) -> PathBuf {
        self.registration_dir().join(format!("{DRIVER}-reg.sock"))
    }

    /// Serves hostpath-plugin on the CSI socket, with `faults` (JSON) injected.
    fn start_driver(&self, faults: &str) {
        let fault_file = self.dir.path().join("faults.json");
        std::fs::write(&fault_file, faults).unwrap();
        let state_dir = format!("--state-dir={}", self.dir.path().join("state").display());
        let fault_config = format!("--fault-config={}", fault_file.display());
        let args = ["hostpath-plugin", "--node-id=node-1", &state_dir, &fault_config, "--driver-name", DRIVER];
        let config = Flags::try_parse_from(args).unwrap().config();
        let plugin = Plugin::open(config).unwrap();
        let listener = server::bind(&self.csi_socket()).unwrap();
        tokio::spawn(server::serve(plugin, listener, std::future::pending()));
    }

    /// The registrar with the flags a node DaemonSet passes, and `extra`.
    fn start_registrar(&self, extra: &[&str]) -> Registrar {
        let child = Command::new(env!("CARGO_BIN_EXE_csi-node-driver-registrar"))
            .arg(format!("-csi-address={}", self.csi_socket().display()))
            .arg(format!("-kubelet-registration-path={HOST_SOCKET}"))
            .arg(format!("-plugin-registration-path={}", self.registration_dir().display()))
            .arg("-v=2")
            .args(extra)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        Registrar { child }
    }
}

struct Registrar {
    child: Child,
}

impl Registrar {
    fn signal(&self, signal: libc::c_int) {
        // SAFETY: kill has no memory effects; the pid is our child's.
        unsafe { libc::kill(self.child.id() as libc::pid_t, signal) };
    }

    /// The exit status, waiting at most 10 s.
    async fn exited(&mut self) -> ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "the registrar did not exit");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for Registrar {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The kubelet's side: a client of the registration socket.
async fn kubelet(socket: &Path) -> RegistrationClient<Channel> {
    let path = socket.to_path_buf();
    let channel = tonic::transport::Endpoint::from_static("http://kubelet")
        .connect_with_connector(tower::service_fn(move |_: tonic::transport::Uri| {
            let path = path.clone();
            async move { tokio::net::UnixStream::connect(path).await.map(TokioIo::new) }
        }))
        .await
        .unwrap();
    RegistrationClient::new(channel)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// GET `path` on 127.0.0.1:`port`: status code and body.
async fn get(port: u16, path: &str) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    stream.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let status = response.split(' ').nth(1).and_then(|code| code.parse().ok()).unwrap_or(0);
    let body = response.split_once("\r\n\r\n").map(|(_, body)| body.to_string()).unwrap_or_default();
    (status, body)
}

#[tokio::test]
async fn registers_with_the_kubelet_serves_health_and_removes_its_socket_on_sigterm() {
    let setup = Setup::new();
    setup.start_driver("{}");
    // A socket left by an earlier run is replaced.
    drop(std::os::unix::net::UnixListener::bind(setup.registration_socket()).unwrap());
    let port = free_port();
    let mut registrar = setup.start_registrar(&[&format!("-http-endpoint=127.0.0.1:{port}")]);
    let socket = setup.registration_socket();
    wait_for("/healthz", || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()).await;
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "only the owner (the kubelet runs as root) may use the socket");

    let mut kubelet = kubelet(&socket).await;
    let info = kubelet.get_info(InfoRequest {}).await.unwrap().into_inner();
    assert_eq!(info.r#type, "CSIPlugin");
    assert_eq!(info.name, DRIVER);
    assert_eq!(info.endpoint, HOST_SOCKET);
    assert_eq!(info.supported_versions, ["1.0.0"]);
    kubelet
        .notify_registration_status(RegistrationStatus { plugin_registered: true, error: String::new() })
        .await
        .unwrap();
    assert_eq!(get(port, "/healthz").await, (200, "ok".to_string()));
    assert!(registrar.running(), "a registered plugin keeps serving");

    registrar.signal(libc::SIGTERM);
    assert_eq!(registrar.exited().await.code(), Some(0));
    assert!(!socket.exists(), "the socket goes with the process");
}

#[tokio::test]
async fn a_refused_registration_ends_the_process() {
    let setup = Setup::new();
    setup.start_driver("{}");
    let mut registrar = setup.start_registrar(&[]);
    let socket = setup.registration_socket();
    wait_for("the registration socket", || socket.exists()).await;
    let mut kubelet = kubelet(&socket).await;
    let refusal = RegistrationStatus { plugin_registered: false, error: "no supported version".into() };
    let _ = kubelet.notify_registration_status(refusal).await;
    assert_eq!(registrar.exited().await.code(), Some(1));
    assert!(!socket.exists());
}

#[tokio::test]
async fn waits_for_the_driver_then_registers() {
    let setup = Setup::new();
    let mut registrar = setup.start_registrar(&[]);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(registrar.running(), "no driver yet: still waiting");
    assert!(!setup.registration_socket().exists());
    setup.start_driver("{}");
    wait_for("the registration socket", || setup.registration_socket().exists()).await;
    let info = kubelet(&setup.registration_socket()).await.get_info(InfoRequest {}).await.unwrap();
    assert_eq!(info.into_inner().name, DRIVER);
}

#[tokio::test]
async fn health_fails_when_the_socket_is_gone_or_is_not_a_socket() {
    let setup = Setup::new();
    setup.start_driver("{}");
    let port = free_port();
    let _registrar = setup.start_registrar(&[&format!("--http-endpoint=127.0.0.1:{port}")]);
    let socket = setup.registration_socket();
    wait_for("/healthz", || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()).await;
    assert_eq!(get(port, "/healthz").await.0, 200);

    std::fs::remove_file(&socket).unwrap();
    assert_eq!(get(port, "/healthz").await, (404, "registration socket does not exist".to_string()));
    std::fs::write(&socket, "not a socket").unwrap();
    let (status, body) = get(port, "/healthz").await;
    assert_eq!(status, 500);
    assert!(body.contains("not a socket"), "{body}");
    // A socket nobody serves.
    std::fs::remove_file(&socket).unwrap();
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    let (status, body) = get(port, "/healthz").await;
    assert_eq!(status, 500);
    assert!(body.contains("error connecting to node-registrar socket"), "{body}");
}

#[tokio::test]
async fn exits_as_upstream_on_bad_flags_and_a_driver_without_a_name() {
    let setup = Setup::new();
    let binary = env!("CARGO_BIN_EXE_csi-node-driver-registrar");
    // (flags, exit status), without a driver: each ends before connecting.
    let table: [(&[&str], i32); 4] = [
        (&[], 1),
        (&["-kubelet-registration-path=/x", "-mode=kubelet-registration-probe"], 0),
        (&["-kubelet-registration-path=/x", "-health-port=9809", "-http-endpoint=:9810"], 1),
        (&["-kubelet-registration-path=/x", "-no-such-flag"], 2),
    ];
    for (flags, code) in table {
        let status = Command::new(binary).args(flags).stderr(Stdio::null()).status().unwrap();
        assert_eq!(status.code(), Some(code), "{flags:?}");
    }

    // GetPluginInfo fails: exit 1, no socket.
    setup.start_driver(r#"{"GetPluginInfo": {"code": "Unavailable"}}"#);
    let mut registrar = setup.start_registrar(&[]);
    assert_eq!(registrar.exited().await.code(), Some(1));
    assert!(!setup.registration_socket().exists());

    // Something that is not a socket at the registration path is not removed: exit 1.
    std::fs::write(setup.dir.path().join("faults.json"), "{}").unwrap();
    std::fs::write(setup.registration_socket(), "data").unwrap();
    let mut registrar = setup.start_registrar(&[]);
    assert_eq!(registrar.exited().await.code(), Some(1));
    assert_eq!(std::fs::read_to_string(setup.registration_socket()).unwrap(), "data");
}

/// One HTTP/2 frame: its type, flags, stream and payload.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let length = payload.len();
    let mut bytes = vec![(length >> 16) as u8, (length >> 8) as u8, length as u8, kind, flags];
    bytes.extend_from_slice(&stream.to_be_bytes());
    bytes.extend_from_slice(payload);
    bytes
}

/// Reads one frame: (type, flags, stream, payload).
async fn read_frame(stream: &mut tokio::net::UnixStream) -> (u8, u8, u32, Vec<u8>) {
    let mut header = [0u8; 9];
    stream.read_exact(&mut header).await.unwrap();
    let length = usize::from(header[0]) << 16 | usize::from(header[1]) << 8 | usize::from(header[2]);
    let mut payload = vec![0u8; length];
    stream.read_exact(&mut payload).await.unwrap();
    (header[3], header[4], u32::from_be_bytes([header[5], header[6], header[7], header[8]]) & 0x7fff_ffff, payload)
}

/// The kubelet dials the registration socket with grpc-go's default authority, the socket path percent-encoded
/// (no `WithAuthority` in its plugin watcher). Such a request is written here frame by frame, as grpc-go writes it,
/// and GetInfo must answer it rather than reset the stream.
#[tokio::test]
async fn getinfo_answers_a_request_whose_authority_is_the_socket_path() {
    use prost::Message as _;
    let setup = Setup::new();
    setup.start_driver("{}");
    let _registrar = setup.start_registrar(&[]);
    let socket = setup.registration_socket();
    wait_for("the registration socket", || socket.exists()).await;
    let authority = socket.display().to_string().replace('/', "%2F");

    let mut stream = tokio::net::UnixStream::connect(&socket).await.unwrap();
    let mut request = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    request.extend(frame(0x4, 0, 0, &[])); // SETTINGS
    let headers: [(&[u8], &[u8]); 6] = [
        (b":method", b"POST"),
        (b":scheme", b"http"),
        (b":path", b"/pluginregistration.Registration/GetInfo"),
        (b":authority", authority.as_bytes()),
        (b"content-type", b"application/grpc"),
        (b"te", b"trailers"),
    ];
    request.extend(frame(0x1, 0x4, 1, &loona_hpack::Encoder::new().encode(headers))); // HEADERS, END_HEADERS
    request.extend(frame(0x0, 0x1, 1, &[0, 0, 0, 0, 0])); // DATA: an empty InfoRequest, END_STREAM
    stream.write_all(&request).await.unwrap();

    let mut decoder = loona_hpack::Decoder::new();
    let (mut message, mut status) = (Vec::new(), None);
    while status.is_none() {
        let (kind, flags, id, payload) =
            tokio::time::timeout(Duration::from_secs(10), read_frame(&mut stream)).await.expect("the server answers");
        match kind {
            0x3 => panic!("the server reset the stream (RST_STREAM {payload:?})"),
            0x4 if flags & 0x1 == 0 => stream.write_all(&frame(0x4, 0x1, 0, &[])).await.unwrap(), // SETTINGS ACK
            0x0 if id == 1 => message.extend_from_slice(&payload),
            0x1 if id == 1 => {
                let headers = decoder.decode(&payload).unwrap();
                let grpc_status = headers.iter().find(|(name, _)| name.as_slice() == b"grpc-status");
                if let Some((_, value)) = grpc_status {
                    status = Some(String::from_utf8(value.clone()).unwrap());
                }
            }
            _ => {}
        }
    }
    assert_eq!(status.as_deref(), Some("0"), "GetInfo succeeds");
    let info = node_driver_registrar::proto::PluginInfo::decode(&message[5..]).unwrap();
    assert_eq!((info.name.as_str(), info.endpoint.as_str()), (DRIVER, HOST_SOCKET));
}
