//! Drop-in on the node (`make node-e2e`): a driver deployed the way upstream's csi-driver-host-path deploys its own
//! (one pod: the driver as root and privileged, the sidecars with no securityContext and upstream's flags, Go
//! spelling included, under a ServiceAccount bound to upstream's RBAC) works when only the sidecar images are ours.
//! The driver creates its socket as root with mode 0755; our images run as root like upstream's, so the sidecars
//! connect. The same pod with the provisioner moved to another user shows why that matters: it cannot connect, and
//! says so by name.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;

use csi_sidecars_e2e::node::{NODE_TIMEOUT, Node, apply, describe, image, logs, ready_pods};
use csi_sidecars_e2e::{Cluster, Rules, Scenario, Sidecar, SidecarIdentity, TestNamespace, eventually, wait_for};

/// Upstream's csi-hostpath-plugin.yaml, trimmed to what we ship a drop-in for, each sidecar's image swapped for
/// ours. `{user}` is the provisioner container's securityContext (empty: none, as upstream's).
fn upstream_manifest(driver: &str, state: &str, provisioner_security: &str) -> String {
    let version = env!("CARGO_PKG_VERSION");
    let plugin_dir = format!("/var/lib/kubelet/plugins/{driver}");
    format!(
        r#"apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: csi-hostpathplugin
spec:
  serviceName: csi-hostpathplugin
  replicas: 1
  selector:
    matchLabels: {{app.kubernetes.io/name: csi-hostpathplugin}}
  template:
    metadata:
      labels: {{app.kubernetes.io/name: csi-hostpathplugin}}
    spec:
      serviceAccountName: csi-hostpathplugin-sa
      terminationGracePeriodSeconds: 2
      containers:
        - name: hostpath
          image: hostpath-plugin:{version}
          imagePullPolicy: Never
          args: [--drivername={driver}, --v=5, --endpoint=$(CSI_ENDPOINT), --nodeid=$(KUBE_NODE_NAME),
            --statedir=/csi-data-dir, --node-mounts]
          env:
            - {{name: CSI_ENDPOINT, value: "unix:///csi/csi.sock"}}
            - name: KUBE_NODE_NAME
              valueFrom: {{fieldRef: {{apiVersion: v1, fieldPath: spec.nodeName}}}}
          securityContext:
            privileged: true
          volumeMounts:
            - {{mountPath: /csi, name: socket-dir}}
            - {{mountPath: /var/lib/kubelet/pods, mountPropagation: Bidirectional, name: mountpoint-dir}}
            - {{mountPath: /var/lib/kubelet/plugins, mountPropagation: Bidirectional, name: plugins-dir}}
            - {{mountPath: /csi-data-dir, name: csi-data-dir}}
            - {{mountPath: /dev, name: dev-dir}}
        - name: node-driver-registrar
          image: {registrar}
          imagePullPolicy: Never
          args: [--v=5, --csi-address=/csi/csi.sock, --kubelet-registration-path={plugin_dir}/csi.sock]
          env:
            - name: KUBE_NODE_NAME
              valueFrom: {{fieldRef: {{apiVersion: v1, fieldPath: spec.nodeName}}}}
          volumeMounts:
            - {{mountPath: /csi, name: socket-dir}}
            - {{mountPath: /registration, name: registration-dir}}
        - name: liveness-probe
          image: {livenessprobe}
          imagePullPolicy: Never
          args: [--csi-address=/csi/csi.sock, --health-port=9898]
          volumeMounts:
            - {{mountPath: /csi, name: socket-dir}}
        - name: csi-provisioner
          image: {provisioner}
          imagePullPolicy: Never
          args: [-v=5, --csi-address=/csi/csi.sock, --feature-gates=Topology=true]{provisioner_security}
          volumeMounts:
            - {{mountPath: /csi, name: socket-dir}}
        - name: csi-resizer
          image: {resizer}
          imagePullPolicy: Never
          args: [-v=5, -csi-address=/csi/csi.sock]
          volumeMounts:
            - {{mountPath: /csi, name: socket-dir}}
        - name: csi-snapshotter
          image: {snapshotter}
          imagePullPolicy: Never
          args: [-v=5, --csi-address=/csi/csi.sock]
          volumeMounts:
            - {{mountPath: /csi, name: socket-dir}}
      volumes:
        - {{name: socket-dir, hostPath: {{path: {plugin_dir}, type: DirectoryOrCreate}}}}
        - {{name: mountpoint-dir, hostPath: {{path: /var/lib/kubelet/pods, type: DirectoryOrCreate}}}}
        - {{name: registration-dir, hostPath: {{path: /var/lib/kubelet/plugins_registry, type: Directory}}}}
        - {{name: plugins-dir, hostPath: {{path: /var/lib/kubelet/plugins, type: Directory}}}}
        - {{name: csi-data-dir, hostPath: {{path: {state}, type: DirectoryOrCreate}}}}
        - {{name: dev-dir, hostPath: {{path: /dev, type: Directory}}}}
---
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata:
  name: {driver}
spec:
  attachRequired: false
  podInfoOnMount: true
  volumeLifecycleModes: [Persistent]
  fsGroupPolicy: File
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: {driver}
provisioner: {driver}
volumeBindingMode: Immediate
allowVolumeExpansion: true
"#,
        registrar = image("csi-node-driver-registrar"),
        livenessprobe = image("livenessprobe"),
        provisioner = image("csi-provisioner"),
        resizer = image("csi-resizer"),
        snapshotter = image("csi-snapshotter"),
    )
}

