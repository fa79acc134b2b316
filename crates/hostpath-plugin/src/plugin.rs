//! The plugin object every gRPC service shares, and the one path every call takes: fault injection,
//! then the work on a blocking thread under the state mutex, then logging of the outcome. With `--shared-state`
//! the state directory's file lock is held too, and the state read again when another process changed it.

use std::fmt::Debug;
use std::fs::File;
use std::ops::{Deref, DerefMut};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use tonic::{Request, Response, Status};

use crate::faults::Faults;
use crate::mutable::MutableParameterPolicy;
use crate::state::{Store, StoreError};
use crate::storage::{Layout, StorageError};

/// Everything the plugin is told at start-up.
#[derive(Debug, Clone)]
pub struct Config {
    pub driver_name: String,
    pub node_id: String,
    pub state_dir: PathBuf,
    /// Largest volume CreateVolume and ControllerExpandVolume accept (larger is OUT_OF_RANGE).
    pub max_volume_size: i64,
    /// Total bytes of the simulated pool; GetCapacity reports what volumes have not taken.
    pub capacity: i64,
    pub mutable_parameters: MutableParameterPolicy,
    pub fault_config: Option<PathBuf>,
    /// `--attach-required`: ControllerPublishVolume and ControllerUnpublishVolume are served and advertised.
    pub attach_required: bool,
    /// `--volume-health`: which controller health capabilities are advertised.
    pub volume_health: VolumeHealth,
    /// `--node-mounts`: the node service mounts (bind mounts, loop devices) instead of only keeping books.
    pub node_mounts: bool,
    /// SINGLE_NODE_MULTI_WRITER is advertised (controller and node) and the two single-node modes it brings are
    /// accepted; `--no-single-node-multi-writer` turns it off, as in a driver older than CSI 1.5.
    pub single_node_multi_writer: bool,
    /// Block volumes are served; `--no-block` turns them off, as in a driver without raw block support.
    pub block: bool,
    /// `--shared-state`: other processes of this plugin use the same state directory (a driver's controller and
    /// node pods on one machine), so every call holds `<state-dir>/state.lock` and reads what they wrote.
    pub shared_state: bool,
    /// `--max-volumes-per-node`: NodeGetInfo's limit (0: none).
    pub max_volumes_per_node: i64,
}

/// Which controller volume health capabilities are advertised (the calls are served either way).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum VolumeHealth {
    #[default]
    None,
    /// GET_VOLUME_HEALTH.
    Get,
    /// LIST_VOLUME_HEALTH and GET_VOLUME_HEALTH (CSI asks for both).
    List,
}

impl Config {
    /// The access modes and types the plugin serves.
    pub fn support(&self) -> crate::capability::Support {
        crate::capability::Support { single_node_multi_writer: self.single_node_multi_writer, block: self.block }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("preparing the state directory: {0}")]
    Storage(#[from] StorageError),
    #[error("loading the state: {0}")]
    Store(#[from] StoreError),
}

/// The CSI plugin; cheap to clone, one per gRPC service.
#[derive(Clone)]
pub struct Plugin {
    shared: Arc<Shared>,
}

/// What calls share: the configuration, the state (behind one mutex, so calls are serialised and each
/// sees the previous one's result) and the fault injector.
pub struct Shared {
    pub config: Config,
    store: Mutex<Store>,
    faults: Faults,
}

/// The state for the rest of a call: the mutex of this process and, with `--shared-state`, the directory's file
/// lock (released when the guard goes, the file with it).
pub struct StoreGuard<'a> {
    store: MutexGuard<'a, Store>,
    _shared: Option<File>,
}

impl Deref for StoreGuard<'_> {
    type Target = Store;
    fn deref(&self) -> &Store {
        &self.store
    }
}

impl DerefMut for StoreGuard<'_> {
    fn deref_mut(&mut self) -> &mut Store {
        &mut self.store
    }
}

impl Shared {
    /// The state, locked for the rest of the call.
    pub fn store(&self) -> StoreGuard<'_> {
        // A panic in another call cannot leave a half-made change: changes are made on a copy.
        let mut store = self.store.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let shared = self.config.shared_state.then(|| self.lock_shared(&mut store)).flatten();
        StoreGuard { store, _shared: shared }
    }

    /// Takes the state directory's file lock (waiting for another process's call to end) and reads the state again
    /// if it changed. A failure is logged and the call goes on with what this process knows.
    fn lock_shared(&self, store: &mut Store) -> Option<File> {
        let path = store.layout().root().join("state.lock");
        // A lock needs no write access: another user's process (the node pod's root) may have made the file.
        let opened = match File::open(&path) {
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                File::options().create(true).truncate(false).write(true).open(&path)
            }
            opened => opened,
        };
        let file = match opened {
            Ok(file) => file,
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "cannot open the shared state's lock file");
                return None;
            }
        };
        if let Err(error) = file.lock() {
            tracing::warn!(path = %path.display(), %error, "cannot lock the shared state");
            return None;
        }
        if let Err(error) = store.catch_up() {
            tracing::warn!(%error, "cannot read the shared state again");
        }
        Some(file)
    }
}

