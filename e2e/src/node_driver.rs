//! hostpath-plugin with our sidecars, installed on the node by both charts as the README's "Installing with Helm"
//! shows: charts/snapshot-controller, then charts/csi-sidecars with the driver's controller half (2 replicas, leader
//! election, run as the chart's user) and its node half (the driver in node mode, csi-node-driver-registrar,
//! livenessprobe) and the CSIDriver object, every image ours, `helm install --wait`.
//!
//! Each test gets its own namespace, release and driver name (`<namespace>.csi.k8s.io`); the driver's state is a
//! host directory both halves mount. Dropping the install uninstalls both releases and removes its classes.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use snapshot_api::{VolumeGroupSnapshot, VolumeGroupSnapshotContent, VolumeSnapshot, VolumeSnapshotContent};

use crate::helm::{Chart, Release};
use crate::node::{CHART_USER, NODE_TIMEOUT, Node, apply, ready_pods};
use crate::{Cluster, TestNamespace, wait_for};

/// How the chart runs the sidecars.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// One container per sidecar, each its own image (the drop-in default).
    Separate,
    /// One `csi-sidecars` container for all of them.
    Combined,
}

/// A driver the charts installed, with everything the tests made for it.
pub struct ChartDriver {
    pub client: kube::Client,
    pub driver: String,
    pub mode: Mode,
    // Dropped in this order: the releases (their pods go), then the namespace.
    sidecars: Option<Release>,
    controller: Option<Release>,
    ns: TestNamespace,
    classes: Vec<(&'static str, String)>,
}

impl ChartDriver {
    /// Installs both charts into a new namespace and waits (`helm install --wait`) for every pod to be ready.
    pub async fn install(prefix: &str, mode: Mode) -> ChartDriver {
        let node = Node::shared();
        let client = Cluster::shared().client().await;
        let ns = TestNamespace::create(&client, prefix).await;
        let driver = format!("{}.csi.k8s.io", ns.name());
        let state = node.host_dir(ns.name(), CHART_USER);
        let values_file = state.with_extension("values.yaml");
        std::fs::write(&values_file, values(&driver, mode, &state.display().to_string())).unwrap();

        let controller = Release::install_ready(
            Chart::SnapshotController,
            &format!("{}-sc", ns.name()),
            ns.name(),
            &["--set", "featureGates.volumeGroupSnapshot=true", "--set", "image.pullPolicy=Never"].map(String::from),
        );
        let sidecars = Release::install_ready(
            Chart::CsiSidecars,
            ns.name(),
            ns.name(),
            &["-f".to_string(), values_file.display().to_string()],
        );
        let installed = ChartDriver {
            client,
            driver,
            mode,
            sidecars: Some(sidecars),
            controller: Some(controller),
            ns,
            classes: Vec::new(),
        };
        // helm's --wait counts ready replicas; the tests want each pod's every container ready.
        installed.controller_pods().await;
        installed.node_pods().await;
        installed
    }

    pub fn ns(&self) -> &str {
        self.ns.name()
    }

    /// The chart's ServiceAccount, as the API server names its user.
    pub fn account(&self) -> String {
        format!("system:serviceaccount:{}:{}-csi-sidecars", self.ns(), self.ns())
    }

    /// The two controller pods, once both are ready.
    pub async fn controller_pods(&self) -> Vec<Pod> {
        ready_pods(
            &self.client,
            self.ns(),
            "app.kubernetes.io/component=controller,app.kubernetes.io/name=csi-sidecars",
            2,
        )
        .await
    }

    /// The node pod, once ready.
    pub async fn node_pods(&self) -> Vec<Pod> {
        ready_pods(&self.client, self.ns(), "app.kubernetes.io/component=node", 1).await
    }

    /// The snapshot-controller's pods, once ready.
    pub async fn snapshot_controller_pods(&self) -> Vec<Pod> {
        ready_pods(&self.client, self.ns(), "app.kubernetes.io/name=snapshot-controller", 2).await
    }

    /// The Leases of the sidecars, as upstream names them (csi-provisioner, csi-resizer, csi-snapshotter).
    pub fn leases(&self) -> [String; 3] {
        let dashed = self.driver.replace('.', "-");
        [dashed.clone(), format!("external-resizer-{dashed}"), format!("external-snapshotter-leader-{dashed}")]
    }

