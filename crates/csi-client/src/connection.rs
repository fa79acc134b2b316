//! Dialling a CSI plugin over its unix socket.
//!
//! As csi-lib-utils does: a bare path or `unix://` address, no TLS, a connect
//! attempt at most every second until a bounded deadline, and detection of a lost
//! connection so that a sidecar can exit and let the kubelet restart it next to the
//! restarted plugin. Unlike its "Still connecting" lines, ours name why each dial
//! failed (see [`crate::dial_failure`]).

use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::UnixStream;
use tokio::sync::watch;
use tokio::time::Instant;
use tonic::transport::{Channel, Uri};

use crate::dial_failure::{DialFailure, Reported, permission_detail, report_due};

/// How often a dial is retried while the plugin is not up yet.
const RETRY_EVERY: Duration = Duration::from_secs(1);
/// Largest header block (a gRPC error's message travels in one) accepted from the driver: grpc-go's client default,
/// which upstream's sidecars use. hyper's default of 16 KiB would turn a driver's long error message into a
/// connection error, and a lost connection ends the sidecar.
const MAX_HEADER_LIST_SIZE: u32 = 16 << 20;

/// Where the plugin listens: always a unix socket path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    path: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    #[error("CSI endpoint is empty")]
    Empty,
    #[error("CSI endpoint {0:?}: only unix sockets are supported (unix:///path or /path)")]
    NotUnix(String),
}

impl FromStr for Endpoint {
    type Err = EndpointError;

    fn from_str(address: &str) -> Result<Self, Self::Err> {
        let address = address.trim();
        if address.is_empty() {
            return Err(EndpointError::Empty);
        }
        let path = if let Some(rest) = address.strip_prefix("unix://") {
            rest
        } else if let Some(rest) = address.strip_prefix("unix:") {
            rest
        } else if address.contains("://") {
            return Err(EndpointError::NotUnix(address.to_string()));
        } else {
            address
        };
        if path.is_empty() {
            return Err(EndpointError::Empty);
        }
        Ok(Endpoint { path: PathBuf::from(path) })
    }
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unix://{}", self.path.display())
    }
}

impl Endpoint {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("could not connect to CSI driver at {endpoint} within {waited:?}: {last_error}")]
    Timeout { endpoint: Endpoint, waited: Duration, last_error: String },
}

/// An open channel to the plugin plus a signal that fires once the connection
/// has been lost (the plugin exited or closed its socket).
#[derive(Clone, Debug)]
pub struct Connection {
    pub channel: Channel,
    pub endpoint: Endpoint,
    lost: watch::Receiver<bool>,
}

impl Connection {
    /// Resolves once the connection to the plugin has been lost.
    pub async fn lost(&self) {
        let mut lost = self.lost.clone();
        // An error means the sender is gone, which only happens with the channel.
        let _ = lost.wait_for(|lost| *lost).await;
    }

    pub fn is_lost(&self) -> bool {
        *self.lost.borrow()
    }
}

/// Connects to `endpoint`, retrying at most every second until `timeout`.
///
/// After the first successful connection, any end of that connection (EOF or
/// an error on the socket) or any attempt to dial again marks it lost.
pub async fn connect(endpoint: &Endpoint, timeout: Duration) -> Result<Connection, ConnectError> {
    let (lost_tx, lost_rx) = watch::channel(false);
    let lost_tx = Arc::new(lost_tx);
    let connected = Arc::new(AtomicBool::new(false));

    let path = endpoint.path.clone();
    let connector = {
        let lost_tx = lost_tx.clone();
        let connected = connected.clone();
        tower::service_fn(move |_: Uri| {
            let path = path.clone();
            let lost_tx = lost_tx.clone();
            let connected = connected.clone();
            async move {
                if connected.load(Ordering::SeqCst) {
                    // tonic only dials again after the first connection broke.
                    mark_lost(&lost_tx, &path);
                }
                let stream = UnixStream::connect(&path).await?;
                Ok::<_, io::Error>(TokioIo::new(WatchedStream { inner: stream, lost: lost_tx, path }))
            }
        })
    };

    // The URI is required by tonic but unused: the connector above dials the socket.
    let builder = tonic::transport::Endpoint::from_static("http://csi.plugin")
        .connect_timeout(RETRY_EVERY)
        .http2_max_header_list_size(MAX_HEADER_LIST_SIZE);
    let started = Instant::now();
    let mut reported: Option<Reported> = None;
    tracing::info!(endpoint = %endpoint, "connecting to CSI driver");
    loop {
        match builder.connect_with_connector(connector.clone()).await {
            Ok(channel) => {
                connected.store(true, Ordering::SeqCst);
                tracing::info!(endpoint = %endpoint, "connected to CSI driver");
                return Ok(Connection { channel, endpoint: endpoint.clone(), lost: lost_rx });
            }
            Err(err) => {
                // A socket that opened but failed the HTTP/2 handshake was
                // never a connection: it must not count as a loss.
                lost_tx.send_replace(false);
                let waited = started.elapsed();
                let last_error = describe(&err);
                if waited >= timeout {
                    return Err(ConnectError::Timeout { endpoint: endpoint.clone(), waited, last_error });
                }
                let failure = DialFailure::of(&err, &last_error);
                let now = Instant::now();
                if report_due(reported.as_ref(), &failure, now) {
                    report(endpoint, &failure, &last_error, waited);
                    reported = Some(Reported { at: now, failure });
                }
                let remaining = timeout.saturating_sub(waited);
                tokio::time::sleep(RETRY_EVERY.min(remaining)).await;
            }
        }
    }
}

