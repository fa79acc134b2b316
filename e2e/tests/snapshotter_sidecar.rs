//! csi-snapshotter against the real control plane, with the generated snapshot CRDs and the hostpath plugin.
//!
//! No snapshot-controller runs here: each test writes what it would write (a VolumeSnapshotClass of the test's
//! driver, a VolumeSnapshot as the source reference, the VolumeSnapshotContent `snapcontent-<snapshot uid>` with the
//! bound-protection finalizer, and the being-deleted annotation before a deletion), and checks what the sidecar does
//! with it: the driver's snapshots (through csictl on the plugin's socket), the content's status, annotations,
//! finalizers and events.
//!
//! The sidecar runs as a ServiceAccount bound to upstream's csi-snapshotter ClusterRole (e2e/rbac); the tests write
//! with the admin client.

use std::time::Duration;

use csi_sidecars_e2e::control_plane::cluster::Cluster;
use csi_sidecars_e2e::control_plane::snapshot_crds::install_snapshot_crds;
use csi_sidecars_e2e::processes::rbac::Sidecar;
use csi_sidecars_e2e::processes::scenario::Process;
use csi_sidecars_e2e::processes::sidecar_mode::sidecar_command;
use csi_sidecars_e2e::wait::{eventually, wait_for};
use csi_sidecars_e2e::worlds::driver::DriverWorld;
use k8s_openapi::api::core::v1::{Event, ObjectReference};
use kube::Api;
use kube::api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;
use snapshot_api::names::{
    ANN_VOLUME_SNAPSHOT_BEING_CREATED, ANN_VOLUME_SNAPSHOT_BEING_DELETED, FINALIZER_VOLUME_SNAPSHOT_CONTENT_BOUND,
};
use snapshot_api::{
    DeletionPolicy, VolumeSnapshot, VolumeSnapshotClass, VolumeSnapshotContent, VolumeSnapshotContentSource,
    VolumeSnapshotContentSpec, VolumeSnapshotSource, VolumeSnapshotSpec,
};

const TIMEOUT: Duration = Duration::from_secs(60);

/// One test's world: a namespace, a plugin under a driver name of its own, the sidecar (as a ServiceAccount with
/// upstream's csi-snapshotter rules), and the cluster-scoped objects the test made (classes, contents), removed when
/// the world is dropped.
struct World {
    base: DriverWorld,
    /// The plugin's fault rules (a folder of its own: the plugin starts before the scenario's folder is known).
    faults_dir: tempfile::TempDir,
    sidecar: Option<Process>,
    /// How many sidecars this world started (each logs to a file of its own).
    starts: usize,
    classes: Vec<String>,
    contents: Vec<String>,
}

impl World {
    async fn new(prefix: &str) -> World {
        install_snapshot_crds(&Cluster::shared().client().await).await;
        let faults_dir = tempfile::Builder::new().prefix("e2e-faults-").tempdir().expect("faults dir");
        let faults_flag = format!("--fault-config={}", faults_dir.path().join("faults.json").display());
        let base = DriverWorld::start(Sidecar::Snapshotter, prefix, None, &[&faults_flag]).await;
        let mut world = World { base, faults_dir, sidecar: None, starts: 0, classes: Vec::new(), contents: Vec::new() };
        world.start_sidecar();
        world
    }

    fn ns(&self) -> &str {
        self.base.ns()
    }

    fn start_sidecar(&mut self) {
        let args = vec![
            format!("--csi-address={}", self.base.socket.display()),
            self.base.identity.kubeconfig_flag(),
            "--retry-interval-start=200ms".to_string(),
            "--retry-interval-max=2s".to_string(),
            "-v=5".to_string(),
        ];
        self.starts += 1;
        let name = format!("csi-snapshotter-{}", self.starts);
        let (program, args) = sidecar_command("csi-snapshotter", args);
        self.sidecar = Some(self.base.scenario.start(&name, &program, &args));
    }

    fn contents(&self) -> Api<VolumeSnapshotContent> {
        Api::all(self.base.client.clone())
    }

