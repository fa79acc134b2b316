//! The registration socket: made private to its owner (umask 0077 while binding, as upstream), served with the
//! kubelet's Registration service, and removed when the process ends.

use std::io;
use std::path::{Path, PathBuf};

use tokio::net::UnixListener;
use tokio::sync::mpsc;
use tonic::{Request, Response, Status};

use crate::proto::registration_server::Registration;
use crate::proto::{InfoRequest, PluginInfo, RegistrationStatus, RegistrationStatusResponse};
use crate::translate::registration::{Verdict, verdict};

#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error("file exists in socketPath {0} but it's not a socket")]
    NotASocket(PathBuf),
    #[error("failed to stat the socket {path}: {source}")]
    Stat { path: PathBuf, source: io::Error },
    #[error("failed to remove stale socket {path}: {source}")]
    RemoveStale { path: PathBuf, source: io::Error },
    #[error("failed to listen on socket {path}: {source}")]
    Listen { path: PathBuf, source: io::Error },
}

/// The Registration service: GetInfo answers what the kubelet must know; a refused registration is handed to the
/// process, which ends.
pub struct RegistrationService {
    pub info: PluginInfo,
    pub refused: mpsc::Sender<String>,
}

#[tonic::async_trait]
impl Registration for RegistrationService {
    async fn get_info(&self, request: Request<InfoRequest>) -> Result<Response<PluginInfo>, Status> {
        tracing::debug!(request = ?request.get_ref(), "received GetInfo call");
        Ok(Response::new(self.info.clone()))
    }

    async fn notify_registration_status(
        &self,
        request: Request<RegistrationStatus>,
    ) -> Result<Response<RegistrationStatusResponse>, Status> {
        let status = request.into_inner();
        tracing::info!(registered = status.plugin_registered, error = %status.error, "received NotifyRegistrationStatus call");
        if let Verdict::Refused { error } = verdict(&status) {
            tracing::error!(%error, "registration process failed with error, restarting registration container");
            let _ = self.refused.send(error).await;
        }
        Ok(Response::new(RegistrationStatusResponse {}))
    }
}

/// Whether a socket is at `path`: `Ok(false)` when nothing is there, an error when something else is.
pub fn socket_exists(path: &Path) -> Result<bool, SocketError> {
    use std::os::unix::fs::FileTypeExt as _;
    match std::fs::metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => Ok(true),
        Ok(_) => Err(SocketError::NotASocket(path.to_path_buf())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(source) => Err(SocketError::Stat { path: path.to_path_buf(), source }),
    }
}

/// Removes a socket an earlier run left, then listens at `path` with a socket only its owner may use.
pub fn bind(path: &Path) -> Result<UnixListener, SocketError> {
    if socket_exists(path)? {
        std::fs::remove_file(path).map_err(|source| SocketError::RemoveStale { path: path.to_path_buf(), source })?;
    }
    // SAFETY: umask only swaps the process's file mode mask; it cannot fail.
    let previous = unsafe { libc::umask(0o077) };
    let listener = UnixListener::bind(path);
    // SAFETY: as above.
    unsafe { libc::umask(previous) };
    listener.map_err(|source| SocketError::Listen { path: path.to_path_buf(), source })
}

/// Removes the socket at the end; one already gone is fine.
pub fn remove(path: &Path) {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            tracing::error!(socket = %path.display(), error = %e, "failed to remove the registration socket")
        }
        _ => {}
    }
}
