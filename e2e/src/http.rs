//! Reading a sidecar's HTTP endpoint (`/metrics`, `/healthz`) the plainest way, without an HTTP client crate.

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A plain HTTP/1.1 GET on loopback: (status, body), or `None` while nothing answers on the port.
pub async fn try_http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.ok()?;
    let status = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response.split_once("\r\n\r\n").map(|(_, body)| body.to_string()).unwrap_or_default();
    Some((status, body))
}

/// [`try_http_get`] of an endpoint that must answer: returns the body.
pub async fn http_get(port: u16, path: &str) -> String {
    let (_, body) = try_http_get(port, path).await.unwrap_or_else(|| panic!("nothing answers GET {path} on :{port}"));
    body
}

/// A free loopback port for a sidecar's `--http-endpoint`.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port").local_addr().expect("its address").port()
}
