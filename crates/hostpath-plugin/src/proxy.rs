//! `--proxy-endpoint=tcp://HOST:PORT`: instead of serving CSI, pair connections on the CSI socket with connections on
//! a TCP port and copy bytes both ways, as upstream's hostpathplugin does for Kubernetes' CSI mock tests
//! (kubernetes-csi/csi-driver-host-path, internal/proxy/proxy.go, `Run`). There the CSI driver runs inside the e2e.test
//! process and reaches the port through `pods/portforward`; it opens connections ahead of need, which wait in the TCP
//! listener's backlog until a sidecar connects to the socket.
//!
//! The rules: both listeners stay open all the time; each connection accepted on the socket is paired with the next
//! connection accepted on the port (the socket is waited on first, then the port); once either side of a pair closes
//! or fails, both are closed.

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, UnixListener};

use crate::server::EndpointError;

/// The listening address of a `tcp://HOST:PORT` endpoint; an empty host means every address (`tcp://:9000`, as Go's
/// `net.Listen("tcp", ":9000")`).
pub fn tcp_address(endpoint: &str) -> Result<String, EndpointError> {
    let rest = endpoint.strip_prefix("tcp://").ok_or_else(|| EndpointError::NotTcp(endpoint.to_string()))?;
    let (host, port) = rest.rsplit_once(':').ok_or_else(|| EndpointError::NotTcp(endpoint.to_string()))?;
    let port: u16 = port.parse().map_err(|_| EndpointError::NotTcp(endpoint.to_string()))?;
    Ok(if host.is_empty() { format!("[::]:{port}") } else { format!("{host}:{port}") })
}

/// Binds the TCP side. Every address is `[::]` (IPv4 too, on Linux's default dual-stack sockets), or `0.0.0.0` where
/// the network namespace has no IPv6.
pub async fn bind_tcp(address: &str) -> std::io::Result<TcpListener> {
    match TcpListener::bind(address).await {
        Err(e) if address.starts_with("[::]:") => {
            let v4 = address.replacen("[::]", "0.0.0.0", 1);
            TcpListener::bind(&v4).await.map_err(|_| e)
        }
        result => result,
    }
}

/// Pairs connections of `socket` with connections of `tcp` until `shutdown` completes; pairs already made keep
/// copying until a side closes (they end with the process).
pub async fn run(socket: UnixListener, tcp: TcpListener, shutdown: impl Future<Output = ()>) {
    tokio::pin!(shutdown);
    loop {
        let unix = tokio::select! {
            _ = &mut shutdown => return,
            accepted = socket.accept() => match accepted {
                Ok((conn, _)) => conn,
                Err(e) => {
                    tracing::warn!(error = %e, "accept on the CSI socket failed");
                    continue;
                }
            },
        };
        let remote = tokio::select! {
            _ = &mut shutdown => return,
            accepted = accept_tcp(&tcp) => accepted,
        };
        let (tcp_conn, peer) = remote;
        tracing::debug!(%peer, "proxy paired a socket connection with a TCP connection");
        tokio::spawn(pair(unix, tcp_conn, peer));
    }
}

/// The next TCP connection; failed accepts (a connection reset while in the backlog) are logged and skipped.
async fn accept_tcp(tcp: &TcpListener) -> (tokio::net::TcpStream, SocketAddr) {
    loop {
        match tcp.accept().await {
            Ok(accepted) => return accepted,
            Err(e) => tracing::warn!(error = %e, "accept on the proxy port failed"),
        }
    }
}

/// Copies bytes both ways between `a` and `b`; when either direction ends (end of stream or an error), both
/// connections are dropped, which closes them.
pub async fn pair<A, B>(a: A, b: B, peer: SocketAddr)
where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    let (mut a_read, mut a_write) = tokio::io::split(a);
    let (mut b_read, mut b_write) = tokio::io::split(b);
    let (direction, result) = tokio::select! {
        r = tokio::io::copy(&mut a_read, &mut b_write) => ("socket to TCP", r),
        r = tokio::io::copy(&mut b_read, &mut a_write) => ("TCP to socket", r),
    };
    match result {
        Ok(bytes) => tracing::debug!(%peer, direction, bytes, "proxy connection closed"),
        Err(e) => tracing::debug!(%peer, direction, error = %e, "proxy connection failed"),
    }
}

/// The proxy of `main`: binds the socket (replacing a stale one) and the port, then runs until `shutdown`.
pub async fn serve(socket: &Path, tcp_endpoint: &str, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
    let address = tcp_address(tcp_endpoint)?;
    let unix = crate::server::bind(socket)?;
    let tcp = bind_tcp(&address).await.map_err(|e| anyhow::anyhow!("listening on {address}: {e}"))?;
    tracing::info!(socket = %socket.display(), tcp = %tcp.local_addr()?, "proxying");
    run(unix, tcp, shutdown).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tcp_endpoints() {
        let cases: &[(&str, Option<&str>)] = &[
            ("tcp://:9000", Some("[::]:9000")),
            ("tcp://127.0.0.1:9000", Some("127.0.0.1:9000")),
            ("tcp://[::1]:9000", Some("[::1]:9000")),
            ("tcp://localhost:0", Some("localhost:0")),
            ("tcp://:http", None),
            ("tcp://9000", None),
            ("unix:///csi.sock", None),
            (":9000", None),
        ];
        for (endpoint, want) in cases {
            assert_eq!(tcp_address(endpoint).ok().as_deref(), *want, "{endpoint:?}");
        }
    }
}
