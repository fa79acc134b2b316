//! The world of a provisioner test: a namespace, a hostpath plugin under a driver name of its own, and handles
//! on the API objects the tests create.
//!
//! Every test runs its own plugin under a driver name of its own (`<namespace>.csi.e2e`): all provisioners watch
//! the whole cluster, and a unique driver name keeps each test's claims, classes and volumes to its own pair of
//! processes. StorageClasses, Nodes and CSINodes are cluster-scoped, so they are named after the namespace and
//! removed when the world is dropped. The provisioners run as the world's ServiceAccount with upstream's RBAC rules
//! (crate::processes::rbac), never as admin.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{
    Event, Node, PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec, Secret, VolumeResourceRequirements,
};
use k8s_openapi::api::storage::v1::{CSINode, CSINodeDriver, CSINodeSpec, StorageClass};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::Api;
use kube::api::{DeleteParams, ListParams, ObjectMeta, PostParams};

use crate::processes::rbac::{Rules, Sidecar, SidecarIdentity};
use crate::processes::scenario::{Process, binary};
use crate::processes::sidecar_mode::sidecar_command;
use crate::wait::{eventually, wait_for};
use crate::worlds::driver::DriverWorld;

pub const TIMEOUT: Duration = Duration::from_secs(60);
pub const PROVISIONING_FINALIZER: &str = "provisioner.storage.kubernetes.io/provisioning-protection";
/// The annotation prefix of the in-flight journal's entries; the claim's UID follows.
pub const JOURNAL_ENTRY_PREFIX: &str = "provisioner.storage.kubernetes.io/in-flight-";
pub const PV_FINALIZER: &str = "external-provisioner.volume.kubernetes.io/finalizer";
/// The hostpath plugin's topology key, and the node id the harness gives every plugin.
pub const TOPOLOGY_KEY: &str = "topology.hostpath.csi/node";
pub const PLUGIN_NODE: &str = crate::processes::scenario::PLUGIN_NODE_ID;

/// One test's world: namespace, plugin, and API handles.
pub struct ProvisionerWorld {
    /// Namespace, plugin, and the ServiceAccount every provisioner of the world runs as (fields reached through
    /// `Deref`: `world.client`, `world.scenario`, …).
    pub base: DriverWorld,
    pub classes: Vec<String>,
    pub nodes: Vec<String>,
}

impl ProvisionerWorld {
    pub async fn new(prefix: &str, plugin_args: &[&str]) -> ProvisionerWorld {
        Self::with_driver(prefix, None, plugin_args).await
    }

    /// A world whose plugin has a fixed driver name (for drivers whose name means something, such as the CSI
    /// drivers that replace in-tree plugins). Only one test in the suite may use a given name.
    pub async fn with_driver(prefix: &str, driver: Option<&str>, plugin_args: &[&str]) -> ProvisionerWorld {
        let base = DriverWorld::start(Sidecar::Provisioner, prefix, driver, plugin_args).await;
        ProvisionerWorld { base, classes: Vec::new(), nodes: Vec::new() }
    }

    /// Another identity in this world, named `account`, with `rules` (e.g. upstream's less one verb).
    pub async fn identity_with(&self, account: &str, rules: Rules) -> SidecarIdentity {
        SidecarIdentity::with_rules(&self.client, self.ns(), account, rules, self.scenario.dir()).await
    }

    /// The flags of a provisioner of this world running as the world's identity, then `extra`.
    pub fn provisioner_args(&self, extra: &[&str]) -> Vec<String> {
        self.provisioner_args_as(&self.identity, extra)
    }

    pub fn provisioner_args_as(&self, identity: &SidecarIdentity, extra: &[&str]) -> Vec<String> {
        let mut args = vec![
            format!("--csi-address={}", self.socket.display()),
            identity.kubeconfig_flag(),
            "--immediate-topology=false".to_string(),
            "--retry-interval-start=500ms".to_string(),
            "--retry-interval-max=5s".to_string(),
            "-v=5".to_string(),
        ];
        args.extend(extra.iter().map(|a| a.to_string()));
        args
    }

    /// A provisioner in the world's namespace (`$POD_NAMESPACE`, as in a pod): its Leases, the in-flight journal
    /// among them, go there, where its Role lets it write them.
    pub fn start_provisioner(&mut self, name: &str, extra: &[&str]) -> Process {
        let args = self.provisioner_args(extra);
        let ns = self.ns().to_string();
        let (program, args) = sidecar_command("csi-provisioner", args);
        self.scenario.start_with_env(name, &program, &args, &[("POD_NAMESPACE", &ns)])
    }

