//! The charts as a user installs them, on the node (`make node-e2e`): charts/snapshot-controller and
//! charts/csi-sidecars with `helm install --wait`, our images as pods under the charts' ServiceAccounts with
//! in-cluster configuration (no kubeconfig anywhere), every pod Running and Ready (probes on
//! /healthz/leader-election), one leader per sidecar out of two replicas, and the sidecars at work: a claim
//! provisioned, expanded, snapshotted and a group snapshot cut; the driver registered in the node's CSINode by the
//! node pod. Then the leader is killed: first its container (SIGKILL through containerd), then the whole pod, and the
//! work goes on. Once with a container per sidecar, once with one csi-sidecars container in each pod.
//!
//! Pod Security as a cluster admin would set it: the controller half and snapshot-controller run in a namespace
//! enforcing the "restricted" Pod Security Standard (kube-apiserver's PodSecurity admission, on by default), the
//! node half (privileged driver, host paths) in a release of its own in a namespace that allows it.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::CSINode;
use kube::Api;
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;
use snapshot_api::{VolumeGroupSnapshot, VolumeSnapshot};

use csi_sidecars_e2e::charts::POD_SECURITY_ENFORCE;
use csi_sidecars_e2e::control_plane::audit::requests_of;
use csi_sidecars_e2e::node::driver::{Mode, NodeDriver};
use csi_sidecars_e2e::node::pods::{NODE_NAME, NODE_TIMEOUT, Node, container_status, describe, image, ready};
use csi_sidecars_e2e::wait::wait_for;

#[tokio::test]
#[ignore = "needs the node: make node-e2e"]
async fn the_charts_sidecars_work_as_pods_and_survive_their_leaders_kill() {
    charts_on_the_node(Mode::Separate).await;
}

#[tokio::test]
#[ignore = "needs the node: make node-e2e"]
async fn the_same_with_one_csi_sidecars_container() {
    charts_on_the_node(Mode::Combined).await;
}

/// The controller pods run, Ready, where "restricted" is enforced: the namespace says so, and the API server refuses
/// there what it admitted in the node half's namespace (the node pod, created again with `dryRun`).
async fn restricted_is_enforced(driver: &NodeDriver) {
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(driver.client.clone());
    let labels = namespaces.get(driver.ns()).await.unwrap().metadata.labels.unwrap_or_default();
    assert_eq!(labels.get(POD_SECURITY_ENFORCE).map(String::as_str), Some("restricted"), "{labels:?}");
    assert_ne!(driver.node_ns(), driver.ns(), "the node half has a namespace of its own");
    let mut spec = driver.node_pods().await.remove(0).spec.unwrap();
    // Every namespace's own account, so that only Pod Security tells the two namespaces apart.
    (spec.service_account_name, spec.service_account) = (Some("default".into()), None);
    let again = Pod {
        metadata: ObjectMeta { name: Some("node-pod-again".into()), ..Default::default() },
        spec: Some(spec),
        ..Default::default()
    };
    let dry_run = PostParams { dry_run: true, ..Default::default() };
    let refused = Api::<Pod>::namespaced(driver.client.clone(), driver.ns()).create(&dry_run, &again).await;
    let error = refused.expect_err("a privileged pod where restricted is enforced").to_string();
    for expected in ["violates PodSecurity \"restricted:latest\"", "privileged", "restricted volume type \"hostPath\""]
    {
        assert!(error.contains(expected), "{expected}: {error}");
    }
    Api::<Pod>::namespaced(driver.client.clone(), driver.node_ns()).create(&dry_run, &again).await.unwrap();
}

/// `pod`'s containers are `expected`, (container, binary), each with our image of the binary.
fn assert_our_images(pod: &Pod, expected: &[(&str, &str)]) {
    let containers: Vec<(String, String)> = pod
        .spec
        .as_ref()
        .unwrap()
        .containers
        .iter()
        .map(|c| (c.name.clone(), c.image.clone().unwrap_or_default()))
        .collect();
    let want: Vec<(String, String)> = expected.iter().map(|(c, b)| (c.to_string(), image(b))).collect();
    assert_eq!(containers, want, "our images in {:?}", pod.metadata.name);
}

