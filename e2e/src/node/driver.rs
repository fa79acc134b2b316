//! hostpath-plugin with our sidecars on the node, every image ours, deployed one of two ways after
//! charts/snapshot-controller (`helm install --wait`):
//! - [`NodeDriver::install_charts`]: by charts/csi-sidecars, as the README's "Installing with Helm" shows, in two
//!   releases: the controller half (2 replicas, leader election, run as the chart's user) and the CSIDriver object
//!   in the test's namespace, which enforces the "restricted" Pod Security Standard (snapshot-controller there too),
//!   and the node half (the driver in node mode, csi-node-driver-registrar, livenessprobe: privileged) in a
//!   namespace of its own. Each half keeps its state apart, the controller's in an emptyDir (restricted allows no
//!   hostPath): hostpath-plugin keeps its books in memory per process, so two processes cannot share one (these
//!   tests mount no volume; [`NodeDriver::install_upstream`] runs both halves in one process for those that do).
//! - [`NodeDriver::install_upstream`]: by upstream's csi-driver-host-path manifests with the images swapped
//!   ([`crate::node::upstream_manifests`]): one pod, the driver as root.
//!
//! Each test gets its own namespace, releases and driver name (`<namespace>.csi.k8s.io`). Dropping the driver
//! releases its storage while it still runs, then uninstalls the releases and removes its classes.

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod, PodSpec};
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use snapshot_api::{VolumeGroupSnapshot, VolumeGroupSnapshotContent, VolumeSnapshot, VolumeSnapshotContent};

use crate::charts::{Chart, Release, enforce_pod_security};
use crate::control_plane::cluster::Cluster;
use crate::control_plane::namespace::TestNamespace;
use crate::node::pods::{CHART_USER, NODE_TIMEOUT, Node, apply, ready_pods};
use crate::node::upstream_manifests::hostpath_manifests;
use crate::processes::rbac::{Rules, Sidecar, SidecarIdentity};
use crate::processes::scenario::Scenario;
use crate::wait::wait_for;

/// The chart's controller pods.
const CONTROLLER_PODS: &str = "app.kubernetes.io/component=controller,app.kubernetes.io/name=csi-sidecars";
/// The ServiceAccount upstream's manifests run the driver's pod as.
const UPSTREAM_ACCOUNT: &str = "csi-hostpathplugin-sa";

/// How the chart runs the sidecars.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// One container per sidecar, each its own image (the drop-in default).
    Separate,
    /// One `csi-sidecars` container for all of them.
    Combined,
}

/// Whose sidecar images the charts run (hostpath-plugin is always ours).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Images {
    /// Ours, as the charts name them by default (`<binary>:<workspace version>`).
    Ours,
    /// Upstream's controller sidecars and snapshot-controller (`e2e/node-images.sh upstream`):
    /// `upstream.local/<binary>:upstream`, with our registrar and livenessprobe under the same names (the module proxy
    /// serves neither of upstream's).
    Upstream,
}

impl Images {
    /// The `helm --set` arguments that select these images.
    pub fn sets(&self) -> Vec<String> {
        match self {
            Images::Ours => Vec::new(),
            Images::Upstream => {
                ["--set", "image.registry=upstream.local", "--set", "image.tag=upstream"].map(String::from).to_vec()
            }
        }
    }
}

