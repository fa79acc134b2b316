//! An in-process CSI plugin on a real unix socket whose answers each test scripts.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use csi_client::Endpoint;
use csi_client::proto::{self, controller_server, identity_server};
use tokio::net::UnixListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::{Request, Response, Status};

/// Scripted Probe answers: `ready` (None = unset) or a gRPC failure.
pub type ProbeScript = Arc<Mutex<VecDeque<Result<Option<bool>, tonic::Code>>>>;

/// A plugin whose answers each test scripts.
#[derive(Clone, Default)]
pub struct FakePlugin {
    pub name: String,
    pub probes: ProbeScript,
    pub create_delay: Duration,
    pub seen_secrets: Arc<Mutex<Vec<String>>>,
}

#[tonic::async_trait]
impl identity_server::Identity for FakePlugin {
    async fn get_plugin_info(
        &self,
        _: Request<proto::GetPluginInfoRequest>,
    ) -> Result<Response<proto::GetPluginInfoResponse>, Status> {
        Ok(Response::new(proto::GetPluginInfoResponse {
            name: self.name.clone(),
            vendor_version: "1.0.0".into(),
            manifest: Default::default(),
        }))
    }

    async fn probe(&self, _: Request<proto::ProbeRequest>) -> Result<Response<proto::ProbeResponse>, Status> {
        let next = self.probes.lock().unwrap().pop_front().unwrap_or(Ok(Some(true)));
        match next {
            Ok(ready) => Ok(Response::new(proto::ProbeResponse { ready })),
            Err(code) => Err(Status::new(code, "scripted probe failure")),
        }
    }
}

#[tonic::async_trait]
impl controller_server::Controller for FakePlugin {
    async fn create_volume(
        &self,
        request: Request<proto::CreateVolumeRequest>,
    ) -> Result<Response<proto::CreateVolumeResponse>, Status> {
        tokio::time::sleep(self.create_delay).await;
        let request = request.into_inner();
        self.seen_secrets.lock().unwrap().extend(request.secrets.values().cloned());
        if request.name.is_empty() {
            return Err(Status::invalid_argument("name missing"));
        }
        Ok(Response::new(proto::CreateVolumeResponse {
            volume: Some(proto::Volume {
                volume_id: format!("id-{}", request.name),
                capacity_bytes: 1,
                ..Default::default()
            }),
        }))
    }
}

pub struct Running {
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    stop: Option<oneshot::Sender<()>>,
    server: JoinHandle<()>,
}

impl Running {
    /// Stops the plugin the way an exiting process does: its connections close.
    pub async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.server.await.unwrap();
    }
}

pub fn serve(plugin: FakePlugin, socket: &Path) -> (oneshot::Sender<()>, JoinHandle<()>) {
    let listener = UnixListener::bind(socket).unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(identity_server::IdentityServer::new(plugin.clone()))
            .add_service(controller_server::ControllerServer::new(plugin))
            .serve_with_incoming_shutdown(UnixListenerStream::new(listener), async {
                let _ = stopped.await;
            })
            .await
            .unwrap();
    });
    (stop, server)
}

pub fn start(plugin: FakePlugin) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("csi.sock");
    let (stop, server) = serve(plugin, &socket);
    Running { dir, socket, stop: Some(stop), server }
}

pub fn endpoint(socket: &Path) -> Endpoint {
    format!("unix://{}", socket.display()).parse().unwrap()
}
