//! Attaching on the node (`make node-e2e`): upstream's hostpath manifests with their csi-attacher and the CSIDriver's
//! `attachRequired: true`, every image ours, hostpath-plugin with `--attach-required` (it serves
//! ControllerPublishVolume and checks at NodeStage that the publish context is its attachment's). A StatefulSet's pod
//! gets its volume attached (the VolumeAttachment kube-controller-manager makes, attached by our csi-attacher),
//! staged and published by the kubelet; once the pod goes, the volume is unpublished, unstaged and detached (the
//! VolumeAttachment gone). Then liveness: the driver's container, stopped with SIGSTOP, fails livenessprobe's
//! /healthz and the kubelet restarts it.
//!
//! The same attach and detach with charts/csi-sidecars (attacher on, the CSIDriver's `attachRequired: true`): there
//! the controller pod attaches and the node pod stages, two hostpath-plugin processes sharing one host directory with
//! `--shared-state`.

use std::path::PathBuf;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use csi_sidecars_e2e::node::driver::NodeDriver;
use csi_sidecars_e2e::node::pods::{
    NODE_NAME, NODE_TIMEOUT, Node, apply, container_status, describe, mounts_under, statefulset,
};
use csi_sidecars_e2e::wait::{eventually, wait_for};

/// The VolumeAttachments of volume `pv`.
async fn attachments_of(client: &kube::Client, pv: &str) -> Vec<VolumeAttachment> {
    let all: Api<VolumeAttachment> = Api::all(client.clone());
    let list = all.list(&Default::default()).await.map(|l| l.items).unwrap_or_default();
    list.into_iter().filter(|va| va.spec.source.persistent_volume_name.as_deref() == Some(pv)).collect()
}

/// A StatefulSet's pod with its volume attached by our csi-attacher, staged and published; then scaled to none: the
/// volume unpublished, unstaged, detached. Returns the pod's uid and the volume's PV name.
async fn attach_and_detach(driver: &mut NodeDriver, driver_pods: Vec<Pod>) -> (String, String) {
    let class = driver.storage_class("wffc", "WaitForFirstConsumer");
    apply(driver.ns(), &statefulset("db", 1, &class, "hostname > /data/id && sleep 3600"));
    let pods: Api<Pod> = Api::namespaced(driver.client.clone(), driver.ns());
    let pod = wait_for("db-0 running", NODE_TIMEOUT, || async {
        let pod = pods.get("db-0").await.ok()?;
        (pod.status.as_ref()?.phase.as_deref() == Some("Running")).then_some(pod)
    })
    .await;
    eprintln!("pods:\n{}", describe(&[driver_pods, vec![pod.clone()]].concat()));
    let volume = driver.bound("data-db-0").await;
    let pv = volume.metadata.name.clone().unwrap();
    let handle = volume.spec.as_ref().unwrap().csi.as_ref().unwrap().volume_handle.clone();

    // Attached: kube-controller-manager's VolumeAttachment, attached by our csi-attacher with the driver's
    // publish context, and the attacher's finalizer on it.
    let attachments = attachments_of(&driver.client, &pv).await;
    assert_eq!(attachments.len(), 1, "{attachments:?}");
    let attachment = &attachments[0];
    assert_eq!(attachment.spec.attacher, driver.driver);
    assert_eq!(attachment.spec.node_name, NODE_NAME);
    let status = attachment.status.as_ref().expect("the attacher wrote a status");
    assert!(status.attached, "{status:?}");
    let metadata = status.attachment_metadata.clone().unwrap_or_default();
    assert!(!metadata.is_empty(), "hostpath-plugin's publish context is in attachmentMetadata: {status:?}");
    let finalizer = format!("external-attacher/{}", driver.driver.replace('.', "-"));
    assert!(attachment.metadata.finalizers.iter().flatten().any(|f| *f == finalizer), "{:?}", attachment.metadata);

    // Staged and published: the kubelet's staging mount of the volume (NodeStage had the publish context checked by
    // the driver) and the pod's own mount of it.
    let staging_dir = PathBuf::from(format!("/var/lib/kubelet/plugins/kubernetes.io/csi/{}", driver.driver));
    assert!(!mounts_under(&staging_dir).is_empty(), "volume {handle} staged under {}", staging_dir.display());
    let uid = pod.metadata.uid.clone().unwrap();
    let volumes_dir = PathBuf::from(format!("/var/lib/kubelet/pods/{uid}/volumes"));
    assert!(mounts_under(&volumes_dir).iter().any(|m| m.contains("kubernetes.io~csi")), "published into db-0");

    // The pod goes: unpublished, unstaged, detached (kube-controller-manager deletes the VolumeAttachment; our
    // attacher calls ControllerUnpublishVolume and lets it go).
    let sets: Api<StatefulSet> = Api::namespaced(driver.client.clone(), driver.ns());
    sets.patch("db", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 0}}))).await.unwrap();
    eventually("db-0 gone, its volume unpublished and unstaged", NODE_TIMEOUT, || async {
        matches!(pods.get_opt("db-0").await, Ok(None))
            && mounts_under(&volumes_dir).is_empty()
            && mounts_under(&staging_dir).is_empty()
    })
    .await;
    eventually("the VolumeAttachment detached and gone", NODE_TIMEOUT, || async {
        attachments_of(&driver.client, &pv).await.is_empty()
    })
    .await;
    (uid, pv)
}