/// A driver on the node, with everything the tests made for it.
pub struct NodeDriver {
    pub client: kube::Client,
    pub driver: String,
    // Dropped in this order: the releases (their pods go), the upstream manifests' identity, then the namespaces.
    sidecars: Option<Release>,
    /// The node half's release, when it has a namespace of its own.
    node_release: Option<Release>,
    controller: Option<Release>,
    identity: Option<(SidecarIdentity, Scenario)>,
    state: PathBuf,
    /// Upstream's manifests with their csi-attacher and `attachRequired: true`.
    attach_required: bool,
    ns: TestNamespace,
    /// The node half's namespace, when not `ns`.
    node_ns: Option<TestNamespace>,
    classes: Vec<(&'static str, String)>,
}

impl NodeDriver {
    /// A new namespace with charts/snapshot-controller installed in it (its image from `images`' registry), enforcing
    /// Pod Security `level` when there is one.
    async fn prepare(prefix: &str, state_owner: u32, images: &Images, level: Option<&str>) -> NodeDriver {
        let node = Node::shared();
        let client = Cluster::shared().client().await;
        let ns = TestNamespace::create(&client, prefix).await;
        if let Some(level) = level {
            enforce_pod_security(&client, ns.name(), level).await;
        }
        let driver = format!("{}.csi.k8s.io", ns.name());
        let state = node.host_dir(ns.name(), state_owner);
        let controller = Release::install_ready(
            Chart::SnapshotController,
            &format!("{}-sc", ns.name()),
            ns.name(),
            &[
                &["--set", "featureGates.volumeGroupSnapshot=true", "--set", "image.pullPolicy=Never"]
                    .map(String::from)[..],
                &images.sets(),
            ]
            .concat(),
        );
        NodeDriver {
            client,
            driver,
            sidecars: None,
            node_release: None,
            controller: Some(controller),
            identity: None,
            state,
            attach_required: false,
            ns,
            node_ns: None,
            classes: Vec::new(),
        }
    }

    /// Both charts, every pod ready (`helm install --wait`, then each container): snapshot-controller and the
    /// controller half in a new namespace enforcing "restricted", the node half in another (privileged).
    ///
    /// The Deployment starts with one replica and is scaled to two (`helm upgrade --set replicas=2`) once that
    /// replica leads every sidecar: hostpath-plugin keeps its books in memory per process, so the sidecars' leaders
    /// must share a pod (two pods' drivers would each know only the volumes made through them). The second pod
    /// stands by for every sidecar; when the leader pod goes, it takes every Lease.
    pub async fn install_charts(prefix: &str, mode: Mode) -> NodeDriver {
        let mut installed = Self::prepare(prefix, CHART_USER, &Images::Ours, Some("restricted")).await;
        let values_file = installed.state.with_extension("values.yaml");
        let node_state = Node::shared().host_dir(&format!("{}-node", installed.ns()), 0).display().to_string();
        let all = values(&installed.driver, mode, "emptyDir: {}", &node_state, false, &[]);
        std::fs::write(&values_file, all).unwrap();
        let node_ns = TestNamespace::create(&installed.client, &format!("{prefix}-node")).await;
        let file = values_file.display().to_string();
        let node_values = ["-f", &file, "--set", "controller.enabled=false", "--set", "csiDriver.enabled=false"];
        let node_values: Vec<String> = node_values.map(String::from).to_vec();
        installed.node_release =
            Some(Release::install_ready(Chart::CsiSidecars, node_ns.name(), node_ns.name(), &node_values));
        installed.node_ns = Some(node_ns);
        let mut values = ["-f", &file, "--set", "node.enabled=false"].map(String::from).to_vec();
        let one = ["--set".to_string(), "replicas=1".to_string()];
        let sidecars =
            Release::install_ready(Chart::CsiSidecars, installed.ns(), installed.ns(), &[&values[..], &one].concat());
        let first = ready_pods(&installed.client, installed.ns(), CONTROLLER_PODS, 1).await.remove(0);
        let first = first.metadata.name.unwrap();
        for lease in installed.leases() {
            let holder = installed.lease_holder(&lease).await;
            assert_eq!(holder, first, "the one replica leads {lease}");
        }
        values.extend(["--set".to_string(), "replicas=2".to_string()]);
        sidecars.upgrade_ready(Chart::CsiSidecars, &values);
        installed.sidecars = Some(sidecars);
        // helm's --wait counts ready replicas; the tests want each pod's every container ready.
        installed.controller_pods().await;
        installed.node_pods().await;
        installed
    }

