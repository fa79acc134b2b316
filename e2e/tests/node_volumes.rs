//! Pods using the volumes, on the node (`make node-e2e`): a pod writes into a volume our csi-provisioner made
//! (filesystem and block); once it is deleted its volume is unpublished; a snapshot of it restored, and a clone of
//! it, show the data to other pods; a StatefulSet of three replicas gets a volume each when its pods are scheduled
//! (WaitForFirstConsumer).
//!
//! The driver runs as upstream's manifests deploy hostpath (one pod: driver, registrar, livenessprobe and the
//! sidecars, every image ours; snapshot-controller from its chart). Not as charts/csi-sidecars deploys a driver:
//! hostpath-plugin keeps its books in memory per process, and the chart's controller and node pods would be two
//! processes over one state directory, each blind to the other's changes.

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::DeleteParams;
use snapshot_api::VolumeSnapshot;

use csi_sidecars_e2e::node::driver::NodeDriver;
use csi_sidecars_e2e::node::pods::{
    BUSYBOX, NODE_NAME, NODE_TIMEOUT, apply, describe, logs, mounts_under, ready_pod, ready_pods, statefulset,
    succeeded,
};
use csi_sidecars_e2e::wait::{eventually, wait_for};

/// A pod that runs `script` once with claim `claim` mounted at /data (filesystem) or as /dev/xvda (block).
fn pod(name: &str, claim: &str, block: bool, script: &str) -> String {
    let attach = if block {
        "volumeDevices: [{name: v, devicePath: /dev/xvda}]"
    } else {
        "volumeMounts: [{name: v, mountPath: /data}]"
    };
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  restartPolicy: Never\n\
         \x20 terminationGracePeriodSeconds: 1\n  containers:\n    - name: {name}\n      image: {BUSYBOX}\n\
         \x20     imagePullPolicy: Never\n      command: [sh, -c, '{script}']\n      {attach}\n\
         \x20 volumes: [{{name: v, persistentVolumeClaim: {{claimName: {claim}}}}}]\n"
    )
}

/// Runs pod `name` to completion and returns what it printed.
async fn output_of(driver: &NodeDriver, name: &str, claim: &str, block: bool, script: &str) -> String {
    apply(driver.ns(), &pod(name, claim, block, script));
    succeeded(&driver.client, driver.ns(), name).await;
    logs(driver.ns(), name, name, false)
}

/// Deletes pod `name` and waits until it is gone and nothing is mounted in its directory on the node any more
/// (the kubelet had the driver unpublish its volume).
async fn deleted_and_unpublished(driver: &NodeDriver, name: &str) {
    let pods: Api<Pod> = Api::namespaced(driver.client.clone(), driver.ns());
    let uid = pods.get(name).await.unwrap().metadata.uid.unwrap();
    let volumes_dir = std::path::PathBuf::from(format!("/var/lib/kubelet/pods/{uid}/volumes"));
    let mounted = mounts_under(&volumes_dir);
    assert!(mounted.iter().any(|m| m.contains("kubernetes.io~csi")), "while the pod ran, its volume was published");
    pods.delete(name, &DeleteParams::default()).await.unwrap();
    eventually(&format!("pod {name} gone and its volume unpublished"), NODE_TIMEOUT, || async {
        matches!(pods.get_opt(name).await, Ok(None)) && mounts_under(&volumes_dir).is_empty()
    })
    .await;
}

fn snapshot(driver: &NodeDriver, name: &str, claim: &str, class: &str) {
    apply(
        driver.ns(),
        &format!(
            "apiVersion: snapshot.storage.k8s.io/v1\nkind: VolumeSnapshot\nmetadata: {{name: {name}}}\n\
             spec: {{volumeSnapshotClassName: {class}, source: {{persistentVolumeClaimName: {claim}}}}}\n"
        ),
    );
}

async fn snapshot_ready(driver: &NodeDriver, name: &str) {
    let snapshots: Api<VolumeSnapshot> = Api::namespaced(driver.client.clone(), driver.ns());
    wait_for(&format!("snapshot {name} ready"), NODE_TIMEOUT, || async {
        snapshots.get(name).await.ok()?.status?.ready_to_use?.then_some(())
    })
    .await;
}

