//! The world of an attacher test: a namespace, a hostpath plugin under a driver name of its own (attaching with
//! `--attach-required`, faults from a file the test writes), the node its VolumeAttachments name (a CSINode listing
//! the driver with the plugin's node ID), statically provisioned PVs (backend volume made with csictl), and
//! VolumeAttachments created as kube-controller-manager's attach-detach controller creates them. No node runs: the
//! attacher's side of attaching is all there is to see.
//!
//! PVs, VolumeAttachments and CSINodes are cluster-scoped, so they are named after the namespace and removed (their
//! finalizers first) when the world is dropped. The attachers run as the world's ServiceAccount with upstream's RBAC
//! rules (crate::processes::rbac), never as admin.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, GCEPersistentDiskVolumeSource, PersistentVolume, PersistentVolumeSpec, Secret,
    SecretReference,
};
use k8s_openapi::api::storage::v1::{
    CSINode, CSINodeDriver, CSINodeSpec, VolumeAttachment, VolumeAttachmentSource, VolumeAttachmentSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::Api;
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::http::free_port;
use crate::processes::rbac::Sidecar;
use crate::processes::scenario::{PLUGIN_NODE_ID, Process};
use crate::processes::sidecar_mode::sidecar_command;
use crate::wait::{eventually, wait_for};
use crate::worlds::driver::DriverWorld;

pub const TIMEOUT: Duration = Duration::from_secs(60);

/// One test's world.
pub struct AttacherWorld {
    /// Namespace, plugin, and the ServiceAccount every attacher of the world runs as (reached through `Deref`).
    pub base: DriverWorld,
    /// The node every VolumeAttachment of the world names.
    pub node: String,
    faults: tempfile::NamedTempFile,
    /// PVs and VolumeAttachments removed when the world is dropped.
    pub volumes: Vec<String>,
    pub attachments: Vec<String>,
    csi_nodes: Vec<String>,
}

impl AttacherWorld {
    /// `attaching`: the plugin serves ControllerPublishVolume (`--attach-required`); else it attaches nothing. The
    /// plugin logs every request (`-v=4`), which the tests count.
    pub async fn new(prefix: &str, attaching: bool) -> AttacherWorld {
        AttacherWorld::start(prefix, attaching, None, &[]).await
    }

    /// An attaching world whose plugin is named `driver` (a CSI migration target such as `pd.csi.storage.gke.io`).
    pub async fn for_driver(prefix: &str, driver: &str) -> AttacherWorld {
        AttacherWorld::start(prefix, true, Some(driver), &[]).await
    }

    /// An attaching world whose plugin gets `plugin_args` too (a later `-v` wins over the world's).
    pub async fn with_plugin_args(prefix: &str, plugin_args: &[&str]) -> AttacherWorld {
        AttacherWorld::start(prefix, true, None, plugin_args).await
    }

    async fn start(prefix: &str, attaching: bool, driver: Option<&str>, extra: &[&str]) -> AttacherWorld {
        let faults = tempfile::NamedTempFile::new().expect("fault file");
        std::fs::write(faults.path(), "{}").expect("no faults yet");
        let fault_flag = format!("--fault-config={}", faults.path().display());
        let mut plugin_args = vec![fault_flag.as_str(), "-v=4"];
        if attaching {
            plugin_args.push("--attach-required");
        }
        plugin_args.extend(extra);
        let base = DriverWorld::start(Sidecar::Attacher, prefix, driver, &plugin_args).await;
        let node = format!("{}-node", base.ns());
        AttacherWorld { base, node, faults, volumes: Vec::new(), attachments: Vec::new(), csi_nodes: Vec::new() }
    }

    /// The plugin's faults from now on (crates/hostpath-plugin/src/faults.rs); `json!({})` clears them.
    pub fn set_faults(&self, faults: serde_json::Value) {
        std::fs::write(self.faults.path(), faults.to_string()).expect("write the fault file");
    }

    /// The flags every attacher of the world gets: the plugin, the identity, quick retries, metrics on `port`.
    pub fn attacher_args(&self, port: u16, extra: &[&str]) -> Vec<String> {
        let mut args = vec![
            format!("--csi-address={}", self.socket.display()),
            self.identity.kubeconfig_flag(),
            "--retry-interval-start=500ms".to_string(),
            "--retry-interval-max=5s".to_string(),
            format!("--http-endpoint=127.0.0.1:{port}"),
            "-v=5".to_string(),
        ];
        args.extend(extra.iter().map(|a| a.to_string()));
        args
    }

    /// Starts csi-attacher (in the world's namespace, as in a pod; as `csi-sidecars` with `E2E_SIDECAR_MODE=combined`
    /// once it runs the attacher); returns it and its metrics port.
    pub fn start_attacher(&mut self, name: &str, extra: &[&str]) -> (Process, u16) {
        let port = free_port();
        let (program, args) = sidecar_command("csi-attacher", self.attacher_args(port, extra));
        let ns = self.ns().to_string();
        let process = self.scenario.start_with_env(name, &program, &args, &[("POD_NAMESPACE", &ns)]);
        (process, port)
    }

    pub fn attachments(&self) -> Api<VolumeAttachment> {
        Api::all(self.client.clone())
    }

    pub fn pvs(&self) -> Api<PersistentVolume> {
        Api::all(self.client.clone())
    }

    /// The world's node registers the driver: its CSINode lists it with the plugin's node ID.
    pub async fn register_node(&mut self) {
        let csi_node = CSINode {
            metadata: ObjectMeta { name: Some(self.node.clone()), ..Default::default() },
            spec: CSINodeSpec {
                drivers: vec![CSINodeDriver {
                    name: self.driver.clone(),
                    node_id: PLUGIN_NODE_ID.to_string(),
                    ..Default::default()
                }],
            },
        };
        Api::<CSINode>::all(self.client.clone()).create(&PostParams::default(), &csi_node).await.unwrap();
        self.csi_nodes.push(self.node.clone());
    }

    /// A backend volume and a CSI PV naming it (`publish_secret`: its controllerPublishSecretRef, in the world's
    /// namespace). Returns the PV's name and the volume ID.
    pub async fn volume(&mut self, short: &str, publish_secret: Option<&str>) -> (String, String) {
        let name = format!("{}-{short}", self.ns());
        let created = self.csictl(&["create-volume", &name, "--size", "1Gi"]);
        let volume_id = created["volume_id"].as_str().expect("volume id").to_string();
        let pv = self.csi_volume_object(&name, &volume_id, publish_secret);
        self.pvs().create(&PostParams::default(), &pv).await.unwrap();
        self.volumes.push(name.clone());
        (name, volume_id)
    }

    /// A 1Gi ReadWriteOnce CSI PV (Retain) of the world's driver naming `volume_id`.
    pub fn csi_volume_object(&self, name: &str, volume_id: &str, publish_secret: Option<&str>) -> PersistentVolume {
        let csi = CSIPersistentVolumeSource {
            driver: self.driver.clone(),
            volume_handle: volume_id.to_string(),
            fs_type: Some("ext4".into()),
            controller_publish_secret_ref: publish_secret.map(|secret| SecretReference {
                name: Some(secret.to_string()),
                namespace: Some(self.ns().to_string()),
            }),
            ..Default::default()
        };
        pv_object(name, PersistentVolumeSpec { csi: Some(csi), ..Default::default() })
    }

    /// An in-tree GCE PD PV of the disk `pd_name` (CSI migration), without a backend volume. Returns its name.
    pub async fn in_tree_volume(&mut self, short: &str, pd_name: &str) -> String {
        let name = format!("{}-{short}", self.ns());
        let disk = GCEPersistentDiskVolumeSource { pd_name: pd_name.to_string(), ..Default::default() };
        let pv = pv_object(&name, PersistentVolumeSpec { gce_persistent_disk: Some(disk), ..Default::default() });
        self.pvs().create(&PostParams::default(), &pv).await.unwrap();
        self.volumes.push(name.clone());
        name
    }

    /// A VolumeAttachment of `pv` to the world's node, as the attach-detach controller writes one (`finalizers`:
    /// others' finalizers it starts with). Returns its name.
    pub async fn attach(&mut self, short: &str, pv: &str, finalizers: &[&str]) -> String {
        let name = format!("{}-{short}", self.ns());
        let attachment = self.attachment_object(&name, pv, finalizers);
        self.attachments().create(&PostParams::default(), &attachment).await.unwrap();
        self.attachments.push(name.clone());
        name
    }

    /// The VolumeAttachment `name` of `pv` to the world's node, with `finalizers`.
    pub fn attachment_object(&self, name: &str, pv: &str, finalizers: &[&str]) -> VolumeAttachment {
        VolumeAttachment {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                finalizers: (!finalizers.is_empty()).then(|| finalizers.iter().map(|f| f.to_string()).collect()),
                ..Default::default()
            },
            spec: VolumeAttachmentSpec {
                attacher: self.driver.clone(),
                node_name: self.node.clone(),
                source: VolumeAttachmentSource { persistent_volume_name: Some(pv.to_string()), ..Default::default() },
            },
            status: None,
        }
    }

    pub async fn secret(&self, name: &str, key: &str, value: &str) {
        let secret = Secret {
            metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
            data: Some(BTreeMap::from([(key.to_string(), ByteString(value.as_bytes().to_vec()))])),
            ..Default::default()
        };
        Api::<Secret>::namespaced(self.client.clone(), self.ns())
            .create(&PostParams::default(), &secret)
            .await
            .unwrap();
    }

    /// Waits until the VolumeAttachment satisfies `check`; returns it.
    pub async fn wait_attachment(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&VolumeAttachment) -> bool,
    ) -> VolumeAttachment {
        let api = self.attachments();
        wait_for(&format!("VolumeAttachment {name}: {what}"), TIMEOUT, || async {
            api.get_opt(name).await.ok().flatten().filter(|va| check(va))
        })
        .await
    }

    pub async fn wait_attached(&self, name: &str) -> VolumeAttachment {
        self.wait_attachment(name, "attached", |va| va.status.as_ref().is_some_and(|s| s.attached)).await
    }

    pub async fn wait_gone(&self, name: &str) {
        let api = self.attachments();
        eventually(&format!("VolumeAttachment {name} gone"), TIMEOUT, || async {
            matches!(api.get_opt(name).await, Ok(None))
        })
        .await;
    }

    pub async fn delete_attachment(&self, name: &str) {
        self.attachments().delete(name, &DeleteParams::default()).await.unwrap();
    }

    /// Removes the finalizers others put on the VolumeAttachment (the test's own ones).
    pub async fn drop_finalizers(&self, name: &str, keep: &[&str]) {
        let patch = json!({"metadata": {"finalizers": keep}});
        self.attachments().patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    }

    /// The node IDs ListVolumes says the volume is published to.
    pub fn published_nodes(&self, volume_id: &str) -> Vec<String> {
        let list = self.csictl(&["list-volumes"]);
        let volume = list.as_array().and_then(|volumes| volumes.iter().find(|v| v["volume_id"] == volume_id)).cloned();
        let volume = volume.unwrap_or_else(|| panic!("volume {volume_id} not listed: {list}"));
        let nodes = volume["published_node_ids"].as_array().cloned().unwrap_or_default();
        nodes.iter().filter_map(|n| n.as_str().map(str::to_string)).collect()
    }

    /// The plugin's logged requests of `method` for `volume_id` (the plugin logs each request at `-v=4`).
    pub fn plugin_requests(&self, method: &str, volume_id: &str) -> usize {
        let log = self.plugin.log();
        let method = format!("method=\"{method}\"");
        let volume = format!("volume_id: \"{volume_id}\"");
        log.lines().filter(|line| line.contains(&method) && line.contains(&volume)).count()
    }
}

