//! Distributed snapshotting against the real control plane: snapshot-controller with
//! `--enable-distributed-snapshotting` labels each dynamic VolumeSnapshotContent with the node its volume lives on
//! (`snapshot.storage.kubernetes.io/managed-by`), and a csi-snapshotter per node (`--node-deployment`, `NODE_NAME`)
//! handles only the contents labelled with its node (external-snapshotter cmd/csi-snapshotter/main.go: the content
//! informer's label selector).
//!
//! A DaemonSet is modelled by two (pretend) nodes: each has a Node object labelled with its own topology value, its
//! own hostpath plugin (one driver name) and its own csi-snapshotter. Each node-local volume is a static PV whose
//! node affinity names one node's label; a third volume has no node affinity. Every sidecar runs as a
//! ServiceAccount with upstream's rules (snapshot-controller's including the optional nodes rule).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use csi_sidecars_e2e::control_plane::snapshot_crds::install_snapshot_crds;
use csi_sidecars_e2e::http::free_port;
use csi_sidecars_e2e::processes::rbac::{Sidecar, SidecarIdentity};
use csi_sidecars_e2e::processes::sidecar_mode::sidecar_command;
use csi_sidecars_e2e::wait::eventually;
use csi_sidecars_e2e::worlds::driver::csictl_at;
use csi_sidecars_e2e::worlds::provisioner::{ProvisionerWorld as World, TIMEOUT, TOPOLOGY_KEY};
use csi_sidecars_e2e::worlds::snapshot::{Snapshots, bound_to, ready, start_snapshot_controller_with};
use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, ObjectReference,
    PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec, PersistentVolumeSpec, VolumeNodeAffinity,
    VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::Api;
use kube::api::{DeleteParams, ObjectMeta, PostParams};
use snapshot_api::names::LABEL_MANAGED_BY;
use snapshot_api::{DeletionPolicy, VolumeSnapshotContent};

/// A Node object whose topology label is its own name, as a kubelet with the plugin registered would publish it.
async fn node(world: &mut World, suffix: &str) -> String {
    let name = format!("{}-{suffix}", world.ns());
    let node = Node {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some(BTreeMap::from([(TOPOLOGY_KEY.to_string(), name.clone())])),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<Node>::all(world.client.clone()).create(&PostParams::default(), &node).await.unwrap();
    world.nodes.push(name.clone());
    name
}

/// CreateVolume on the plugin at `socket`; returns the volume id.
fn plugin_volume(socket: &Path, name: &str) -> String {
    let volume = csictl_at(socket, &["create-volume", name, "--size", "1Mi"]);
    volume["volume_id"].as_str().expect("a volume id").to_string()
}

/// The snapshot ids the plugin at `socket` holds.
fn plugin_snapshots(socket: &Path) -> Vec<String> {
    let rows = csictl_at(socket, &["list-snapshots"]);
    rows.as_array().into_iter().flatten().filter_map(|row| row["snapshot_id"].as_str().map(str::to_string)).collect()
}

/// A static CSI PV for `handle` pre-bound to claim `claim`, pinned to the node labelled `node` when given, and the
/// claim; waits until they are bound.
async fn bound_claim(world: &World, claim: &str, handle: &str, node: Option<&str>) {
    let size = BTreeMap::from([("storage".to_string(), Quantity("1Mi".into()))]);
    let pv_name = format!("{}-{claim}", world.ns());
    let node_affinity = node.map(|node| VolumeNodeAffinity {
        required: Some(NodeSelector {
            node_selector_terms: vec![NodeSelectorTerm {
                match_expressions: Some(vec![NodeSelectorRequirement {
                    key: TOPOLOGY_KEY.into(),
                    operator: "In".into(),
                    values: Some(vec![node.to_string()]),
                }]),
                match_fields: None,
            }],
        }),
    });
    let pv = PersistentVolume {
        metadata: ObjectMeta { name: Some(pv_name.clone()), ..Default::default() },
        spec: Some(PersistentVolumeSpec {
            capacity: Some(size.clone()),
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            storage_class_name: Some(String::new()),
            persistent_volume_reclaim_policy: Some("Retain".into()),
            claim_ref: Some(ObjectReference {
                namespace: Some(world.ns().to_string()),
                name: Some(claim.into()),
                ..Default::default()
            }),
            csi: Some(CSIPersistentVolumeSource {
                driver: world.driver.clone(),
                volume_handle: handle.into(),
                ..Default::default()
            }),
            node_affinity,
            ..Default::default()
        }),
        ..Default::default()
    };
    world.volumes().create(&PostParams::default(), &pv).await.unwrap();
    let claim_object = PersistentVolumeClaim {
        metadata: ObjectMeta { name: Some(claim.into()), ..Default::default() },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            storage_class_name: Some(String::new()),
            volume_name: Some(pv_name),
            resources: Some(VolumeResourceRequirements { requests: Some(size), ..Default::default() }),
            ..Default::default()
        }),
        ..Default::default()
    };
    world.claim_object(claim_object).await;
    world.bound(claim).await;
}

