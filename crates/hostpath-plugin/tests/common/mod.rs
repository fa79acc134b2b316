//! Starts the plugin in-process on a unix socket in a temporary directory and connects the generated
//! tonic clients to it, the way a CO would.
#![allow(dead_code)]

use std::path::PathBuf;

use csi_client::proto::controller_client::ControllerClient;
use csi_client::proto::group_controller_client::GroupControllerClient;
use csi_client::proto::identity_client::IdentityClient;
use csi_client::proto::node_client::NodeClient;
use csi_client::proto::volume_capability::access_mode::Mode;
use csi_client::proto::volume_capability::{AccessMode, AccessType, BlockVolume, MountVolume};
use csi_client::proto::{CapacityRange, CreateVolumeRequest, VolumeCapability};
use hostpath_plugin::mutable::{DEFAULT_ACCEPTED, MutableParameterPolicy};
use hostpath_plugin::plugin::VolumeHealth;
use hostpath_plugin::{Config, Plugin, server};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::transport::Channel;

pub const NODE: &str = "test-node";
pub const GI: i64 = 1 << 30;

pub struct TestPlugin {
    pub dir: tempfile::TempDir,
    pub socket: PathBuf,
    pub config: Config,
    running: Option<(oneshot::Sender<()>, JoinHandle<()>)>,
}

impl TestPlugin {
    pub async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    /// Starts a plugin whose configuration `adjust` may change. The fault file is always
    /// `<dir>/faults.json`; it does not exist until a test writes it.
    pub async fn start_with(adjust: impl FnOnce(&mut Config)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config {
            driver_name: "hostpath.csi.k8s.io".into(),
            node_id: NODE.into(),
            state_dir: dir.path().join("state"),
            max_volume_size: 1 << 40,
            capacity: 100 * GI,
            mutable_parameters: MutableParameterPolicy::from_flag(DEFAULT_ACCEPTED),
            fault_config: Some(dir.path().join("faults.json")),
            attach_required: false,
            volume_health: VolumeHealth::None,
            node_mounts: false,
            single_node_multi_writer: true,
            block: true,
            shared_state: false,
            max_volumes_per_node: 0,
        };
        adjust(&mut config);
        let socket = dir.path().join("csi.sock");
        let mut plugin = Self { dir, socket, config, running: None };
        plugin.run();
        plugin
    }

    fn run(&mut self) {
        let plugin = Plugin::open(self.config.clone()).expect("open plugin");
        let listener = server::bind(&self.socket).expect("bind socket");
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            server::serve(plugin, listener, async {
                let _ = stopped.await;
            })
            .await
            .expect("serve");
        });
        self.running = Some((stop, server));
    }

    /// Stops the server; clients connected to it see their connection go away.
    pub async fn stop(&mut self) {
        if let Some((stop, server)) = self.running.take() {
            let _ = stop.send(());
            server.await.unwrap();
        }
    }

    /// Stops the plugin and starts a new one on the same state directory, as after a process restart.
    pub async fn restart(&mut self) {
        self.stop().await;
        self.run();
    }

    pub fn faults_file(&self) -> PathBuf {
        self.config.fault_config.clone().unwrap()
    }

    /// Replaces the fault configuration; the plugin notices the new file on the next call.
    pub fn set_faults(&self, json: &str) {
        // Write to a new file and rename it, so the plugin never reads a half-written file and the
        // inode changes even when the size and modification time would not.
        let temporary = self.dir.path().join("faults.json.new");
        std::fs::write(&temporary, json).unwrap();
        std::fs::rename(&temporary, self.faults_file()).unwrap();
    }

    pub async fn channel(&self) -> Channel {
        tonic::transport::Endpoint::from_shared(format!("unix://{}", self.socket.display()))
            .unwrap()
            .connect()
            .await
            .expect("connect to the plugin")
    }

    pub async fn identity(&self) -> IdentityClient<Channel> {
        IdentityClient::new(self.channel().await)
    }

    pub async fn controller(&self) -> ControllerClient<Channel> {
        ControllerClient::new(self.channel().await)
    }

    pub async fn group(&self) -> GroupControllerClient<Channel> {
        GroupControllerClient::new(self.channel().await)
    }

    pub async fn node(&self) -> NodeClient<Channel> {
        NodeClient::new(self.channel().await)
    }

    pub fn volume_path(&self, id: &str) -> PathBuf {
        self.config.state_dir.join("volumes").join(id)
    }

    pub fn snapshot_path(&self, id: &str) -> PathBuf {
        self.config.state_dir.join("snapshots").join(id)
    }
}

pub fn mount() -> VolumeCapability {
    capability(AccessType::Mount(MountVolume::default()), Mode::SingleNodeWriter)
}

pub fn block() -> VolumeCapability {
    capability(AccessType::Block(BlockVolume {}), Mode::SingleNodeWriter)
}

pub fn capability(access_type: AccessType, mode: Mode) -> VolumeCapability {
    VolumeCapability { access_type: Some(access_type), access_mode: Some(AccessMode { mode: mode as i32 }) }
}

pub fn create_request(name: &str, size: i64, capability: VolumeCapability) -> CreateVolumeRequest {
    CreateVolumeRequest {
        name: name.into(),
        capacity_range: Some(CapacityRange { required_bytes: size, limit_bytes: 0 }),
        volume_capabilities: vec![capability],
        ..Default::default()
    }
}

/// Asserts that a call failed with `code`.
#[track_caller]
pub fn assert_code<T: std::fmt::Debug>(result: Result<T, tonic::Status>, code: tonic::Code) -> tonic::Status {
    match result {
        Ok(value) => panic!("expected {code:?}, got OK: {value:?}"),
        Err(status) => {
            assert_eq!(status.code(), code, "unexpected status: {status:?}");
            status
        }
    }
}

pub fn pairs(items: &[(&str, &str)]) -> std::collections::HashMap<String, String> {
    items.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}