async fn charts_on_the_node(mode: Mode) {
    let mut driver = NodeDriver::install_charts("node-charts", mode).await;
    let controllers = driver.controller_pods().await;
    let mut all = controllers.clone();
    all.extend(driver.node_pods().await);
    all.extend(driver.snapshot_controller_pods().await);
    eprintln!("pods ({mode:?}):\n{}", describe(&all));
    restricted_is_enforced(&driver).await;
    let expected: &[(&str, &str)] = match mode {
        Mode::Separate => &[
            ("driver", "hostpath-plugin"),
            ("csi-attacher", "csi-attacher"),
            ("csi-provisioner", "csi-provisioner"),
            ("csi-resizer", "csi-resizer"),
            ("csi-snapshotter", "csi-snapshotter"),
        ],
        Mode::Combined => &[("driver", "hostpath-plugin"), ("csi-sidecars", "csi-sidecars")],
    };
    for pod in &controllers {
        assert_our_images(pod, expected);
        assert!(
            pod.spec.as_ref().unwrap().service_account_name.as_deref()
                == Some(&format!("{}-csi-sidecars", driver.ns())),
            "the chart's ServiceAccount"
        );
    }

    // The node pod: the registrar and livenessprobe as containers of their own, or one csi-sidecars container
    // running both without a Kubernetes client; either way the kubelet learnt the driver through the registration.
    let node_expected: &[(&str, &str)] = match mode {
        Mode::Separate => &[
            ("driver", "hostpath-plugin"),
            ("csi-node-driver-registrar", "csi-node-driver-registrar"),
            ("livenessprobe", "livenessprobe"),
        ],
        Mode::Combined => &[("driver", "hostpath-plugin"), ("csi-sidecars", "csi-sidecars")],
    };
    for pod in driver.node_pods().await {
        assert_our_images(&pod, node_expected);
    }
    let csinodes: Api<CSINode> = Api::all(driver.client.clone());
    let registered = wait_for("the driver in the node's CSINode", NODE_TIMEOUT, || async {
        let node = csinodes.get(NODE_NAME).await.ok()?;
        node.spec.drivers.into_iter().find(|d| d.name == driver.driver)
    })
    .await;
    assert_eq!(registered.node_id, NODE_NAME, "NodeGetInfo's node ID, which the kubelet asked the registered socket");

    // Two replicas, one leader per sidecar (a Lease each, held by one of the two pods).
    let names: Vec<String> = controllers.iter().map(|p| p.metadata.name.clone().unwrap()).collect();
    for lease in driver.leases() {
        let holder = driver.lease_holder(&lease).await;
        assert!(names.contains(&holder), "Lease {lease} held by {holder}, not one of {names:?}");
    }

    // The work, through in-cluster configuration as the chart's ServiceAccount.
    let class = driver.storage_class("immediate", "Immediate");
    driver.claim("data", &class, "Filesystem", "", "");
    let volume = driver.bound("data").await;
    let volume_name = volume.metadata.name.clone().unwrap();
    assert_eq!(volume.spec.as_ref().unwrap().csi.as_ref().unwrap().driver, driver.driver);
    let creates = requests_of(&driver.account())
        .into_iter()
        .filter(|r| r.verb == "create" && r.resource == "persistentvolumes" && r.code == 201)
        .count();
    assert_eq!(creates, 1, "the PV was created by {} (the chart's ServiceAccount, in-cluster)", driver.account());

    let claims = driver.claims();
    let grow = json!({"spec": {"resources": {"requests": {"storage": "2Gi"}}}});
    claims.patch("data", &PatchParams::default(), &Patch::Merge(grow)).await.unwrap();
    let volumes: Api<k8s_openapi::api::core::v1::PersistentVolume> = Api::all(driver.client.clone());
    wait_for("the volume expanded to 2Gi by csi-resizer", NODE_TIMEOUT, || async {
        let pv = volumes.get(&volume_name).await.ok()?;
        let capacity = pv.spec?.capacity?.get("storage")?.0.clone();
        (capacity == "2Gi").then_some(())
    })
    .await;

    let snapshot_class = driver.snapshot_classes();
    csi_sidecars_e2e::node::pods::apply(
        driver.ns(),
        &format!(
            "apiVersion: snapshot.storage.k8s.io/v1\nkind: VolumeSnapshot\nmetadata: {{name: snap}}\n\
             spec: {{volumeSnapshotClassName: {snapshot_class}, source: {{persistentVolumeClaimName: data}}}}\n"
        ),
    );
    let snapshots: Api<VolumeSnapshot> = Api::namespaced(driver.client.clone(), driver.ns());
    wait_for("snapshot snap ready (snapshot-controller and csi-snapshotter)", NODE_TIMEOUT, || async {
        snapshots.get("snap").await.ok()?.status?.ready_to_use?.then_some(())
    })
    .await;

    for member in ["member-1", "member-2"] {
        driver.claim(member, &class, "Filesystem", "group: g", "");
        driver.bound(member).await;
    }
    csi_sidecars_e2e::node::pods::apply(
        driver.ns(),
        &format!(
            "apiVersion: groupsnapshot.storage.k8s.io/v1\nkind: VolumeGroupSnapshot\nmetadata: {{name: group}}\n\
             spec: {{volumeGroupSnapshotClassName: {snapshot_class}, source: {{selector: {{matchLabels: {{group: g}}}}}}}}\n"
        ),
    );
    let groups: Api<VolumeGroupSnapshot> = Api::namespaced(driver.client.clone(), driver.ns());
    wait_for("group snapshot ready", NODE_TIMEOUT, || async {
        groups.get("group").await.ok()?.status?.ready_to_use?.then_some(())
    })
    .await;

    leader_killed(&mut driver, &class, mode).await;
}