/// A 1Gi ReadWriteOnce PV (Retain) of the given source.
fn pv_object(name: &str, source: PersistentVolumeSpec) -> PersistentVolume {
    PersistentVolume {
        metadata: ObjectMeta { name: Some(name.to_string()), ..Default::default() },
        spec: Some(PersistentVolumeSpec {
            capacity: Some(BTreeMap::from([("storage".to_string(), Quantity("1Gi".into()))])),
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            persistent_volume_reclaim_policy: Some("Retain".into()),
            ..source
        }),
        ..Default::default()
    }
}

impl std::ops::Deref for AttacherWorld {
    type Target = DriverWorld;

    fn deref(&self) -> &DriverWorld {
        &self.base
    }
}

impl std::ops::DerefMut for AttacherWorld {
    fn deref_mut(&mut self) -> &mut DriverWorld {
        &mut self.base
    }
}

impl Drop for AttacherWorld {
    fn drop(&mut self) {
        // Cluster-scoped leftovers, finalizers first (no attacher runs any more to remove its own).
        let (attachments, volumes, csi_nodes) = (
            std::mem::take(&mut self.attachments),
            std::mem::take(&mut self.volumes),
            std::mem::take(&mut self.csi_nodes),
        );
        crate::control_plane::cluster::clean_up(move |client| async move {
            let unfinalized = json!({"metadata": {"finalizers": null}});
            let params = PatchParams::default();
            let vas: Api<VolumeAttachment> = Api::all(client.clone());
            for name in &attachments {
                let _ = vas.patch(name, &params, &Patch::Merge(&unfinalized)).await;
                let _ = vas.delete(name, &DeleteParams::default()).await;
            }
            let pvs: Api<PersistentVolume> = Api::all(client.clone());
            for name in &volumes {
                let _ = pvs.patch(name, &params, &Patch::Merge(&unfinalized)).await;
                let _ = pvs.delete(name, &DeleteParams::default()).await;
            }
            let nodes: Api<CSINode> = Api::all(client);
            for name in &csi_nodes {
                let _ = nodes.delete(name, &DeleteParams::default()).await;
            }
        });
    }
}