    /// The holder of Lease `name`, once there is one.
    pub async fn lease_holder(&self, name: &str) -> String {
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), self.ns());
        wait_for(&format!("Lease {name} held"), NODE_TIMEOUT, || async {
            let holder = leases.get(name).await.ok()?.spec?.holder_identity?;
            (!holder.is_empty()).then_some(holder)
        })
        .await
    }

    /// A StorageClass of the driver (removed with the install), `Immediate` or `WaitForFirstConsumer`.
    pub fn storage_class(&mut self, suffix: &str, binding: &str) -> String {
        let name = format!("{}-{suffix}", self.ns());
        apply(
            self.ns(),
            &format!(
                "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {{name: {name}}}\nprovisioner: {}\n\
                 allowVolumeExpansion: true\nreclaimPolicy: Delete\nvolumeBindingMode: {binding}\n",
                self.driver
            ),
        );
        self.classes.push(("storageclass", name.clone()));
        name
    }

    /// The driver's VolumeSnapshotClass and VolumeGroupSnapshotClass, both named `<namespace>`, policy Delete.
    pub fn snapshot_classes(&mut self) -> String {
        let name = self.ns().to_string();
        apply(
            self.ns(),
            &format!(
                "apiVersion: snapshot.storage.k8s.io/v1\nkind: VolumeSnapshotClass\nmetadata: {{name: {name}}}\n\
                 driver: {driver}\ndeletionPolicy: Delete\n---\n\
                 apiVersion: groupsnapshot.storage.k8s.io/v1\nkind: VolumeGroupSnapshotClass\nmetadata: {{name: {name}}}\n\
                 driver: {driver}\ndeletionPolicy: Delete\n",
                driver = self.driver
            ),
        );
        self.classes.push(("volumesnapshotclass", name.clone()));
        self.classes.push(("volumegroupsnapshotclass", name.clone()));
        name
    }

    /// A 1Gi claim of `class`, `mode` Filesystem or Block, with `labels` (`key: value, ...`) and extra `spec` lines
    /// (a data source, indented by two spaces).
    pub fn claim(&self, name: &str, class: &str, mode: &str, labels: &str, spec: &str) {
        let yaml = format!(
            "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: {name}, labels: {{{labels}}}}}\nspec:\n\
             \x20 accessModes: [ReadWriteOnce]\n  storageClassName: {class}\n  volumeMode: {mode}\n\
             \x20 resources: {{requests: {{storage: 1Gi}}}}\n{spec}"
        );
        apply(self.ns(), &yaml);
    }

    pub fn claims(&self) -> Api<PersistentVolumeClaim> {
        Api::namespaced(self.client.clone(), self.ns())
    }

    /// The volume of claim `name`, once it is bound.
    pub async fn bound(&self, name: &str) -> PersistentVolume {
        let claims = self.claims();
        let volume = wait_for(&format!("claim {name} bound"), NODE_TIMEOUT, || async {
            let claim = claims.get(name).await.ok()?;
            (claim.status?.phase.as_deref() == Some("Bound")).then_some(claim.spec?.volume_name?)
        })
        .await;
        Api::<PersistentVolume>::all(self.client.clone()).get(&volume).await.unwrap()
    }
}

impl Drop for ChartDriver {
    fn drop(&mut self) {
        // What the driver made goes while it still runs (snapshots and volumes carry finalizers only its sidecars
        // and the snapshot-controller remove); then the releases, then the classes.
        let (namespace, driver) = (self.ns().to_string(), self.driver.clone());
        crate::clean_up(move |client| async move { release_storage(&client, &namespace, &driver).await });
        self.sidecars.take();
        self.controller.take();
        for (kind, name) in std::mem::take(&mut self.classes) {
            let _ = crate::helm::run("kubectl", &["delete", kind, &name, "--wait=false"].map(String::from), None);
        }
    }
}