    /// charts/csi-sidecars as a driver whose CSIDriver says `attachRequired: true`, with its csi-attacher and the
    /// chart's two controller replicas: hostpath-plugin's controller and node halves share one host directory with
    /// `--shared-state` (each call reads what the others wrote), so the node half stages what a controller half made
    /// and attached, whichever replica leads.
    pub async fn install_charts_attaching(prefix: &str) -> NodeDriver {
        Self::install_charts_attaching_with(prefix, "", &[], &Images::Ours).await
    }

    /// [`NodeDriver::install_charts_attaching`] with `extra_values` (YAML) laid over the tests' values, `node_args`
    /// added to the node half's hostpath-plugin, the sidecars' images from `images`.
    pub async fn install_charts_attaching_with(
        prefix: &str,
        extra_values: &str,
        node_args: &[&str],
        images: &Images,
    ) -> NodeDriver {
        let mut installed = Self::prepare(prefix, CHART_USER, images, None).await;
        installed.attach_required = true;
        // hostpath-plugin's layout, made as the controller half's user: the node half (root) would otherwise make it
        // first, and the controller half could not write in it.
        for layout in ["volumes", "snapshots"] {
            let dir = installed.state.join(layout);
            std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
            std::os::unix::fs::chown(&dir, Some(CHART_USER), Some(CHART_USER)).expect("chown the layout");
        }
        let values_file = installed.state.with_extension("values.yaml");
        let state = installed.state.display().to_string();
        let host_state = format!("hostPath: {{path: {state}, type: Directory}}");
        std::fs::write(&values_file, values(&installed.driver, Mode::Separate, &host_state, &state, true, node_args))
            .unwrap();
        let extra_file = installed.state.with_extension("extra.yaml");
        std::fs::write(&extra_file, extra_values).unwrap();
        let values = [
            &["-f", &values_file.display().to_string(), "-f", &extra_file.display().to_string()].map(String::from)[..],
            &images.sets(),
        ]
        .concat();
        let sidecars = Release::install_ready(Chart::CsiSidecars, installed.ns(), installed.ns(), &values);
        installed.sidecars = Some(sidecars);
        installed.controller_pods().await;
        installed.node_pods().await;
        installed
    }

    /// charts/snapshot-controller and upstream's hostpath manifests with our images in a new namespace, their
    /// ServiceAccount bound to upstream's rules of each sidecar, the driver's pod ready.
    pub async fn install_upstream(prefix: &str) -> NodeDriver {
        Self::install_upstream_with(prefix, false).await
    }

    /// [`NodeDriver::install_upstream`] with upstream's csi-attacher (ours) and the CSIDriver's
    /// `attachRequired: true`: every volume is attached (ControllerPublishVolume) before the kubelet stages it.
    pub async fn install_upstream_attaching(prefix: &str) -> NodeDriver {
        Self::install_upstream_with(prefix, true).await
    }

    async fn install_upstream_with(prefix: &str, attach_required: bool) -> NodeDriver {
        let mut installed = Self::prepare(prefix, 0, &Images::Ours, None).await;
        installed.attach_required = attach_required;
        let scenario = Scenario::new(prefix);
        let mut sidecars = vec![Sidecar::Provisioner, Sidecar::Resizer, Sidecar::Snapshotter];
        sidecars.extend(attach_required.then_some(Sidecar::Attacher));
        let rules = Rules::union(&sidecars);
        let identity =
            SidecarIdentity::with_rules(&installed.client, installed.ns(), UPSTREAM_ACCOUNT, rules, scenario.dir())
                .await;
        installed.identity = Some((identity, scenario));
        installed.apply_upstream("");
        installed.upstream_pod().await;
        installed
    }

    /// Upstream's manifests again, with `provisioner_security` for the provisioner container (the StatefulSet
    /// replaces its pod).
    pub fn apply_upstream(&self, provisioner_security: &str) {
        let state = self.state.display().to_string();
        apply(self.ns(), &hostpath_manifests(&self.driver, &state, provisioner_security, self.attach_required));
    }