/// Starts the csi-snapshotter of `node` beside the plugin at `socket`, as the DaemonSet's ServiceAccount.
fn start_node_snapshotter(
    world: &mut World,
    identity: &SidecarIdentity,
    node: &str,
    socket: &Path,
) -> csi_sidecars_e2e::processes::scenario::Process {
    let args = vec![
        format!("--csi-address={}", socket.display()),
        identity.kubeconfig_flag(),
        "--node-deployment".to_string(),
        "--retry-interval-start=200ms".to_string(),
        "--retry-interval-max=2s".to_string(),
        "-v=5".to_string(),
    ];
    let (program, args) = sidecar_command("csi-snapshotter", args);
    world.scenario.start_with_env(&format!("csi-snapshotter-{node}"), &program, &args, &[("NODE_NAME", node)])
}

fn managed_by(content: &VolumeSnapshotContent) -> Option<&str> {
    content.metadata.labels.as_ref()?.get(LABEL_MANAGED_BY).map(String::as_str)
}

/// Each node-local volume's snapshot is cut by its own node's csi-snapshotter and plugin (and only there), its
/// content labelled with that node; a volume without node affinity gets an unlabelled content that no
/// node-deployed csi-snapshotter takes; deleting the snapshots deletes each storage snapshot on its node.
#[tokio::test]
async fn each_node_snapshots_only_the_volumes_it_holds() {
    install_snapshot_crds(&csi_sidecars_e2e::control_plane::cluster::Cluster::shared().client().await).await;
    let mut world = World::new("snap-node", &[]).await;
    let node_a = node(&mut world, "a").await;
    let node_b = node(&mut world, "b").await;
    // node-a's plugin is the world's; node-b gets one of its own under the same driver name.
    let socket_a: PathBuf = world.socket.clone();
    let driver_flag = format!("--driver-name={}", world.driver);
    let (_plugin_b, socket_b) = world.scenario.hostpath_plugin("plugin-b", &[&driver_flag]);
    let handle_a = plugin_volume(&socket_a, "data-a");
    let handle_b = plugin_volume(&socket_b, "data-b");
    let handle_free = plugin_volume(&socket_a, "data-free");
    bound_claim(&world, "data-a", &handle_a, Some(&node_a)).await;
    bound_claim(&world, "data-b", &handle_b, Some(&node_b)).await;
    bound_claim(&world, "data-free", &handle_free, None).await;

    let _controller =
        start_snapshot_controller_with(&mut world, free_port(), &["--enable-distributed-snapshotting"]).await;
    let identity = SidecarIdentity::create(&world.client, world.ns(), Sidecar::Snapshotter, world.scenario.dir()).await;
    let _snapshotter_a = start_node_snapshotter(&mut world, &identity, &node_a, &socket_a);
    let _snapshotter_b = start_node_snapshotter(&mut world, &identity, &node_b, &socket_b);

    let mut snapshots = Snapshots::new(&world);
    let class = snapshots.class("node", DeletionPolicy::Delete, false).await;
    for claim in ["data-a", "data-b", "data-free"] {
        snapshots.snapshot_of_claim(&format!("snap-{claim}"), claim, Some(&class)).await;
    }

    let mut handles = BTreeMap::new();
    for (snapshot, node, socket, other_socket) in
        [("snap-data-a", &node_a, &socket_a, &socket_b), ("snap-data-b", &node_b, &socket_b, &socket_a)]
    {
        let taken = snapshots.wait_snapshot(snapshot, "ready", ready).await;
        let content = snapshots.contents().get(&bound_to(&taken).expect("a bound content")).await.unwrap();
        assert_eq!(managed_by(&content), Some(node.as_str()), "{snapshot}: labelled with its volume's node");
        let handle = content.status.and_then(|s| s.snapshot_handle).expect("a snapshot handle");
        assert!(plugin_snapshots(socket).contains(&handle), "{snapshot}: cut by its node's plugin");
        assert!(!plugin_snapshots(other_socket).contains(&handle), "{snapshot}: not by the other node's");
        handles.insert(snapshot, (handle, socket));
    }

    // No node's csi-snapshotter watches an unlabelled content: it is bound but never cut (as upstream).
    let free = snapshots.wait_snapshot("snap-data-free", "bound to a content", |s| bound_to(s).is_some()).await;
    let free_content = snapshots.contents().get(&bound_to(&free).unwrap()).await.unwrap();
    assert_eq!(managed_by(&free_content), None, "a volume without node affinity gets no label");
    assert!(free_content.status.and_then(|s| s.snapshot_handle).is_none(), "no node cut the unlabelled content");
    assert_eq!(plugin_snapshots(&socket_a).len() + plugin_snapshots(&socket_b).len(), 2, "two storage snapshots");

    for (snapshot, (handle, socket)) in &handles {
        snapshots.snapshots().delete(snapshot, &DeleteParams::default()).await.unwrap();
        snapshots.gone(snapshot).await;
        eventually(&format!("{snapshot}'s storage snapshot deleted on its node"), TIMEOUT, || async {
            !plugin_snapshots(socket).contains(handle)
        })
        .await;
    }
}