    /// A provisioner running as `identity` instead of the world's.
    pub fn start_provisioner_as(&mut self, name: &str, identity: &SidecarIdentity, extra: &[&str]) -> Process {
        let args = self.provisioner_args_as(identity, extra);
        let ns = self.ns().to_string();
        let (program, args) = sidecar_command("csi-provisioner", args);
        self.scenario.start_with_env(name, &program, &args, &[("POD_NAMESPACE", &ns)])
    }

    /// The in-flight journal's Lease name (docs/architecture.md#in-flight-journal): the leader-election Lease's,
    /// `-in-flight`.
    pub fn journal_name(&self) -> String {
        let lease: String =
            self.driver.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '-' }).collect();
        format!("{lease}-in-flight")
    }

    /// The in-flight journal's entries, by claim UID (empty when the Lease does not exist).
    pub async fn journal(&self) -> BTreeMap<String, serde_json::Value> {
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), self.ns());
        let lease = leases.get_opt(&self.journal_name()).await.unwrap();
        let annotations = lease.and_then(|l| l.metadata.annotations).unwrap_or_default();
        annotations
            .into_iter()
            .filter_map(|(key, value)| {
                let uid = key.strip_prefix(JOURNAL_ENTRY_PREFIX)?.to_string();
                Some((uid, serde_json::from_str(&value).expect("a journal entry is JSON")))
            })
            .collect()
    }

    pub fn claims(&self) -> Api<PersistentVolumeClaim> {
        Api::namespaced(self.client.clone(), self.ns())
    }

    pub fn volumes(&self) -> Api<PersistentVolume> {
        Api::all(self.client.clone())
    }

    /// Creates an Immediate StorageClass of this test's driver; returns its name.
    pub async fn class(&mut self, suffix: &str, parameters: &[(&str, &str)], reclaim_policy: &str) -> String {
        self.class_with_binding(suffix, parameters, reclaim_policy, "Immediate").await
    }

    pub async fn class_with_binding(
        &mut self,
        suffix: &str,
        parameters: &[(&str, &str)],
        reclaim_policy: &str,
        binding: &str,
    ) -> String {
        let name = format!("{}-{suffix}", self.ns());
        let class = StorageClass {
            metadata: ObjectMeta { name: Some(name.clone()), ..Default::default() },
            provisioner: self.driver.clone(),
            parameters: Some(parameters.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            reclaim_policy: Some(reclaim_policy.to_string()),
            volume_binding_mode: Some(binding.to_string()),
            ..Default::default()
        };
        Api::<StorageClass>::all(self.client.clone()).create(&PostParams::default(), &class).await.unwrap();
        self.classes.push(name.clone());
        name
    }

    /// A Node carrying the plugin's topology label and its CSINode listing the driver and key, as a kubelet with
    /// the plugin registered would publish them. Returns the node name.
    pub async fn node(&mut self, suffix: &str) -> String {
        self.node_with(suffix, &[(TOPOLOGY_KEY, PLUGIN_NODE)], Some(&[TOPOLOGY_KEY])).await
    }

    /// A Node `<namespace>-<suffix>` with `labels`, and, when `registered_keys` says so, its CSINode listing the
    /// driver with those topology keys (`None`: the driver is not registered there). Returns the node name.
    pub async fn node_with(
        &mut self,
        suffix: &str,
        labels: &[(&str, &str)],
        registered_keys: Option<&[&str]>,
    ) -> String {
        let name = format!("{}-{suffix}", self.ns());
        let node = Node {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
                ..Default::default()
            },
            ..Default::default()
        };
        Api::<Node>::all(self.client.clone()).create(&PostParams::default(), &node).await.unwrap();
        self.nodes.push(name.clone());
        let Some(keys) = registered_keys else { return name };
        let csi_node = CSINode {
            metadata: ObjectMeta { name: Some(name.clone()), ..Default::default() },
            spec: CSINodeSpec {
                drivers: vec![CSINodeDriver {
                    name: self.driver.clone(),
                    node_id: PLUGIN_NODE.to_string(),
                    topology_keys: Some(keys.iter().map(|k| k.to_string()).collect()),
                    allocatable: None,
                }],
            },
        };
        Api::<CSINode>::all(self.client.clone()).create(&PostParams::default(), &csi_node).await.unwrap();
        name
    }

    pub async fn claim_object(&self, claim: PersistentVolumeClaim) {
        self.claims().create(&PostParams::default(), &claim).await.unwrap();
    }

    pub async fn claim(&self, name: &str, class: &str, mode: Option<&str>, access: &str) {
        self.claim_object(claim(name, class, mode, access)).await;
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

    /// Waits for the claim to be Bound; returns its volume name.
    pub async fn bound(&self, name: &str) -> String {
        let claims = self.claims();
        wait_for(&format!("claim {name} bound"), TIMEOUT, || async {
            let claim = claims.get(name).await.ok()?;
            let bound = claim.status.as_ref()?.phase.as_deref()? == "Bound";
            bound.then(|| claim.spec.and_then(|s| s.volume_name).unwrap_or_default())
        })
        .await
    }

    pub async fn events_of(&self, object: &str) -> Vec<Event> {
        let api: Api<Event> = Api::namespaced(self.client.clone(), self.ns());
        let params = ListParams::default().fields(&format!("involvedObject.name={object}"));
        api.list(&params).await.map(|l| l.items).unwrap_or_default()
    }

    /// Waits for an event with `reason` whose message contains `text`.
    pub async fn event(&self, object: &str, reason: &str, text: &str) -> Event {
        wait_for(&format!("{reason} event on {object} mentioning {text:?}"), TIMEOUT, || async {
            self.events_of(object)
                .await
                .into_iter()
                .find(|e| e.reason.as_deref() == Some(reason) && e.message.as_deref().is_some_and(|m| m.contains(text)))
        })
        .await
    }

    /// The plugin's volume ids, from ListVolumes through csictl.
    pub fn plugin_volumes(&self) -> Vec<String> {
        plugin_volumes(&self.socket)
    }

    pub async fn no_plugin_volumes_left(&self) {
        eventually("the plugin holds no volume", TIMEOUT, || async { self.plugin_volumes().is_empty() }).await;
    }
}