#[tokio::test]
#[ignore = "needs the node: make node-e2e"]
async fn a_statefulsets_volume_is_attached_staged_published_then_unpublished_unstaged_detached() {
    let mut driver = NodeDriver::install_upstream_attaching("node-attach").await;
    let driver_pods = vec![driver.upstream_pod().await];
    let (uid, pv) = attach_and_detach(&mut driver, driver_pods).await;
    let pods: Api<Pod> = Api::namespaced(driver.client.clone(), driver.ns());
    let sets: Api<StatefulSet> = Api::namespaced(driver.client.clone(), driver.ns());

    // Liveness: the driver's container stopped (alive, answering nothing) fails livenessprobe's /healthz, so the
    // kubelet restarts it, and the restarted driver serves again.
    let plugin = driver.upstream_pod().await;
    let before = container_status(&plugin, "hostpath").expect("the driver's container").clone();
    let id = before.container_id.clone().expect("a running container");
    assert!(Node::shared().signal_container(&id, "SIGSTOP"), "SIGSTOP to the driver's container {id}");
    eventually("the kubelet restarts the stopped driver", NODE_TIMEOUT, || async {
        let Ok(pod) = pods.get(&plugin.metadata.name.clone().unwrap()).await else { return false };
        container_status(&pod, "hostpath").is_some_and(|s| s.restart_count > before.restart_count && s.ready)
    })
    .await;
    let events = csi_sidecars_e2e::charts::run(
        "kubectl",
        &["get", "events", "-n", driver.ns(), "--field-selector", "reason=Unhealthy", "-o", "name"].map(String::from),
        None,
    )
    .unwrap_or_default();
    assert!(!events.trim().is_empty(), "the restart came from the failed liveness probe");
    sets.patch("db", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 1}}))).await.unwrap();
    let again = wait_for("db-0 running again on the restarted driver", NODE_TIMEOUT, || async {
        let pod = pods.get("db-0").await.ok()?;
        (pod.status.as_ref()?.phase.as_deref() == Some("Running")).then_some(pod)
    })
    .await;
    assert!(again.metadata.uid.as_deref() != Some(uid.as_str()), "a new pod, its volume attached again");
    assert_eq!(attachments_of(&driver.client, &pv).await.len(), 1);
}

#[tokio::test]
#[ignore = "needs the node: make node-e2e"]
async fn the_charts_driver_attaches_a_statefulsets_volume_and_lets_it_go() {
    let mut driver = NodeDriver::install_charts_attaching("node-attach-chart").await;
    let driver_pods = [driver.controller_pods().await, driver.node_pods().await].concat();
    let holder = driver.lease_holder(&format!("external-attacher-leader-{}", driver.driver.replace('.', "-"))).await;
    assert!(
        driver_pods.iter().any(|p| p.metadata.name.as_deref() == Some(holder.as_str())),
        "the chart's attacher leads"
    );
    attach_and_detach(&mut driver, driver_pods).await;
}