    /// The pod of upstream's manifests, once every container of it is ready.
    pub async fn upstream_pod(&self) -> Pod {
        ready_pods(&self.client, self.ns(), "app.kubernetes.io/name=csi-hostpathplugin", 1).await.remove(0)
    }

    pub fn ns(&self) -> &str {
        self.ns.name()
    }

    /// The node half's namespace.
    pub fn node_ns(&self) -> &str {
        self.node_ns.as_ref().unwrap_or(&self.ns).name()
    }

    /// The chart's ServiceAccount, as the API server names its user.
    pub fn account(&self) -> String {
        format!("system:serviceaccount:{}:{}-csi-sidecars", self.ns(), self.ns())
    }

    /// The two controller pods, once both are ready.
    pub async fn controller_pods(&self) -> Vec<Pod> {
        ready_pods(&self.client, self.ns(), CONTROLLER_PODS, 2).await
    }

    /// The node pod, once ready.
    pub async fn node_pods(&self) -> Vec<Pod> {
        ready_pods(&self.client, self.node_ns(), "app.kubernetes.io/component=node", 1).await
    }

    /// The snapshot-controller's pods, once ready.
    pub async fn snapshot_controller_pods(&self) -> Vec<Pod> {
        ready_pods(&self.client, self.ns(), "app.kubernetes.io/name=snapshot-controller", 2).await
    }

    /// The Leases of the chart's sidecars, as upstream names them (csi-provisioner, csi-resizer, csi-snapshotter,
    /// csi-attacher).
    pub fn leases(&self) -> [String; 4] {
        let dashed = self.driver.replace('.', "-");
        [
            dashed.clone(),
            format!("external-resizer-{dashed}"),
            format!("external-snapshotter-leader-{dashed}"),
            format!("external-attacher-leader-{dashed}"),
        ]
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

impl Drop for NodeDriver {
    fn drop(&mut self) {
        if std::thread::panicking() {
            print_pods(self.ns());
            if let Some(node_ns) = &self.node_ns {
                print_pods(node_ns.name());
            }
        }
        // What the driver serves goes while it still runs: the pods using its volumes (the kubelet needs it to
        // unpublish them), then snapshots and volumes (finalizers only its sidecars and the snapshot-controller
        // remove); then the releases, then the classes.
        let (namespace, driver) = (self.ns().to_string(), self.driver.clone());
        crate::control_plane::cluster::clean_up(move |client| async move {
            release_workloads_and_storage(&client, &namespace, &driver).await
        });
        self.sidecars.take();
        self.node_release.take();
        self.controller.take();
        self.identity.take();
        // The CSIDriver, the charts' or the manifests', is named after the driver (helm removes its own already).
        self.classes.push(("csidriver", self.driver.clone()));
        for (kind, name) in std::mem::take(&mut self.classes) {
            let _ = crate::charts::run("kubectl", &["delete", kind, &name, "--wait=false"].map(String::from), None);
        }
    }
}

/// On a failed test: every pod of the namespace, its events, and the last lines of each container's log.
fn print_pods(namespace: &str) {
    let kubectl = |args: &[&str]| {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        crate::charts::run("kubectl", &args, None).unwrap_or_else(|e| e)
    };
    eprintln!("---- pods of {namespace}:\n{}", kubectl(&["get", "pods", "-o", "wide", "-n", namespace]));
    eprintln!("---- events of {namespace}:\n{}", kubectl(&["get", "events", "-n", namespace]));
    let names =
        kubectl(&["get", "pods", "-n", namespace, "-o", "jsonpath={range .items[*]}{.metadata.name}{\" \"}{end}"]);
    for pod in names.split_whitespace() {
        let containers = kubectl(&["get", "pod", pod, "-n", namespace, "-o", "jsonpath={.spec.containers[*].name}"]);
        for container in containers.split_whitespace() {
            let log = kubectl(&["logs", pod, "-c", container, "-n", namespace, "--tail=25"]);
            eprintln!("---- {pod} {container}:\n{log}");
        }
    }
}

/// Deletes the namespace's workloads that use claims (StatefulSets with claim templates, pods with claims) and waits
/// until their pods are gone, so that the kubelet unpublishes their volumes while the driver still runs; then
/// [`release_storage`].
async fn release_workloads_and_storage(client: &kube::Client, namespace: &str, driver: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), namespace);
    let with_claims = |spec: Option<&PodSpec>| {
        spec.and_then(|s| s.volumes.as_ref()).into_iter().flatten().any(|v| v.persistent_volume_claim.is_some())
    };
    for set in sets.list(&Default::default()).await.map(|l| l.items).unwrap_or_default() {
        let spec = set.spec.as_ref();
        if spec.is_some_and(|s| s.volume_claim_templates.is_some() || with_claims(s.template.spec.as_ref())) {
            let _ = sets.delete(&set.name_any(), &DeleteParams::default()).await;
        }
    }
    let quick = DeleteParams { grace_period_seconds: Some(1), ..Default::default() };
    let users = || async {
        let list = pods.list(&Default::default()).await.map(|l| l.items).unwrap_or_default();
        list.into_iter().filter(|p| with_claims(p.spec.as_ref())).map(|p| p.name_any()).collect::<Vec<_>>()
    };
    for name in users().await {
        let _ = pods.delete(&name, &quick).await;
    }
    let started = std::time::Instant::now();
    while !users().await.is_empty() && started.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    release_storage(client, namespace, driver).await;
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
    // Each name is one kind's; the other kinds' calls find nothing.
    for name in left().await {
        unpin(&groups, &name).await;
        unpin(&snapshots, &name).await;
        unpin(&claims, &name).await;
        unpin(&volumes, &name).await;
        unpin(&contents, &name).await;
        unpin(&group_contents, &name).await;
    }
}

/// Object `name` without finalizers, and deleted.
async fn unpin<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let patch = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    let _ = api.patch(name, &PatchParams::default(), &patch).await;
    let _ = api.delete(name, &DeleteParams::default()).await;
}