    /// Replaces the plugin's fault rules (atomically, as the plugin's README asks).
    fn set_faults(&self, rules: serde_json::Value) {
        let draft = self.faults_dir.path().join("faults.json.new");
        std::fs::write(&draft, rules.to_string()).unwrap();
        std::fs::rename(&draft, self.faults_dir.path().join("faults.json")).unwrap();
    }

    /// A VolumeSnapshotClass of this test's driver; returns its name.
    async fn class(&mut self, suffix: &str, parameters: &[(&str, &str)]) -> String {
        let name = format!("{}-{suffix}", self.ns());
        let parameters: serde_json::Map<String, serde_json::Value> =
            parameters.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
        let class: VolumeSnapshotClass = serde_json::from_value(json!({
            "apiVersion": "snapshot.storage.k8s.io/v1",
            "kind": "VolumeSnapshotClass",
            "metadata": {"name": name},
            "driver": self.base.driver,
            "deletionPolicy": "Delete",
            "parameters": parameters,
        }))
        .unwrap();
        Api::<VolumeSnapshotClass>::all(self.base.client.clone()).create(&PostParams::default(), &class).await.unwrap();
        self.classes.push(name.clone());
        name
    }

    /// A volume in the plugin; returns its id.
    fn volume(&self, name: &str) -> String {
        let volume = self.csictl(&["create-volume", name, "--size", "1Mi"]);
        volume["volume_id"].as_str().expect("a volume id").to_string()
    }

    /// CreateSnapshot through csictl (idempotent by name); returns the snapshot id.
    fn plugin_create_snapshot(&self, name: &str, volume: &str) -> String {
        let snapshot = self.csictl(&["create-snapshot", name, "--source-volume-id", volume]);
        snapshot["snapshot_id"].as_str().expect("a snapshot id").to_string()
    }

