//! csi-provisioner with `--node-deployment` (distributed provisioning) against the real control plane.
//!
//! A DaemonSet is modelled by two (pretend) nodes, `node-a` and `node-b`: each runs its own hostpath plugin
//! (`--node-id=<node>`, so its volumes' topology names that node) and its own provisioner (`NODE_NAME=<node>`), all
//! under one driver name. That name is unique per test (`<namespace>.csi.e2e`) because provisioners watch the whole
//! cluster. No Node or CSINode objects exist: node mode takes its topology from NodeGetInfo.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use csi_sidecars_e2e::control_plane::cluster::Cluster;
use csi_sidecars_e2e::control_plane::namespace::TestNamespace;
use csi_sidecars_e2e::processes::rbac::{Sidecar, SidecarIdentity};
use csi_sidecars_e2e::processes::scenario::{Process, Scenario, binary};
use csi_sidecars_e2e::wait::{eventually, wait_for};
use csi_sidecars_e2e::worlds::provisioner::plugin_volume_rows;
use k8s_openapi::api::core::v1::VolumeResourceRequirements;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::Api;
use kube::api::{DeleteParams, ListParams, ObjectMeta, PostParams};

const TIMEOUT: Duration = Duration::from_secs(60);
const TOPOLOGY_KEY: &str = "topology.hostpath.csi/node";
const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
const IDENTITY: &str = "storage.kubernetes.io/csiProvisionerIdentity";
const NODES: [&str; 2] = ["node-a", "node-b"];

/// One pretend node: its plugin and its provisioner.
struct NodeInstance {
    name: &'static str,
    socket: PathBuf,
    _plugin: Process,
    provisioner: Process,
}

impl NodeInstance {
    /// The plugin's volume ids, from ListVolumes through csictl.
    fn volumes(&self) -> BTreeSet<String> {
        plugin_volumes(&self.socket)
    }
}

/// One test's world: namespace, the two nodes, API handles, cluster-scoped leftovers to remove.
struct World {
    client: kube::Client,
    ns: TestNamespace,
    _scenario: Scenario,
    driver: String,
    nodes: Vec<NodeInstance>,
    /// The ServiceAccount both provisioners run as (a DaemonSet's pods share one), with upstream's rules. After
    /// `nodes`: fields drop in order, and the processes must be gone before their bindings are.
    _identity: SidecarIdentity,
    classes: Vec<String>,
}

impl World {
    /// Starts both nodes; `plugin_args` gives extra plugin flags per node (e.g. a small `--capacity`).
    async fn new(prefix: &str, plugin_args: [&[&str]; 2]) -> World {
        World::with_delays(prefix, plugin_args, ["1s", "1s"], "2s").await
    }

    /// [`World::new`] with each node's `--node-deployment-base-delay` and a common `--node-deployment-max-delay`.
    async fn with_delays(prefix: &str, plugin_args: [&[&str]; 2], base_delays: [&str; 2], max_delay: &str) -> World {
        let client = Cluster::shared().client().await;
        let ns = TestNamespace::create(&client, prefix).await;
        let driver = format!("{}.csi.e2e", ns.name());
        let mut scenario = Scenario::new(&format!("node-deployment-{prefix}"));
        let identity = SidecarIdentity::create(&client, ns.name(), Sidecar::Provisioner, scenario.dir()).await;
        let mut nodes = Vec::new();
        for ((node, extra), base_delay) in NODES.into_iter().zip(plugin_args).zip(base_delays) {
            let socket = scenario.path(&format!("{node}.sock"));
            let mut args = vec![
                format!("--endpoint=unix://{}", socket.display()),
                format!("--state-dir={}", scenario.path(&format!("{node}-state")).display()),
                format!("--node-id={node}"),
                format!("--driver-name={driver}"),
                "-v=2".to_string(),
            ];
            args.extend(extra.iter().map(|a| a.to_string()));
            let plugin = scenario.start(&format!("plugin-{node}"), &binary("hostpath-plugin"), &args);
            let provisioner = scenario.start_with_env(
                &format!("provisioner-{node}"),
                &binary("csi-provisioner"),
                &provisioner_args(&identity, &socket, base_delay, max_delay),
                &[("NODE_NAME", node), ("POD_NAME", &format!("csi-provisioner-{node}"))],
            );
            nodes.push(NodeInstance { name: node, socket, _plugin: plugin, provisioner });
        }
        World { client, ns, _scenario: scenario, driver, nodes, _identity: identity, classes: Vec::new() }
    }