impl std::ops::Deref for ProvisionerWorld {
    type Target = DriverWorld;

    fn deref(&self) -> &DriverWorld {
        &self.base
    }
}

impl std::ops::DerefMut for ProvisionerWorld {
    fn deref_mut(&mut self) -> &mut DriverWorld {
        &mut self.base
    }
}

impl Drop for ProvisionerWorld {
    fn drop(&mut self) {
        // Cluster-scoped leftovers: our classes, and PVs of our claims (Retain or a failed test).
        let classes = std::mem::take(&mut self.classes);
        let nodes = std::mem::take(&mut self.nodes);
        let namespace = self.ns().to_string();
        crate::control_plane::cluster::clean_up(move |client| async move {
            let class_api: Api<StorageClass> = Api::all(client.clone());
            for class in classes {
                let _ = class_api.delete(&class, &DeleteParams::default()).await;
            }
            for node in nodes {
                let _ = Api::<CSINode>::all(client.clone()).delete(&node, &DeleteParams::default()).await;
                let _ = Api::<Node>::all(client.clone()).delete(&node, &DeleteParams::default()).await;
            }
            let pvs: Api<PersistentVolume> = Api::all(client);
            if let Ok(list) = pvs.list(&ListParams::default()).await {
                for pv in list.items {
                    let ours = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()).and_then(|r| r.namespace.as_deref())
                        == Some(namespace.as_str());
                    if ours {
                        let name = pv.metadata.name.unwrap_or_default();
                        let patch = serde_json::json!({"metadata": {"finalizers": null}});
                        let _ = pvs.patch(&name, &Default::default(), &kube::api::Patch::Merge(patch)).await;
                        let _ = pvs.delete(&name, &DeleteParams::default()).await;
                    }
                }
            }
        });
    }
}

pub fn claim(name: &str, class: &str, mode: Option<&str>, access: &str) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec![access.into()]),
            storage_class_name: Some(class.into()),
            volume_mode: mode.map(String::from),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([("storage".to_string(), Quantity("1Mi".into()))])),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub fn plugin_volumes(socket: &Path) -> Vec<String> {
    plugin_volume_rows(socket).iter().map(|row| row["volume_id"].as_str().unwrap_or_default().to_string()).collect()
}

/// The plugin's volumes' contexts (creation and current mutable parameters).
pub fn plugin_volume_contexts(socket: &Path) -> Vec<serde_json::Value> {
    plugin_volume_rows(socket).iter().map(|row| row["volume_context"].clone()).collect()
}

pub fn plugin_volume_rows(socket: &Path) -> Vec<serde_json::Value> {
    let output = std::process::Command::new(binary("csictl"))
        .arg(format!("--endpoint=unix://{}", socket.display()))
        .args(["list-volumes", "-o", "json"])
        .output()
        .expect("run csictl");
    assert!(output.status.success(), "csictl list-volumes: {}", String::from_utf8_lossy(&output.stderr));
    let rows: serde_json::Value = serde_json::from_slice(&output.stdout).expect("csictl json");
    rows.as_array().expect("a list").clone()
}

pub fn has_finalizer(meta: &ObjectMeta, finalizer: &str) -> bool {
    meta.finalizers.iter().flatten().any(|f| f == finalizer)
}