#[tokio::test]
#[ignore = "needs the node: make node-e2e"]
async fn upstreams_hostpath_manifests_work_with_only_the_sidecar_images_swapped() {
    let node = Node::shared();
    let client = Cluster::shared().client().await;
    let ns = TestNamespace::create(&client, "node-dropin").await;
    let scenario = Scenario::new("node-dropin");
    let driver = format!("{}.csi.k8s.io", ns.name());
    let state = node.host_dir(ns.name(), 0).display().to_string();
    // Upstream's manifests bind one ServiceAccount to every sidecar's upstream rules.
    let rules = Rules::union(&[Sidecar::Provisioner, Sidecar::Resizer, Sidecar::Snapshotter]);
    let _identity =
        SidecarIdentity::with_rules(&client, ns.name(), "csi-hostpathplugin-sa", rules, scenario.dir()).await;
    let _cleanup = ClusterScoped(driver.clone());

    apply(ns.name(), &upstream_manifest(&driver, &state, ""));
    let pods = ready_pods(&client, ns.name(), "app.kubernetes.io/name=csi-hostpathplugin", 1).await;
    eprintln!("pods (upstream's manifests):\n{}", describe(&pods));
    let pod = pods[0].metadata.name.clone().unwrap();
    for sidecar in ["csi-provisioner", "csi-resizer", "csi-snapshotter"] {
        let log = logs(ns.name(), &pod, sidecar, false);
        assert!(log.contains("connected to CSI driver"), "{sidecar} reached the root driver's socket:\n{log}");
        assert!(!log.contains("permission denied"), "{sidecar}:\n{log}");
    }
    apply(
        ns.name(),
        &format!(
            "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: data}}\nspec:\n  accessModes: [ReadWriteOnce]\n\
             \x20 storageClassName: {driver}\n  resources: {{requests: {{storage: 1Gi}}}}\n"
        ),
    );
    let claims: Api<k8s_openapi::api::core::v1::PersistentVolumeClaim> = Api::namespaced(client.clone(), ns.name());
    let volume = wait_for("claim data bound by our csi-provisioner", NODE_TIMEOUT, || async {
        let claim = claims.get("data").await.ok()?;
        (claim.status?.phase.as_deref() == Some("Bound")).then_some(claim.spec?.volume_name?)
    })
    .await;
    claims.delete("data", &Default::default()).await.unwrap();
    let volumes: Api<k8s_openapi::api::core::v1::PersistentVolume> = Api::all(client.clone());
    eventually(&format!("volume {volume} deleted by our csi-provisioner"), NODE_TIMEOUT, || async {
        matches!(volumes.get_opt(&volume).await, Ok(None))
    })
    .await;

    // The provisioner as another user than the driver's: the 0755 socket is closed to it, and it says why at once.
    apply(
        ns.name(),
        &upstream_manifest(&driver, &state, "\n          securityContext: {runAsUser: 65532, runAsGroup: 65532}"),
    );
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), ns.name());
    let replaced = wait_for("the pod replaced with the provisioner as 65532", NODE_TIMEOUT, || async {
        let pod = pods_api.get("csi-hostpathplugin-0").await.ok()?;
        let spec = pod.spec.as_ref()?;
        let provisioner = spec.containers.iter().find(|c| c.name == "csi-provisioner")?;
        let started = pod
            .status
            .as_ref()?
            .container_statuses
            .as_ref()?
            .iter()
            .any(|c| c.name == "csi-provisioner" && c.state.as_ref().is_some_and(|s| s.running.is_some()));
        (provisioner.security_context.as_ref()?.run_as_user == Some(65532) && started).then_some(pod)
    })
    .await;
    let pod = replaced.metadata.name.unwrap();
    eventually("the provisioner names the refusal", Duration::from_secs(60), || async {
        let log = logs(ns.name(), &pod, "csi-provisioner", false);
        log.contains("reason=\"permission denied\"") && log.contains("owned by 0:0 with mode 0755")
    })
    .await;
    let log = logs(ns.name(), &pod, "csi-provisioner", false);
    assert!(!log.contains("connected to CSI driver"), "{log}");
    assert!(log.contains("this process runs as 65532:65532"), "{log}");
}

/// The CSIDriver and StorageClass of the manifests are cluster-scoped: removed when the test ends.
struct ClusterScoped(String);

impl Drop for ClusterScoped {
    fn drop(&mut self) {
        for kind in ["csidriver", "storageclass"] {
            let args = ["delete", kind, &self.0, "--wait=false"].map(String::from);
            let _ = csi_sidecars_e2e::helm::run("kubectl", &args, None);
        }
    }
}