impl Plugin {
    /// Prepares the state directory and loads the state left by an earlier run.
    pub fn open(config: Config) -> Result<Self, OpenError> {
        let layout = Layout::create(&config.state_dir)?;
        let store = Store::open(layout)?;
        let faults = Faults::new(config.fault_config.clone());
        Ok(Self { shared: Arc::new(Shared { config, store: Mutex::new(store), faults }) })
    }

    pub fn config(&self) -> &Config {
        &self.shared.config
    }

    /// Serves one RPC: draws a fault for `method`, runs `work` unless the fault forbids it, and logs. Every
    /// injection logs one warning starting "injected fault" or "injected delay", which `make chaos` counts.
    ///
    /// `work` runs on a blocking thread because it does file I/O; it runs to the end even when the caller
    /// gives up, so a cancelled call never leaves a half-done change.
    pub async fn call<Req, Resp>(
        &self,
        method: &'static str,
        request: Request<Req>,
        work: fn(&Shared, Req) -> Result<Resp, Status>,
    ) -> Result<Response<Resp>, Status>
    where
        Req: Debug + Send + 'static,
        Resp: Debug + Send + 'static,
    {
        let started = Instant::now();
        // The caller's process, as the socket's peer credentials name it: one line per change, so a test can tell
        // which replica of a sidecar made each call (two replicas acting at once is a broken leader election).
        if !is_read_only(method) {
            let peer_pid = caller_pid(&request);
            tracing::info!(method, peer_pid, "call");
        }
        let request = request.into_inner();
        // The generated Debug of every message with secrets prints them redacted.
        tracing::debug!(method, ?request, "request");
        let result = match self.shared.faults.draw(method) {
            None => self.run(request, work).await,
            Some(fault) if fault.answer.is_some() => {
                // The work is done and persisted; then its response is altered, as by a driver with a bug.
                let mut result = self.run(request, work).await;
                tokio::time::sleep(fault.latency).await;
                let answer = fault.answer.map(|a| a.name());
                let altered = fault.answer.zip(result.as_mut().ok()).is_some_and(|(a, r)| a.apply(r));
                tracing::warn!(method, answer, done = result.is_ok(), altered, "injected fault after the work");
                result
            }
            Some(fault) if fault.after_work => {
                let result = self.run(request, work).await;
                tokio::time::sleep(fault.latency).await;
                match fault.status() {
                    Some(status) => {
                        tracing::warn!(method, code = ?status.code(), done = result.is_ok(), "injected fault after the work");
                        Err(status)
                    }
                    None => {
                        tracing::warn!(
                            method,
                            latency_ms = fault.latency.as_millis() as u64,
                            "injected delay after the work"
                        );
                        result
                    }
                }
            }
            Some(fault) => {
                tokio::time::sleep(fault.latency).await;
                match fault.status() {
                    Some(status) => {
                        tracing::warn!(method, code = ?status.code(), "injected fault instead of the work");
                        Err(status)
                    }
                    None => {
                        tracing::warn!(
                            method,
                            latency_ms = fault.latency.as_millis() as u64,
                            "injected delay before the work"
                        );
                        self.run(request, work).await
                    }
                }
            }
        };
        log_outcome(method, started, &result);
        result.map(Response::new)
    }

    async fn run<Req, Resp>(&self, request: Req, work: fn(&Shared, Req) -> Result<Resp, Status>) -> Result<Resp, Status>
    where
        Req: Send + 'static,
        Resp: Send + 'static,
    {
        let shared = Arc::clone(&self.shared);
        tokio::task::spawn_blocking(move || work(&shared, request))
            .await
            .unwrap_or_else(|panic| Err(Status::internal(format!("the call panicked: {panic}"))))
    }
}

/// The process id of the caller on a unix socket, 0 when the kernel did not say.
fn caller_pid<Req>(request: &Request<Req>) -> i32 {
    let info = request.extensions().get::<tonic::transport::server::UdsConnectInfo>();
    info.and_then(|info| info.peer_cred).and_then(|cred| cred.pid()).unwrap_or(0)
}

/// Calls that only read are logged at debug level; changes and every failure are worth a line at info
/// or warn.
fn log_outcome<Resp: Debug>(method: &'static str, started: Instant, result: &Result<Resp, Status>) {
    let elapsed_ms = started.elapsed().as_millis() as u64;
    match result {
        Ok(response) if is_read_only(method) => tracing::debug!(method, elapsed_ms, ?response, "ok"),
        Ok(response) => tracing::info!(method, elapsed_ms, ?response, "ok"),
        Err(status) => tracing::warn!(method, elapsed_ms, code = ?status.code(), message = status.message(), "failed"),
    }
}

fn is_read_only(method: &str) -> bool {
    method.starts_with("Get")
        || method.starts_with("List")
        || method.ends_with("GetCapabilities")
        || matches!(method, "Probe" | "NodeGetInfo" | "NodeGetVolumeStats" | "ControllerGetVolume")
        || method == "ValidateVolumeCapabilities"
}