/// The csi-sidecars chart's values for hostpath-plugin: the controller pods (run as the chart's user, 65532) keep
/// their state in the volume source `state` (YAML flow style: `emptyDir: {}`, or a `hostPath` that user owns);
/// the node pod (root, mounting volumes) in the host directory `node_state`. With `attaching`, the CSIDriver says `attachRequired: true` and both halves run with
/// `--attach-required --shared-state` (for one directory as both). `node_args` go to the node half's driver.
fn values(driver: &str, mode: Mode, state: &str, node_state: &str, attaching: bool, node_args: &[&str]) -> String {
    let extra = if attaching { " --attach-required, --shared-state," } else { "" };
    let node_extra: String = node_args.iter().map(|a| format!(" {a},")).collect();
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
  args: [--drivername=$(DRIVER_NAME), --endpoint=$(CSI_ENDPOINT), --nodeid=$(KUBE_NODE_NAME), --statedir=/state,{extra}
    --v=4]
  volumes: [{{name: state, {state}}}]
  volumeMounts: [{{name: state, mountPath: /state}}]
snapshotter: {{enabled: true, groupSnapshots: true}}
attacher: {{enabled: true}}
node:
  enabled: true
  driver:
    args: [--drivername=$(DRIVER_NAME), --endpoint=$(CSI_ENDPOINT), --nodeid=$(KUBE_NODE_NAME), --statedir=/state,
      --node-mounts,{extra}{node_extra} --v=4]
    volumes:
      - {{name: state, hostPath: {{path: {node_state}, type: Directory}}}}
      - {{name: dev-dir, hostPath: {{path: /dev, type: Directory}}}}
    volumeMounts:
      - {{name: state, mountPath: /state}}
      - {{name: dev-dir, mountPath: /dev}}
csiDriver: {{enabled: true, attachRequired: {attaching}}}
"#
    )
}