const FROM_SNAPSHOT: &str = "  dataSource: {kind: VolumeSnapshot, apiGroup: snapshot.storage.k8s.io, name: ";

#[tokio::test]
#[ignore = "needs the node: make node-e2e"]
async fn a_pods_data_is_read_back_from_its_snapshot_and_its_clone_filesystem_and_block() {
    let mut driver = NodeDriver::install_upstream("node-volumes").await;
    let class = driver.storage_class("wffc", "WaitForFirstConsumer");
    let snapshots = driver.snapshot_classes();

    // Filesystem: written, the writer deleted (unpublished), then read from a restore and from a clone.
    driver.claim("fs", &class, "Filesystem", "", "");
    apply(driver.ns(), &pod("fs-writer", "fs", false, "echo written-by-fs-writer > /data/file && sync && sleep 3600"));
    ready_pod(&driver.client, driver.ns(), "fs-writer").await;
    driver.bound("fs").await;
    deleted_and_unpublished(&driver, "fs-writer").await;
    snapshot(&driver, "fs-snap", "fs", &snapshots);
    snapshot_ready(&driver, "fs-snap").await;
    driver.claim("fs-restored", &class, "Filesystem", "", &format!("{FROM_SNAPSHOT}fs-snap}}\n"));
    driver.claim("fs-clone", &class, "Filesystem", "", "  dataSource: {kind: PersistentVolumeClaim, name: fs}\n");
    for claim in ["fs-restored", "fs-clone"] {
        let read = output_of(&driver, &format!("{claim}-reader"), claim, false, "cat /data/file").await;
        assert_eq!(read.trim(), "written-by-fs-writer", "{claim}");
    }

    // Block: the first sector written raw, then read from a restore.
    driver.claim("blk", &class, "Block", "", "");
    let write = "printf written-by-blk-writer > /tmp/m && dd if=/tmp/m of=/dev/xvda bs=512 count=1 conv=sync,fsync";
    output_of(&driver, "blk-writer", "blk", true, write).await;
    snapshot(&driver, "blk-snap", "blk", &snapshots);
    snapshot_ready(&driver, "blk-snap").await;
    driver.claim("blk-restored", &class, "Block", "", &format!("{FROM_SNAPSHOT}blk-snap}}\n"));
    let read =
        output_of(&driver, "blk-reader", "blk-restored", true, "dd if=/dev/xvda bs=22 count=1 2>/dev/null").await;
    assert_eq!(read, "written-by-blk-writer\0", "the restored device's first bytes");

    let pods: Api<Pod> = Api::namespaced(driver.client.clone(), driver.ns());
    eprintln!("pods:\n{}", describe(&pods.list(&Default::default()).await.unwrap().items));
}

#[tokio::test]
#[ignore = "needs the node: make node-e2e"]
async fn a_statefulset_of_three_gets_a_volume_each_once_its_pods_are_scheduled() {
    let mut driver = NodeDriver::install_upstream("node-statefulset").await;
    let class = driver.storage_class("wffc", "WaitForFirstConsumer");
    apply(driver.ns(), &statefulset("web", 3, &class, "hostname > /data/id && cat /data/id && sleep 3600"));
    let pods = ready_pods(&driver.client, driver.ns(), "app=web", 3).await;
    eprintln!("pods:\n{}", describe(&pods));
    for replica in 0..3 {
        let name = format!("web-{replica}");
        let volume = driver.bound(&format!("data-{name}")).await;
        let affinity = volume.spec.as_ref().unwrap().node_affinity.as_ref().expect("the volume is the node's");
        let terms = &affinity.required.as_ref().unwrap().node_selector_terms;
        let values: Vec<&String> = terms
            .iter()
            .flat_map(|t| t.match_expressions.iter().flatten())
            .flat_map(|e| e.values.iter().flatten())
            .collect();
        assert!(values.iter().any(|v| v.as_str() == NODE_NAME), "{values:?}");
        let written = wait_for(&format!("{name} wrote its name"), NODE_TIMEOUT, || async {
            let log = logs(driver.ns(), &name, "web", false);
            (!log.trim().is_empty() && !log.contains("no logs")).then_some(log)
        })
        .await;
        assert_eq!(written.trim(), name);
    }
}