    fn ns(&self) -> &str {
        self.ns.name()
    }

    fn node(&self, name: &str) -> &NodeInstance {
        self.nodes.iter().find(|n| n.name == name).expect("a node of the test")
    }

    fn claims(&self) -> Api<PersistentVolumeClaim> {
        Api::namespaced(self.client.clone(), self.ns())
    }

    fn volumes(&self) -> Api<PersistentVolume> {
        Api::all(self.client.clone())
    }

    /// Creates a StorageClass of this test's driver with reclaim policy Delete; returns its name.
    async fn class(&mut self, binding: &str) -> String {
        let name = format!("{}-{}", self.ns(), binding.to_lowercase());
        let class = StorageClass {
            metadata: ObjectMeta { name: Some(name.clone()), ..Default::default() },
            provisioner: self.driver.clone(),
            reclaim_policy: Some("Delete".to_string()),
            volume_binding_mode: Some(binding.to_string()),
            ..Default::default()
        };
        Api::<StorageClass>::all(self.client.clone()).create(&PostParams::default(), &class).await.unwrap();
        self.classes.push(name.clone());
        name
    }

    /// Creates a 1Mi claim; `selected_node` plays the scheduler's part for late binding.
    async fn claim(&self, name: &str, class: &str, selected_node: Option<&str>) {
        let claim = PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some(name.into()),
                annotations: selected_node.map(|n| BTreeMap::from([(SELECTED_NODE.to_string(), n.to_string())])),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(vec!["ReadWriteOnce".into()]),
                storage_class_name: Some(class.into()),
                resources: Some(VolumeResourceRequirements {
                    requests: Some(BTreeMap::from([("storage".to_string(), Quantity("1Mi".into()))])),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        self.claims().create(&PostParams::default(), &claim).await.unwrap();
    }

    /// Waits for the claim to be Bound; returns it and its PV.
    async fn bound(&self, name: &str) -> (PersistentVolumeClaim, PersistentVolume) {
        let claims = self.claims();
        let claim = wait_for(&format!("claim {name} bound"), TIMEOUT, || async {
            let claim = claims.get(name).await.ok()?;
            (claim.status.as_ref()?.phase.as_deref()? == "Bound").then_some(claim)
        })
        .await;
        let volume_name = claim.spec.as_ref().and_then(|s| s.volume_name.clone()).unwrap();
        let volume = self.volumes().get(&volume_name).await.unwrap();
        (claim, volume)
    }

    /// Every plugin's volumes, by node.
    fn volumes_by_node(&self) -> BTreeMap<&'static str, BTreeSet<String>> {
        self.nodes.iter().map(|n| (n.name, n.volumes())).collect()
    }
}

impl Drop for World {
    fn drop(&mut self) {
        // Cluster-scoped leftovers: our classes, and PVs of our claims (a failed test).
        let classes = std::mem::take(&mut self.classes);
        let namespace = self.ns().to_string();
        csi_sidecars_e2e::control_plane::cluster::clean_up(move |client| async move {
            let class_api: Api<StorageClass> = Api::all(client.clone());
            for class in classes {
                let _ = class_api.delete(&class, &DeleteParams::default()).await;
            }
            let pvs: Api<PersistentVolume> = Api::all(client);
            let Ok(list) = pvs.list(&ListParams::default()).await else { return };
            for pv in list.items {
                let reference = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
                if reference.and_then(|r| r.namespace.as_deref()) == Some(namespace.as_str()) {
                    let name = pv.metadata.name.unwrap_or_default();
                    let patch = serde_json::json!({"metadata": {"finalizers": null}});
                    let _ = pvs.patch(&name, &Default::default(), &kube::api::Patch::Merge(patch)).await;
                    let _ = pvs.delete(&name, &DeleteParams::default()).await;
                }
            }
        });
    }
}

fn provisioner_args(identity: &SidecarIdentity, socket: &Path, base_delay: &str, max_delay: &str) -> Vec<String> {
    vec![
        format!("--csi-address={}", socket.display()),
        identity.kubeconfig_flag(),
        "--node-deployment".to_string(),
        format!("--node-deployment-base-delay={base_delay}"),
        format!("--node-deployment-max-delay={max_delay}"),
        "--retry-interval-start=500ms".to_string(),
        "--retry-interval-max=5s".to_string(),
        "-v=5".to_string(),
    ]
}

fn plugin_volumes(socket: &Path) -> BTreeSet<String> {
    plugin_volume_rows(socket).iter().map(|r| r["volume_id"].as_str().unwrap_or_default().to_string()).collect()
}

fn selected_node(claim: &PersistentVolumeClaim) -> Option<String> {
    claim.metadata.annotations.as_ref()?.get(SELECTED_NODE).cloned()
}

/// The PV's node affinity as (key, operator, values) per term.
fn affinity(volume: &PersistentVolume) -> Vec<Vec<(String, String, Vec<String>)>> {
    let terms = volume.spec.as_ref().and_then(|s| s.node_affinity.as_ref()?.required.as_ref());
    terms
        .map(|r| {
            r.node_selector_terms
                .iter()
                .map(|t| {
                    t.match_expressions
                        .iter()
                        .flatten()
                        .map(|e| (e.key.clone(), e.operator.clone(), e.values.clone().unwrap_or_default()))
                        .collect()
                })
                .collect()
        })
        .unwrap_or_default()
}

fn on_node(node: &str) -> Vec<Vec<(String, String, Vec<String>)>> {
    vec![vec![(TOPOLOGY_KEY.to_string(), "In".to_string(), vec![node.to_string()])]]
}

fn volume_handle(volume: &PersistentVolume) -> String {
    volume.spec.as_ref().and_then(|s| s.csi.as_ref()).map(|c| c.volume_handle.clone()).unwrap_or_default()
}

fn identity(volume: &PersistentVolume) -> String {
    let csi = volume.spec.as_ref().and_then(|s| s.csi.as_ref());
    csi.and_then(|c| c.volume_attributes.as_ref()?.get(IDENTITY).cloned()).unwrap_or_default()
}

#[tokio::test]
async fn late_binding_claim_is_provisioned_by_the_selected_nodes_provisioner() {
    let mut world = World::new("nd-late", [&[], &[]]).await;
    let class = world.class("WaitForFirstConsumer").await;

    world.claim("data", &class, Some("node-b")).await;
    let (claim, volume) = world.bound("data").await;

    assert_eq!(selected_node(&claim).as_deref(), Some("node-b"));
    assert_eq!(affinity(&volume), on_node("node-b"), "the volume lives on node-b");
    let identity = identity(&volume);
    assert!(identity.ends_with(&format!("-{}-node-b", world.driver)), "identity {identity} names node-b's instance");
    let handle = volume_handle(&volume);
    let by_node = world.volumes_by_node();
    assert_eq!(by_node["node-b"], BTreeSet::from([handle]), "node-b's plugin holds the volume");
    assert!(by_node["node-a"].is_empty(), "node-a's plugin holds nothing: {:?}", by_node["node-a"]);

    world.claims().delete("data", &DeleteParams::default()).await.unwrap();
    eventually("node-b's volume is deleted", TIMEOUT, || async { world.node("node-b").volumes().is_empty() }).await;
}

#[tokio::test]
async fn immediate_claims_get_exactly_one_owner_each() {
    let world = World::new("nd-immediate", [&[], &[]]).await;
    each_claim_gets_one_owner(world, 6).await;
}

#[tokio::test]
async fn simultaneous_ownership_attempts_still_give_one_owner() {
    // Waits of at most 10ms: the instances mostly write at the same moment, and Conflicts decide.
    let world = World::with_delays("nd-contention", [&[], &[]], ["10ms", "10ms"], "40ms").await;
    each_claim_gets_one_owner(world, 10).await;
}

/// Creates `count` Immediate claims and checks that each gets exactly one owner, one volume on that owner's
/// plugin and nothing anywhere else; then deletes them and checks every owner deleted its volumes.
async fn each_claim_gets_one_owner(mut world: World, count: usize) {
    let class = world.class("Immediate").await;
    let names: Vec<String> = (0..count).map(|i| format!("claim-{i}")).collect();
    for name in &names {
        world.claim(name, &class, None).await;
    }

    let mut handles_by_node: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for name in &names {
        let (claim, volume) = world.bound(name).await;
        let owner = selected_node(&claim).unwrap_or_else(|| panic!("{name} has no selected node"));
        assert!(NODES.contains(&owner.as_str()), "{name} owned by {owner}");
        assert_eq!(affinity(&volume), on_node(&owner), "{name}'s volume lives on its owner {owner}");
        assert!(identity(&volume).ends_with(&format!("-{owner}")), "{name} provisioned by {owner}'s instance");
        handles_by_node.entry(owner).or_default().insert(volume_handle(&volume));
    }
    // Exactly one volume per claim, each on its owner's plugin, and nothing else anywhere.
    let by_node = world.volumes_by_node();
    for node in NODES {
        assert_eq!(by_node[node], handles_by_node.get(node).cloned().unwrap_or_default(), "volumes of {node}");
    }
    assert_eq!(by_node.values().map(BTreeSet::len).sum::<usize>(), names.len(), "one volume per claim");
    // Every claim was won by exactly one successful Update.
    let wins: usize = world.nodes.iter().map(|n| n.provisioner.log().matches("became the claim's owner").count()).sum();
    assert_eq!(wins, names.len(), "one ownership win per claim");

    for name in &names {
        world.claims().delete(name, &DeleteParams::default()).await.unwrap();
    }
    eventually("every volume is deleted by its owner", TIMEOUT, || async {
        world.volumes_by_node().values().all(BTreeSet::is_empty)
    })
    .await;
}

#[tokio::test]
async fn only_the_owning_node_deletes_a_volume() {
    let mut world = World::new("nd-delete", [&[], &[]]).await;
    let class = world.class("WaitForFirstConsumer").await;
    world.claim("on-a", &class, Some("node-a")).await;
    world.claim("on-b", &class, Some("node-b")).await;
    let (_, volume_a) = world.bound("on-a").await;
    let (_, volume_b) = world.bound("on-b").await;
    let (handle_a, handle_b) = (volume_handle(&volume_a), volume_handle(&volume_b));
    assert_eq!(world.volumes_by_node()["node-a"], BTreeSet::from([handle_a]));
    assert_eq!(world.volumes_by_node()["node-b"], BTreeSet::from([handle_b.clone()]));

    world.claims().delete("on-a", &DeleteParams::default()).await.unwrap();
    let pv_a = volume_a.metadata.name.clone().unwrap();
    eventually("on-a's PV is deleted", TIMEOUT, || async { world.volumes().get_opt(&pv_a).await.unwrap().is_none() })
        .await;
    assert!(world.node("node-a").volumes().is_empty(), "node-a's plugin deleted the volume");
    assert_eq!(world.node("node-b").volumes(), BTreeSet::from([handle_b]), "node-b's volume is untouched");
    let log_a = world.node("node-a").provisioner.log();
    let log_b = world.node("node-b").provisioner.log();
    assert!(log_a.contains("deleting volume") && log_a.contains(&pv_a), "node-a deleted {pv_a}");
    assert!(!log_b.contains("deleting volume"), "node-b deleted nothing");
    let pv_b = volume_b.metadata.name.clone().unwrap();
    assert!(world.volumes().get_opt(&pv_b).await.unwrap().is_some(), "on-b's PV is still there");
}

#[tokio::test]
async fn a_full_node_leaves_immediate_claims_to_the_others() {
    // node-a's pool is smaller than one 1Mi claim; its short wait makes it look first.
    let mut world = World::with_delays("nd-capacity", [&["--capacity=512Ki"], &[]], ["10ms", "1s"], "2s").await;
    let class = world.class("Immediate").await;
    for name in ["big-0", "big-1", "big-2"] {
        world.claim(name, &class, None).await;
    }
    for name in ["big-0", "big-1", "big-2"] {
        let (claim, volume) = world.bound(name).await;
        assert_eq!(selected_node(&claim).as_deref(), Some("node-b"), "{name} went to the node with room");
        assert_eq!(affinity(&volume), on_node("node-b"));
    }
    assert!(world.node("node-a").volumes().is_empty(), "the full node created nothing");
    assert_eq!(world.node("node-b").volumes().len(), 3);
    assert!(world.node("node-a").provisioner.log().contains("not enough capacity on this node"));
}

#[tokio::test]
async fn node_deployment_without_node_name_refuses_to_start() {
    let client = Cluster::shared().client().await;
    let ns = TestNamespace::create(&client, "nd-no-node").await;
    let mut scenario = Scenario::new("node-deployment-no-node");
    let identity = SidecarIdentity::create(&client, ns.name(), Sidecar::Provisioner, scenario.dir()).await;
    let socket = scenario.path("absent.sock");
    let mut provisioner = scenario.start_with_env(
        "provisioner",
        &binary("csi-provisioner"),
        &provisioner_args(&identity, &socket, "1s", "2s"),
        &[("NODE_NAME", "")],
    );
    assert_ne!(provisioner.wait_exit(TIMEOUT).await, 0, "exit status");
    let log = provisioner.log();
    assert!(log.contains("NODE_NAME") && log.contains("--node-deployment"), "log names the variable: {log}");
}
