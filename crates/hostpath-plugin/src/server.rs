//! The gRPC server on a unix socket: all four CSI services on one socket, as the spec asks.

use std::future::Future;
use std::path::{Path, PathBuf};

use csi_client::proto::controller_server::ControllerServer;
use csi_client::proto::group_controller_server::GroupControllerServer;
use csi_client::proto::identity_server::IdentityServer;
use csi_client::proto::node_server::NodeServer;
use tokio::net::UnixListener;
use tokio_stream::wrappers::UnixListenerStream;

use crate::plugin::Plugin;

#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    #[error("endpoint {0:?} is not a unix socket (use unix:///path or a path); CSI plugins serve unix sockets only")]
    NotUnix(String),
    #[error("proxy endpoint {0:?} is not tcp://HOST:PORT (the host may be empty: tcp://:9000)")]
    NotTcp(String),
    #[error("endpoint {0:?} names no path")]
    Empty(String),
    #[error("{} exists and is not a socket; refusing to remove it", .0.display())]
    NotASocket(PathBuf),
    #[error("preparing {}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
}

/// The socket path of an endpoint: `unix:///abs/path`, `unix://rel/path`, `unix:/path` or a bare path.
pub fn socket_path(endpoint: &str) -> Result<PathBuf, EndpointError> {
    let path = if let Some(rest) = endpoint.strip_prefix("unix://") {
        rest
    } else if let Some(rest) = endpoint.strip_prefix("unix:") {
        rest
    } else if endpoint.contains("://") {
        return Err(EndpointError::NotUnix(endpoint.to_string()));
    } else {
        endpoint
    };
    if path.is_empty() {
        return Err(EndpointError::Empty(endpoint.to_string()));
    }
    Ok(PathBuf::from(path))
}

/// Binds the socket, removing a socket file left by an earlier run and creating the parent directory.
pub fn bind(path: &Path) -> Result<UnixListener, EndpointError> {
    let io = |source| EndpointError::Io { path: path.to_path_buf(), source };
    match std::fs::symlink_metadata(path) {
        Ok(meta) => {
            use std::os::unix::fs::FileTypeExt as _;
            if !meta.file_type().is_socket() {
                return Err(EndpointError::NotASocket(path.to_path_buf()));
            }
            std::fs::remove_file(path).map_err(io)?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(e)),
    }
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    UnixListener::bind(path).map_err(io)
}

/// Serves Identity, Controller, GroupController and Node until `shutdown` completes; then stops
/// accepting connections and lets calls in flight finish.
pub async fn serve(
    plugin: Plugin,
    listener: UnixListener,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), tonic::transport::Error> {
    tonic::transport::Server::builder()
        .add_service(IdentityServer::new(plugin.clone()))
        .add_service(ControllerServer::new(plugin.clone()))
        .add_service(GroupControllerServer::new(plugin.clone()))
        .add_service(NodeServer::new(plugin))
        .serve_with_incoming_shutdown(UnixListenerStream::new(listener), shutdown)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_endpoints() {
        let cases: &[(&str, Option<&str>)] = &[
            ("unix:///tmp/csi.sock", Some("/tmp/csi.sock")),
            ("unix://relative/csi.sock", Some("relative/csi.sock")),
            ("unix:/tmp/csi.sock", Some("/tmp/csi.sock")),
            ("/var/lib/csi.sock", Some("/var/lib/csi.sock")),
            ("csi.sock", Some("csi.sock")),
            ("tcp://127.0.0.1:10000", None),
            ("unix://", None),
            ("", None),
        ];
        for (endpoint, want) in cases {
            assert_eq!(socket_path(endpoint).ok().as_deref(), want.map(Path::new), "{endpoint:?}");
        }
    }

    #[tokio::test]
    async fn replaces_stale_sockets_only() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("sub/csi.sock");
        let first = bind(&socket).unwrap();
        drop(first); // the file stays behind, as after a crash
        assert!(socket.exists());
        bind(&socket).unwrap();

        let file = dir.path().join("not-a-socket");
        std::fs::write(&file, "data").unwrap();
        assert!(matches!(bind(&file), Err(EndpointError::NotASocket(_))));
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "data");
    }
}
