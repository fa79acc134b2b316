//! Drop-in on the node (`make node-e2e`): a driver deployed the way upstream's csi-driver-host-path deploys its own
//! (one pod: the driver as root and privileged, the sidecars with no securityContext and upstream's flags, Go
//! spelling included, under a ServiceAccount bound to upstream's RBAC) works when only the sidecar images are ours.
//! The driver creates its socket as root with mode 0755; our images run as root like upstream's, so the sidecars
//! connect. The same pod with the provisioner moved to another user shows why that matters: it cannot connect, and
//! says so by name.

use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, Pod};
use kube::Api;

use csi_sidecars_e2e::node::driver::NodeDriver;
use csi_sidecars_e2e::node::pods::{NODE_TIMEOUT, container_status, describe, logs};
use csi_sidecars_e2e::wait::{eventually, wait_for};

#[tokio::test]
#[ignore = "needs the node: make node-e2e"]
async fn upstreams_hostpath_manifests_work_with_only_the_sidecar_images_swapped() {
    let mut driver = NodeDriver::install_upstream("node-dropin").await;
    let pod = driver.upstream_pod().await;
    eprintln!("pods (upstream's manifests):\n{}", describe(std::slice::from_ref(&pod)));
    let name = pod.metadata.name.clone().unwrap();
    for sidecar in ["csi-provisioner", "csi-resizer", "csi-snapshotter"] {
        let log = logs(driver.ns(), &name, sidecar, false);
        assert!(log.contains("connected to CSI driver"), "{sidecar} reached the root driver's socket:\n{log}");
        assert!(!log.contains("permission denied"), "{sidecar}:\n{log}");
    }
    let class = driver.storage_class("immediate", "Immediate");
    driver.claim("data", &class, "Filesystem", "", "");
    let volume = driver.bound("data").await.metadata.name.unwrap();
    driver.claims().delete("data", &Default::default()).await.unwrap();
    let volumes: Api<PersistentVolume> = Api::all(driver.client.clone());
    eventually(&format!("volume {volume} deleted by our csi-provisioner"), NODE_TIMEOUT, || async {
        matches!(volumes.get_opt(&volume).await, Ok(None))
    })
    .await;

    // The provisioner as another user than the driver's: the 0755 socket is closed to it, and it says why at once.
    driver.apply_upstream("\n          securityContext: {runAsUser: 65532, runAsGroup: 65532}");
    let pods: Api<Pod> = Api::namespaced(driver.client.clone(), driver.ns());
    let replaced = wait_for("the pod replaced, its provisioner running as 65532", NODE_TIMEOUT, || async {
        let pod = pods.get("csi-hostpathplugin-0").await.ok()?;
        let provisioner = pod.spec.as_ref()?.containers.iter().find(|c| c.name == "csi-provisioner")?;
        let as_65532 = provisioner.security_context.as_ref()?.run_as_user == Some(65532);
        let running = container_status(&pod, "csi-provisioner")?.state.as_ref()?.running.is_some();
        (as_65532 && running).then_some(pod)
    })
    .await;
    let name = replaced.metadata.name.unwrap();
    eventually("the provisioner names the refusal", Duration::from_secs(60), || async {
        let log = logs(driver.ns(), &name, "csi-provisioner", false);
        log.contains("reason=\"permission denied\"") && log.contains("owned by 0:0 with mode 0755")
    })
    .await;
    let log = logs(driver.ns(), &name, "csi-provisioner", false);
    assert!(!log.contains("connected to CSI driver"), "{log}");
    assert!(log.contains("this process runs as 65532:65532"), "{log}");
}