/// Deletes the namespace's group snapshots, snapshots and claims and waits (a minute at most) until they, and
/// the driver's volumes and snapshot contents, are gone; what is left then loses its finalizers, so that neither
/// the namespace nor cluster-scoped objects outlive the test.
async fn release_storage(client: &kube::Client, namespace: &str, driver: &str) {
    let groups: Api<VolumeGroupSnapshot> = Api::namespaced(client.clone(), namespace);
    let snapshots: Api<VolumeSnapshot> = Api::namespaced(client.clone(), namespace);
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), namespace);
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    let contents: Api<VolumeSnapshotContent> = Api::all(client.clone());
    let group_contents: Api<VolumeGroupSnapshotContent> = Api::all(client.clone());
    let all = DeleteParams::default();
    let _ = groups.delete_collection(&all, &Default::default()).await;
    let _ = snapshots.delete_collection(&all, &Default::default()).await;
    let _ = claims.delete_collection(&all, &Default::default()).await;
    let ours = |d: Option<&str>| d == Some(driver);
    let left = || async {
        let mut names = Vec::new();
        names.extend(
            groups
                .list(&Default::default())
                .await
                .map(|l| l.items.into_iter().map(|o| o.name_any()).collect())
                .unwrap_or_else(|_| Vec::new()),
        );
        names.extend(
            snapshots
                .list(&Default::default())
                .await
                .map(|l| l.items.into_iter().map(|o| o.name_any()).collect())
                .unwrap_or_else(|_| Vec::new()),
        );
        names.extend(
            claims
                .list(&Default::default())
                .await
                .map(|l| l.items.into_iter().map(|o| o.name_any()).collect())
                .unwrap_or_else(|_| Vec::new()),
        );
        if let Ok(list) = volumes.list(&Default::default()).await {
            let driver_of = |v: &PersistentVolume| v.spec.as_ref()?.csi.as_ref().map(|c| c.driver.clone());
            names.extend(list.items.iter().filter(|v| ours(driver_of(v).as_deref())).map(|v| v.name_any()));
        }
        if let Ok(list) = contents.list(&Default::default()).await {
            names.extend(list.items.iter().filter(|c| ours(Some(&c.spec.driver))).map(|c| c.name_any()));
        }
        if let Ok(list) = group_contents.list(&Default::default()).await {
            names.extend(list.items.iter().filter(|c| ours(Some(&c.spec.driver))).map(|c| c.name_any()));
        }
        names
    };
    let started = std::time::Instant::now();
    while started.elapsed() < Duration::from_secs(60) {
        if left().await.is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    eprintln!("storage of {driver} still there after a minute, finalizers removed: {:?}", left().await);
    let unpin = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    let params = PatchParams::default();
    for name in left().await {
        let _ = groups.patch(&name, &params, &unpin).await;
        let _ = snapshots.patch(&name, &params, &unpin).await;
        let _ = claims.patch(&name, &params, &unpin).await;
        let _ = volumes.patch(&name, &params, &unpin).await;
        let _ = contents.patch(&name, &params, &unpin).await;
        let _ = group_contents.patch(&name, &params, &unpin).await;
        let _ = volumes.delete(&name, &all).await;
        let _ = contents.delete(&name, &all).await;
        let _ = group_contents.delete(&name, &all).await;
    }
}

/// The csi-sidecars chart's values for hostpath-plugin: its state in the host directory `state`, mounted by the
/// controller pods (as the chart's user, 65532, who owns it) and the node pod (as root, mounting volumes).
fn values(driver: &str, mode: Mode, state: &str) -> String {
    let version = env!("CARGO_PKG_VERSION");
    let mode = match mode {
        Mode::Separate => "separate",
        Mode::Combined => "combined",
    };
    format!(
        r#"mode: {mode}
image: {{pullPolicy: Never}}
driver:
  name: {driver}
  image: {{repository: hostpath-plugin, tag: "{version}", pullPolicy: Never}}
  args: [--drivername=$(DRIVER_NAME), --endpoint=$(CSI_ENDPOINT), --nodeid=$(KUBE_NODE_NAME), --statedir=/state, --v=4]
  volumes: [{{name: state, hostPath: {{path: {state}, type: Directory}}}}]
  volumeMounts: [{{name: state, mountPath: /state}}]
snapshotter: {{enabled: true, groupSnapshots: true}}
node:
  enabled: true
  driver:
    args: [--drivername=$(DRIVER_NAME), --endpoint=$(CSI_ENDPOINT), --nodeid=$(KUBE_NODE_NAME), --statedir=/state,
      --node-mounts, --v=4]
    volumes:
      - {{name: state, hostPath: {{path: {state}, type: Directory}}}}
      - {{name: dev-dir, hostPath: {{path: /dev, type: Directory}}}}
    volumeMounts:
      - {{name: state, mountPath: /state}}
      - {{name: dev-dir, mountPath: /dev}}
csiDriver: {{enabled: true}}
"#
    )
}
