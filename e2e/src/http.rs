//! Reading a sidecar's HTTP endpoint (`/metrics`, `/healthz`) the plainest way, without an HTTP client crate.

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A plain HTTP/1.1 GET on loopback; returns the whole response, status line and headers included.
pub async fn http_get(port: u16, path: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.expect("connect to the HTTP endpoint");
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("send the request");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("read the response");
    response
}

/// A free loopback port for a sidecar's `--http-endpoint`.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port").local_addr().expect("its address").port()
}