/// The provisioner's leader is killed twice. Its container, with SIGKILL: the kubelet restarts it at once under the
/// same identity (the pod's name), which client-go's rules let renew its own unexpired Lease, so the same pod leads
/// on. Then the whole pod (its containers SIGKILLed and the pod deleted, as when its node dies): the standby takes
/// the Lease once it expires. A claim is provisioned after each.
async fn leader_killed(driver: &mut NodeDriver, class: &str, mode: Mode) {
    let node = Node::shared();
    let lease = driver.leases()[0].clone();
    let leases: Api<Lease> = Api::namespaced(driver.client.clone(), driver.ns());
    let transitions = |l: &Lease| l.spec.as_ref().and_then(|s| s.lease_transitions).unwrap_or(0);
    let leader = driver.lease_holder(&lease).await;
    let before = transitions(&leases.get(&lease).await.unwrap());
    let container = match mode {
        Mode::Separate => "csi-provisioner",
        Mode::Combined => "csi-sidecars",
    };
    let pods: Api<Pod> = Api::namespaced(driver.client.clone(), driver.ns());
    let pod = pods.get(&leader).await.unwrap();
    let id = container_status(&pod, container).and_then(|c| c.container_id.clone()).expect("a running container");
    assert!(node.kill9_container(&id), "SIGKILL to {container} of {leader}");
    let restarted = wait_for(&format!("{container} of {leader} restarted and ready"), NODE_TIMEOUT, || async {
        let pod = pods.get(&leader).await.ok()?;
        (container_status(&pod, container)?.restart_count >= 1 && ready(&pod)).then_some(pod)
    })
    .await;
    let status = container_status(&restarted, container).expect("its status");
    let last = status.last_state.as_ref().and_then(|s| s.terminated.as_ref()).expect("its last run ended");
    assert_eq!(last.exit_code, 137, "SIGKILLed: {last:?}");
    driver.claim("after-kill", class, "Filesystem", "", "");
    driver.bound("after-kill").await;
    assert_eq!(driver.lease_holder(&lease).await, leader, "the restarted container leads on");
    assert_eq!(transitions(&leases.get(&lease).await.unwrap()), before, "no takeover");

    // The whole pod: every container SIGKILLed and the pod object deleted, so nothing of it comes back.
    let standby = driver
        .controller_pods()
        .await
        .into_iter()
        .map(|p| p.metadata.name.unwrap())
        .find(|name| name != &leader)
        .expect("a standby");
    let pod = pods.get(&leader).await.unwrap();
    // Cordoned, the ReplicaSet's replacement waits: the standby is the one live replica to take over.
    let cordoned = node.cordon();
    pods.delete(&leader, &DeleteParams { grace_period_seconds: Some(0), ..Default::default() }).await.unwrap();
    for status in pod.status.iter().flat_map(|s| s.container_statuses.iter().flatten()) {
        // The kubelet may have stopped some already.
        status.container_id.as_deref().map(|id| node.kill9_container(id));
    }
    wait_for(&format!("the standby {standby} leads"), NODE_TIMEOUT, || async {
        let now = leases.get(&lease).await.ok()?;
        (now.spec.as_ref()?.holder_identity.as_deref() == Some(standby.as_str())).then_some(())
    })
    .await;
    assert_eq!(transitions(&leases.get(&lease).await.unwrap()), before + 1, "one takeover");
    let claims: Api<PersistentVolumeClaim> = driver.claims();
    driver.claim("after-takeover", class, "Filesystem", "", "");
    driver.bound("after-takeover").await;
    assert!(claims.get("after-takeover").await.is_ok());
    // Uncordoned, the ReplicaSet's replacement joins as the new standby.
    drop(cordoned);
    driver.controller_pods().await;
}