/// One "still connecting" line, at warning level so the default verbosity shows it.
fn report(endpoint: &Endpoint, failure: &DialFailure, text: &str, waited: Duration) {
    let waited = format!("{}s", waited.as_secs());
    match failure {
        DialFailure::PermissionDenied => tracing::warn!(
            endpoint = %endpoint, reason = failure.name(), %waited, detail = %permission_detail(endpoint.path()),
            "still connecting to CSI driver"
        ),
        _ => tracing::warn!(endpoint = %endpoint, reason = failure.name(), %waited, error = %text,
            "still connecting to CSI driver"),
    }
}

fn describe(err: &tonic::transport::Error) -> String {
    use std::error::Error as _;
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

fn mark_lost(lost: &watch::Sender<bool>, path: &Path) {
    if !*lost.borrow() {
        tracing::debug!(socket = %path.display(), "connection to CSI driver ended");
    }
    lost.send_replace(true);
}

/// A socket that reports its own end: hyper keeps reading the HTTP/2
/// connection at all times, so the plugin going away (EOF, a socket error)
/// shows up here at once, not only at the next call. A plugin that shuts
/// down gracefully sends GOAWAY and the client drops the socket instead,
/// which `Drop` reports.
struct WatchedStream {
    inner: UnixStream,
    lost: Arc<watch::Sender<bool>>,
    path: PathBuf,
}

impl AsyncRead for WatchedStream {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        match &polled {
            Poll::Ready(Ok(())) if buf.filled().len() == before && buf.remaining() > 0 => {
                mark_lost(&self.lost, &self.path)
            }
            Poll::Ready(Err(_)) => mark_lost(&self.lost, &self.path),
            _ => {}
        }
        polled
    }
}

impl Drop for WatchedStream {
    fn drop(&mut self) {
        mark_lost(&self.lost, &self.path);
    }
}

impl AsyncWrite for WatchedStream {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Upstream's ExitOnConnectionLoss: tell the kubelet why in
/// /dev/termination-log (best effort) and exit 1.
pub fn exit_on_connection_loss(endpoint: &Endpoint) -> ! {
    tracing::error!(endpoint = %endpoint, "lost connection to CSI driver");
    const MESSAGE: &str = "Lost connection to CSI driver, exiting";
    let _ = std::fs::write("/dev/termination-log", MESSAGE);
    tracing::error!("{MESSAGE}");
    std::process::exit(1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_addresses_like_csi_lib_utils() {
        let table: [(&str, Option<&str>); 7] = [
            ("/run/csi/socket", Some("/run/csi/socket")),
            ("unix:///run/csi/socket", Some("/run/csi/socket")),
            ("unix:/tmp/csi.sock", Some("/tmp/csi.sock")),
            ("csi.sock", Some("csi.sock")),
            ("", None),
            ("unix://", None),
            ("tcp://127.0.0.1:10000", None),
        ];
        for (input, want) in table {
            let got = input.parse::<Endpoint>().ok().map(|e| e.path().to_string_lossy().into_owned());
            assert_eq!(got.as_deref(), want, "{input:?}");
        }
        assert_eq!("/x.sock".parse::<Endpoint>().unwrap().to_string(), "unix:///x.sock");
    }
}