    /// The plugin's snapshot ids.
    fn plugin_snapshots(&self) -> Vec<String> {
        let rows = self.csictl(&["list-snapshots"]);
        rows.as_array()
            .expect("a list")
            .iter()
            .map(|row| row["snapshot_id"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    fn csictl(&self, args: &[&str]) -> serde_json::Value {
        self.base.csictl(args)
    }

    /// A VolumeSnapshot `name` (only the object: no controller binds it); returns its UID.
    async fn snapshot(&self, name: &str, class: Option<&str>) -> String {
        let snapshot = VolumeSnapshot::new(
            name,
            VolumeSnapshotSpec {
                source: VolumeSnapshotSource {
                    persistent_volume_claim_name: Some("data".into()),
                    ..Default::default()
                },
                volume_snapshot_class_name: class.map(str::to_string),
            },
        );
        let api: Api<VolumeSnapshot> = Api::namespaced(self.base.client.clone(), self.ns());
        let snapshot = api.create(&PostParams::default(), &snapshot).await.unwrap();
        snapshot.metadata.uid.expect("a UID")
    }

    /// The content the snapshot-controller creates for a dynamic snapshot `name` of `volume` in `class`, of
    /// `driver` (this test's when `None`). Returns the content's name and the snapshot's UID.
    async fn dynamic_content(
        &mut self,
        name: &str,
        class: &str,
        volume: &str,
        policy: DeletionPolicy,
        driver: Option<&str>,
    ) -> (String, String) {
        let uid = self.snapshot(name, Some(class)).await;
        let source = VolumeSnapshotContentSource { volume_handle: Some(volume.into()), snapshot_handle: None };
        let content = self.content(name, &uid, Some(class), source, policy, driver).await;
        (content, uid)
    }

    async fn content(
        &mut self,
        snapshot: &str,
        uid: &str,
        class: Option<&str>,
        source: VolumeSnapshotContentSource,
        policy: DeletionPolicy,
        driver: Option<&str>,
    ) -> String {
        let name = format!("snapcontent-{uid}");
        let mut content = VolumeSnapshotContent::new(
            &name,
            VolumeSnapshotContentSpec {
                volume_snapshot_ref: ObjectReference {
                    kind: Some("VolumeSnapshot".into()),
                    api_version: Some("snapshot.storage.k8s.io/v1".into()),
                    name: Some(snapshot.into()),
                    namespace: Some(self.ns().into()),
                    uid: Some(uid.into()),
                    ..Default::default()
                },
                deletion_policy: policy,
                driver: driver.unwrap_or(&self.base.driver).to_string(),
                volume_snapshot_class_name: class.map(str::to_string),
                source,
                source_volume_mode: None,
            },
        );
        content.metadata =
            ObjectMeta { finalizers: Some(vec![FINALIZER_VOLUME_SNAPSHOT_CONTENT_BOUND.into()]), ..content.metadata };
        self.contents().create(&PostParams::default(), &content).await.unwrap();
        self.contents.push(name.clone());
        name
    }

    /// Waits until the content is ready to use and its being-created annotation is gone; returns it. The sidecar
    /// drops the annotation in a second write after the status (upstream's order: the status must hold the handle
    /// before the annotation that stands for it goes), so a reader can see the one without the other for a moment.
    async fn ready(&self, name: &str) -> VolumeSnapshotContent {
        let contents = self.contents();
        wait_for(&format!("content {name} ready to use, being-created annotation dropped"), TIMEOUT, || async {
            let content = contents.get(name).await.ok()?;
            let ready = content.status.as_ref()?.ready_to_use == Some(true);
            let created = !annotations(&content).iter().any(|a| a == ANN_VOLUME_SNAPSHOT_BEING_CREATED);
            (ready && created).then_some(content)
        })
        .await
    }

    /// What the snapshot-controller does to delete a content: the being-deleted annotation, then the delete.
    async fn delete_content(&self, name: &str) {
        let patch = json!({"metadata": {"annotations": {ANN_VOLUME_SNAPSHOT_BEING_DELETED: "yes"}}});
        self.contents().patch(name, &PatchParams::default(), &Patch::Merge(patch)).await.unwrap();
        self.contents().delete(name, &DeleteParams::default()).await.unwrap();
    }

    async fn gone(&self, name: &str) {
        let contents = self.contents();
        eventually(&format!("content {name} gone"), TIMEOUT, || async {
            matches!(contents.get_opt(name).await, Ok(None))
        })
        .await;
    }

    /// The events about a content (cluster-scoped: recorded in `default`).
    async fn events_of(&self, content: &str) -> Vec<Event> {
        let api: Api<Event> = Api::namespaced(self.base.client.clone(), "default");
        let params = ListParams::default().fields(&format!("involvedObject.name={content}"));
        api.list(&params).await.map(|l| l.items).unwrap_or_default()
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let classes = std::mem::take(&mut self.classes);
        let contents = std::mem::take(&mut self.contents);
        csi_sidecars_e2e::control_plane::cluster::clean_up(move |client| async move {
            let class_api: Api<VolumeSnapshotClass> = Api::all(client.clone());
            for class in classes {
                let _ = class_api.delete(&class, &DeleteParams::default()).await;
            }
            let content_api: Api<VolumeSnapshotContent> = Api::all(client);
            for content in contents {
                let patch = json!({"metadata": {"finalizers": null}});
                let _ = content_api.patch(&content, &PatchParams::default(), &Patch::Merge(patch)).await;
                let _ = content_api.delete(&content, &DeleteParams::default()).await;
            }
        });
    }
}

fn annotations(content: &VolumeSnapshotContent) -> Vec<String> {
    content.metadata.annotations.iter().flatten().map(|(k, _)| k.clone()).collect()
}

/// (a) and (c): a dynamic content is cut under the name `snapshot-<snapshot uid>`, its status says so, and with the
/// Delete policy a deletion removes the driver's snapshot, then the finalizer.
#[tokio::test(flavor = "multi_thread")]
async fn dynamic_content_is_cut_then_deleted() {
    let mut world = World::new("snap-dynamic").await;
    let class = world.class("class", &[]).await;
    let volume = world.volume("source");
    let (name, uid) = world.dynamic_content("snap", &class, &volume, DeletionPolicy::Delete, None).await;

    let content = world.ready(&name).await;
    let status = content.status.clone().unwrap();
    let handle = status.snapshot_handle.clone().expect("a snapshot handle");
    assert_eq!(status.restore_size, Some(1024 * 1024), "restoreSize from the driver");
    assert!(status.creation_time.is_some_and(|t| t > 0), "creationTime from the driver");
    assert_eq!(status.error, None);
    assert_eq!(world.plugin_snapshots(), vec![handle.clone()], "exactly one snapshot in the driver");
    // CreateSnapshot is idempotent by name: the sidecar's name finds the same snapshot.
    assert_eq!(world.plugin_create_snapshot(&format!("snapshot-{uid}"), &volume), handle);
    assert_eq!(world.plugin_snapshots().len(), 1);

    world.delete_content(&name).await;
    world.gone(&name).await;
    assert!(world.plugin_snapshots().is_empty(), "DeleteSnapshot removed the driver's snapshot");
}

/// (c) Retain: the content goes, the driver's snapshot stays.
#[tokio::test(flavor = "multi_thread")]
async fn retained_snapshot_outlives_its_content() {
    let mut world = World::new("snap-retain").await;
    let class = world.class("class", &[]).await;
    let volume = world.volume("source");
    let (name, _) = world.dynamic_content("snap", &class, &volume, DeletionPolicy::Retain, None).await;
    let handle = world.ready(&name).await.status.unwrap().snapshot_handle.unwrap();

    world.delete_content(&name).await;
    world.gone(&name).await;
    assert_eq!(world.plugin_snapshots(), vec![handle], "Retain keeps the driver's snapshot");
}

/// (b) A pre-provisioned content becomes ready through ListSnapshots, with the driver's size.
#[tokio::test(flavor = "multi_thread")]
async fn pre_provisioned_content_is_checked_with_list_snapshots() {
    let mut world = World::new("snap-static").await;
    let volume = world.volume("source");
    let existing = world.plugin_create_snapshot("made-outside", &volume);
    let uid = world.snapshot("snap", None).await;
    let source = VolumeSnapshotContentSource { volume_handle: None, snapshot_handle: Some(existing.clone()) };
    let name = world.content("snap", &uid, None, source, DeletionPolicy::Retain, None).await;

    let status = world.ready(&name).await.status.unwrap();
    assert_eq!(status.snapshot_handle.as_deref(), Some(existing.as_str()));
    assert_eq!(status.restore_size, Some(1024 * 1024));
    assert_eq!(world.plugin_snapshots(), vec![existing], "nothing cut for a pre-provisioned content");
}

/// (d) The driver cuts the snapshot but its answer is lost (DeadlineExceeded after the work), and the sidecar is
/// killed: the being-created annotation was stored before the call, so the restarted sidecar asks again under the
/// same name and gets the same snapshot. A deletion asked for meanwhile waits for that answer and leaks nothing.
#[tokio::test(flavor = "multi_thread")]
async fn lost_answer_and_crash_leak_nothing() {
    let mut world = World::new("snap-crash").await;
    world.set_faults(json!({"CreateSnapshot": {"code": "DeadlineExceeded", "after_work": true}}));
    let class = world.class("class", &[]).await;
    let volume = world.volume("source");
    let (name, uid) = world.dynamic_content("snap", &class, &volume, DeletionPolicy::Delete, None).await;

    let contents = world.contents();
    wait_for("the lost answer recorded, the annotation kept", TIMEOUT, || async {
        let content = contents.get(&name).await.ok()?;
        let error = content.status.as_ref()?.error.as_ref()?.message.clone()?;
        let marked = annotations(&content).iter().any(|a| a == ANN_VOLUME_SNAPSHOT_BEING_CREATED);
        (marked && error.contains("DeadlineExceeded")).then_some(())
    })
    .await;
    assert_eq!(world.plugin_snapshots().len(), 1, "the driver did cut the snapshot");
    let mut sidecar = world.sidecar.take().unwrap();
    sidecar.kill9();
    world.sidecar = Some(sidecar);

    // The snapshot-controller asks for deletion while the outcome is unknown.
    world.delete_content(&name).await;
    let content = contents.get(&name).await.unwrap();
    assert!(content.metadata.deletion_timestamp.is_some());
    assert!(annotations(&content).iter().any(|a| a == ANN_VOLUME_SNAPSHOT_BEING_CREATED));

    world.set_faults(json!({}));
    world.start_sidecar();
    // The restarted sidecar learns the snapshot id (the annotation goes), then deletes it.
    world.gone(&name).await;
    assert!(world.plugin_snapshots().is_empty(), "the snapshot cut before the crash was deleted, not leaked");
    let log = world.sidecar.as_ref().unwrap().log();
    assert!(log.contains(&format!("snapshot-{uid}")), "the restarted sidecar asked under the same name");
}

/// (d) Without a deletion: the lost answer is retried under the same name until the content is ready, with
/// exactly one snapshot in the driver.
#[tokio::test(flavor = "multi_thread")]
async fn lost_answer_is_asked_again_under_the_same_name() {
    let mut world = World::new("snap-retry").await;
    world.set_faults(json!({"CreateSnapshot": {"code": "DeadlineExceeded", "after_work": true, "times": 2}}));
    let class = world.class("class", &[]).await;
    let volume = world.volume("source");
    let (name, _) = world.dynamic_content("snap", &class, &volume, DeletionPolicy::Delete, None).await;

    let content = world.ready(&name).await;
    let handle = content.status.clone().unwrap().snapshot_handle.unwrap();
    assert_eq!(world.plugin_snapshots(), vec![handle]);
    assert_eq!(content.status.unwrap().error, None, "readiness clears the recorded error");
    // Events go out from a background queue: the failure's may land after the content is ready.
    eventually("a SnapshotCreationFailed event naming DeadlineExceeded", TIMEOUT, || async {
        world.events_of(&name).await.iter().any(|e| {
            e.reason.as_deref() == Some("SnapshotCreationFailed")
                && e.message.as_deref().is_some_and(|m| m.contains("DeadlineExceeded"))
        })
    })
    .await;
}

/// (e) A class with an unknown reserved key: a Warning naming the key, no being-created annotation (the content
/// stays deletable), and a good content in the same run still becomes ready.
#[tokio::test(flavor = "multi_thread")]
async fn unknown_reserved_key_is_refused_before_anything_is_written() {
    let mut world = World::new("snap-badkey").await;
    let bad = world.class("bad", &[("csi.storage.k8s.io/fstype", "ext4")]).await;
    let good = world.class("good", &[]).await;
    let volume = world.volume("source");
    let (bad_content, _) = world.dynamic_content("bad", &bad, &volume, DeletionPolicy::Delete, None).await;
    let (good_content, _) = world.dynamic_content("good", &good, &volume, DeletionPolicy::Delete, None).await;

    wait_for("a Warning naming the key", TIMEOUT, || async {
        world.events_of(&bad_content).await.into_iter().find(|e| {
            e.type_.as_deref() == Some("Warning")
                && e.message.as_deref().is_some_and(|m| m.contains("csi.storage.k8s.io/fstype"))
        })
    })
    .await;
    world.ready(&good_content).await;
    let content = world.contents().get(&bad_content).await.unwrap();
    assert_eq!(content.status.and_then(|s| s.ready_to_use), Some(false));
    assert_eq!(world.plugin_snapshots().len(), 1, "only the good content was cut");

    // Deletable at once: nothing was ever asked of the driver.
    world.delete_content(&bad_content).await;
    world.gone(&bad_content).await;
}

/// (f) A content of another driver is left alone, while one of ours in the same run becomes ready.
#[tokio::test(flavor = "multi_thread")]
async fn content_of_another_driver_is_left_alone() {
    let mut world = World::new("snap-other").await;
    let class = world.class("class", &[]).await;
    let volume = world.volume("source");
    let other_driver = format!("other-{}", world.base.driver);
    let (foreign, _) =
        world.dynamic_content("foreign", &class, &volume, DeletionPolicy::Delete, Some(&other_driver)).await;
    let (ours, _) = world.dynamic_content("ours", &class, &volume, DeletionPolicy::Delete, None).await;

    world.ready(&ours).await;
    // A second sync round for good measure: the resync of a later update would have reached it by now.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let content = world.contents().get(&foreign).await.unwrap();
    assert_eq!(content.status, None, "no status written");
    assert!(annotations(&content).is_empty(), "no annotation written");
    assert!(world.events_of(&foreign).await.is_empty(), "no event");
    assert_eq!(world.plugin_snapshots().len(), 1, "only our content was cut");
}
