//! snapshot-controller against the real control plane, with the generated snapshot CRDs, the hostpath plugin and a
//! csi-provisioner for the claims being snapshotted.
//!
//! The snapshot-controller watches every namespace, so the tests of this binary take turns ([`SERIAL`]): two
//! controllers at once would each act on the other test's snapshots. The first test writes the content's status by
//! hand where csi-snapshotter would; the second runs csi-snapshotter too, and restores through csi-provisioner.

use std::time::Duration;

use csi_sidecars_e2e::control_plane::cluster::Cluster;
use csi_sidecars_e2e::control_plane::snapshot_crds::install_snapshot_crds;
use csi_sidecars_e2e::http::{free_port, http_get};
use csi_sidecars_e2e::wait::eventually;
use csi_sidecars_e2e::worlds::provisioner::{ProvisionerWorld as World, TIMEOUT, has_finalizer};
use csi_sidecars_e2e::worlds::snapshot::{
    Snapshots, bound_to, ready, start_csi_snapshotter, start_snapshot_controller,
};
use kube::ResourceExt;
use kube::api::DeleteParams;
use snapshot_api::DeletionPolicy;

const AS_SOURCE: &str = "snapshot.storage.kubernetes.io/volumesnapshot-as-source-protection";
const BOUND: &str = "snapshot.storage.kubernetes.io/volumesnapshot-bound-protection";
const CONTENT_BOUND: &str = "snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection";
const CLAIM_AS_SOURCE: &str = "snapshot.storage.kubernetes.io/pvc-as-source-protection";
const BEING_DELETED: &str = "snapshot.storage.kubernetes.io/volumesnapshot-being-deleted";

/// One snapshot-controller at a time in the cluster.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test]
async fn snapshot_controller_binds_creates_and_deletes_snapshots() {
    let _turn = SERIAL.lock().await;
    install_snapshot_crds(&Cluster::shared().client().await).await;
    let mut world = World::new("snapctl", &[]).await;
    let storage_class = world.class("data", &[], "Delete").await;
    let _provisioner = world.start_provisioner("csi-provisioner", &[]);
    let metrics_port = free_port();
    let _controller = start_snapshot_controller(&mut world, metrics_port).await;
    let mut snaps = Snapshots::new(&world);
    world.claim("data", &storage_class, None, "ReadWriteOnce").await;
    let volume = world.bound("data").await;
    let handle = world.volumes().get(&volume).await.unwrap().spec.unwrap().csi.unwrap().volume_handle;

    // Dynamic snapshot with the driver's default class: the class is written in, the content created as upstream
    // names and fills it, the finalizers go on, and the content's status comes back as the snapshot's.
    let default_class = snaps.class("default", DeletionPolicy::Delete, true).await;
    let first = snaps.snapshot_of_claim("first", "data", None).await;
    let uid = first.uid().unwrap();
    let content_name = format!("snapcontent-{uid}");
    let first = snaps.wait_snapshot("first", "bound", |s| bound_to(s).is_some()).await;
    assert_eq!(first.spec.volume_snapshot_class_name.as_deref(), Some(default_class.as_str()));
    assert_eq!(bound_to(&first).as_deref(), Some(content_name.as_str()));
    assert!(!ready(&first));
    let content = snaps.contents().get(&content_name).await.unwrap();
    assert_eq!(content.spec.driver, world.driver);
    assert_eq!(content.spec.deletion_policy, DeletionPolicy::Delete);
    assert_eq!(content.spec.source.volume_handle.as_deref(), Some(handle.as_str()));
    assert_eq!(content.spec.source_volume_mode.as_deref(), Some("Filesystem"));
    assert_eq!(content.spec.volume_snapshot_class_name.as_deref(), Some(default_class.as_str()));
    assert_eq!(content.spec.volume_snapshot_ref.uid.as_deref(), Some(uid.as_str()));
    assert_eq!(content.spec.volume_snapshot_ref.kind.as_deref(), Some("VolumeSnapshot"));
    world.event("first", "CreatingSnapshot", "Waiting for a snapshot").await;
    let first = snaps
        .wait_snapshot("first", "both finalizers", |s| {
            has_finalizer(&s.metadata, AS_SOURCE) && has_finalizer(&s.metadata, BOUND)
        })
        .await;
    assert!(has_finalizer(&first.metadata, AS_SOURCE));
    eventually("the content is protected", TIMEOUT, || async {
        has_finalizer(&snaps.contents().get(&content_name).await.unwrap().metadata, CONTENT_BOUND)
    })
    .await;
    let claim = world.claims().get("data").await.unwrap();
    assert!(has_finalizer(&claim.metadata, CLAIM_AS_SOURCE), "the claim is protected while the snapshot is cut");

    snaps.cut(&content_name, "snap-handle-1", 1 << 30).await;
    let first = snaps.wait_snapshot("first", "ready", ready).await;
    let status = first.status.unwrap();
    assert_eq!(status.restore_size.map(|q| q.0).as_deref(), Some("1Gi"));
    assert!(status.creation_time.is_some());
    world.event("first", "SnapshotReady", "is ready to use").await;
    world.event("first", "SnapshotCreated", "was successfully created").await;
    eventually("the claim's protection is lifted once the snapshot is ready", TIMEOUT, || async {
        !has_finalizer(&world.claims().get("data").await.unwrap().metadata, CLAIM_AS_SOURCE)
    })
    .await;

    // Two defaults for one driver: an event naming both, and nothing is created.
    let second_default = snaps.class("default-2", DeletionPolicy::Delete, true).await;
    let ambiguous = snaps.snapshot_of_claim("ambiguous", "data", None).await;
    let event = world.event("ambiguous", "SetDefaultSnapshotClassFailed", "2 default snapshot classes").await;
    let message = event.message.unwrap();
    assert!(message.contains(&default_class) && message.contains(&second_default), "{message}");
    assert!(snaps.contents().get_opt(&format!("snapcontent-{}", ambiguous.uid().unwrap())).await.unwrap().is_none());
    snaps.delete_class(&second_default).await;
    snaps.snapshots().delete("ambiguous", &DeleteParams::default()).await.unwrap();
    snaps.gone("ambiguous").await;

    // A class created after its snapshot: an event naming it, then the snapshot goes on once it appears.
    let later = format!("{}-later", world.ns());
    snaps.snapshot_of_claim("waiting", "data", Some(&later)).await;
    world.event("waiting", "GetSnapshotClassFailed", &later).await;
    snaps.class("later", DeletionPolicy::Retain, false).await;
    let waiting = snaps.wait_snapshot("waiting", "bound once the class exists", |s| bound_to(s).is_some()).await;
    let waiting_content = bound_to(&waiting).unwrap();
    assert_eq!(
        snaps.contents().get(&waiting_content).await.unwrap().spec.deletion_policy,
        DeletionPolicy::Retain,
        "the content takes the class's policy"
    );

    // A snapshot of a claim that does not exist says so, and the others go on.
    snaps.snapshot_of_claim("orphan", "no-such-claim", Some(&default_class)).await;
    world.event("orphan", "SnapshotContentCreationFailed", "cannot get claim from snapshot").await;

    // Pre-provisioned: the content is bound (its UID filled in) and its status carried over.
    let pre_content = snaps.preprovisioned_content("pre", "pre", "snap-handle-pre").await;
    snaps.cut(&pre_content, "snap-handle-pre", 4096).await;
    snaps.snapshot_of_content("pre", &pre_content).await;
    let pre = snaps.wait_snapshot("pre", "ready", ready).await;
    assert_eq!(bound_to(&pre).as_deref(), Some(pre_content.as_str()));
    assert_eq!(pre.status.unwrap().restore_size.map(|q| q.0).as_deref(), Some("4Ki"));
    let bound = snaps.contents().get(&pre_content).await.unwrap();
    assert_eq!(bound.spec.volume_snapshot_ref.uid, pre.metadata.uid);

    // Misbound: a content that points at another snapshot is refused and left as it is.
    let other = snaps.preprovisioned_content("other", "someone-else", "snap-handle-other").await;
    snaps.snapshot_of_content("misbound", &other).await;
    world.event("misbound", "SnapshotContentMisbound", &other).await;
    let untouched = snaps.contents().get(&other).await.unwrap();
    assert_eq!(untouched.spec.volume_snapshot_ref.name.as_deref(), Some("someone-else"));
    assert_eq!(untouched.spec.volume_snapshot_ref.uid, None);

    // Retain: the snapshot goes, the content stays, marked for csi-snapshotter.
    snaps.cut(&waiting_content, "snap-handle-2", 1 << 30).await;
    snaps.wait_snapshot("waiting", "ready", ready).await;
    snaps.snapshots().delete("waiting", &DeleteParams::default()).await.unwrap();
    snaps.gone("waiting").await;
    let kept = snaps.contents().get(&waiting_content).await.unwrap();
    assert!(kept.metadata.deletion_timestamp.is_none(), "a Retain content is kept");
    assert_eq!(kept.annotations().get(BEING_DELETED).map(String::as_str), Some("yes"));

    // Delete: the content is deleted too, and the snapshot waits for it to be gone (csi-snapshotter's part).
    snaps.snapshots().delete("first", &DeleteParams::default()).await.unwrap();
    eventually("the content is being deleted", TIMEOUT, || async {
        let content = snaps.contents().get(&content_name).await.unwrap();
        content.metadata.deletion_timestamp.is_some() && content.annotations().contains_key(BEING_DELETED)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let first = snaps.snapshots().get("first").await.unwrap();
    assert!(has_finalizer(&first.metadata, BOUND), "the snapshot waits for its content");
    assert!(!has_finalizer(&first.metadata, AS_SOURCE));
    snaps.release_content(&content_name).await;
    snaps.gone("first").await;

    // Upstream's operation metrics: the creation and readiness of "first", its deletion, each timed once.
    let metrics = http_get(metrics_port, "/metrics").await;
    for operation in ["CreateSnapshot", "CreateSnapshotAndReady", "DeleteSnapshot"] {
        let series = format!(
            "snapshot_controller_operation_total_seconds_count{{driver_name=\"{}\",operation_name=\"{operation}\",operation_status=\"success\",snapshot_type=\"dynamic\"}}",
            world.driver
        );
        assert!(metrics.lines().any(|l| l.starts_with(&series)), "{series} in\n{metrics}");
    }
    assert!(metrics.contains("snapshot_controller_operations_in_flight"), "{metrics}");
}

/// csi-snapshotter beside the test's plugin, as a ServiceAccount with upstream's rules (process first, as above).
fn restore_claim(
    name: &str,
    class: &str,
    snapshot: &str,
    mode: Option<&str>,
) -> k8s_openapi::api::core::v1::PersistentVolumeClaim {
    let mut restored = csi_sidecars_e2e::worlds::provisioner::claim(name, class, mode, "ReadWriteOnce");
    restored.spec.as_mut().unwrap().data_source = Some(k8s_openapi::api::core::v1::TypedLocalObjectReference {
        api_group: Some("snapshot.storage.k8s.io".into()),
        kind: "VolumeSnapshot".into(),
        name: snapshot.into(),
    });
    restored
}

/// The plugin's snapshots.
fn plugin_snapshots(world: &World) -> Vec<serde_json::Value> {
    world.csictl(&["list-snapshots"]).as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn snapshots_are_cut_restored_and_deleted_with_csi_snapshotter() {
    let _turn = SERIAL.lock().await;
    install_snapshot_crds(&Cluster::shared().client().await).await;
    let faults = tempfile::NamedTempFile::new().unwrap();
    let fault_flag = format!("--fault-config={}", faults.path().display());
    let mut world = World::new("snapstory", &[fault_flag.as_str()]).await;
    let storage_class = world.class("data", &[], "Delete").await;
    let _provisioner = world.start_provisioner("csi-provisioner", &[]);
    let _controller = start_snapshot_controller(&mut world, free_port()).await;
    let _snapshotter = start_csi_snapshotter(&mut world).await;
    let mut snaps = Snapshots::new(&world);
    snaps.class("default", DeletionPolicy::Delete, true).await;
    world.claim("fs", &storage_class, None, "ReadWriteOnce").await;
    world.claim("blk", &storage_class, Some("Block"), "ReadWriteOnce").await;
    let fs_pv = world.bound("fs").await;
    world.bound("blk").await;

    // Cut by the driver: ready, with the driver's handle and size, under upstream's names.
    let fs = snaps.snapshot_of_claim("snap-fs", "fs", None).await;
    snaps.snapshot_of_claim("snap-blk", "blk", None).await;
    let snap_fs = snaps.wait_snapshot("snap-fs", "ready", ready).await;
    snaps.wait_snapshot("snap-blk", "ready", ready).await;
    assert_eq!(bound_to(&snap_fs), Some(format!("snapcontent-{}", fs.uid().unwrap())));
    assert!(snap_fs.status.as_ref().unwrap().restore_size.is_some());
    let fs_content = snaps.contents().get(&bound_to(&snap_fs).unwrap()).await.unwrap();
    let fs_handle = fs_content.status.unwrap().snapshot_handle.expect("the driver's snapshot id");
    // CreateSnapshot is idempotent by name: asking again under `snapshot-<uid>` gives the same snapshot.
    let fs_volume = world.volumes().get(&fs_pv).await.unwrap().spec.unwrap().csi.unwrap().volume_handle;
    let again = world.csictl(&[
        "create-snapshot",
        &format!("snapshot-{}", fs.uid().unwrap()),
        "--source-volume-id",
        &fs_volume,
    ]);
    assert_eq!(again["snapshot_id"], fs_handle.as_str(), "CreateSnapshot was named snapshot-<VolumeSnapshot UID>");

    // Restored by the provisioner, filesystem and block, from the driver's snapshot.
    world.claim_object(restore_claim("fs-restored", &storage_class, "snap-fs", None)).await;
    world.claim_object(restore_claim("blk-restored", &storage_class, "snap-blk", Some("Block"))).await;
    let restored = world.bound("fs-restored").await;
    world.bound("blk-restored").await;
    let restored_handle = world.volumes().get(&restored).await.unwrap().spec.unwrap().csi.unwrap().volume_handle;
    let rows = csi_sidecars_e2e::worlds::provisioner::plugin_volume_rows(&world.socket);
    let row = rows.iter().find(|r| r["volume_id"] == restored_handle.as_str()).expect("the restored volume");
    assert_eq!(row["content_source"]["snapshot_id"], fs_handle.as_str(), "restored from the cut snapshot");

    // A block snapshot restored as a filesystem is refused (the content records the source's mode).
    world.claim_object(restore_claim("converted", &storage_class, "snap-blk", Some("Filesystem"))).await;
    world.event("converted", "ProvisioningFailed", "allow-volume-mode-change").await;

    // Deleting a snapshot a pending claim restores from waits; once the claim goes, the storage snapshot goes too.
    snaps.snapshots().delete("snap-blk", &DeleteParams::default()).await.unwrap();
    world.event("snap-blk", "SnapshotDeletePending", "being used to restore a PVC").await;
    assert!(snaps.snapshots().get_opt("snap-blk").await.unwrap().is_some());
    let before = plugin_snapshots(&world).len();
    world.claims().delete("converted", &DeleteParams::default()).await.unwrap();
    snaps.gone("snap-blk").await;
    eventually("DeleteSnapshot removed the storage snapshot", TIMEOUT, || async {
        plugin_snapshots(&world).len() == before - 1
    })
    .await;

    // The source claim deleted while its snapshot is being cut stays until the cut is done.
    std::fs::write(faults.path(), r#"{"CreateSnapshot": {"latency_ms": 3000}}"#).unwrap();
    snaps.snapshot_of_claim("snap-slow", "fs", None).await;
    eventually("the source claim is protected", TIMEOUT, || async {
        has_finalizer(&world.claims().get("fs").await.unwrap().metadata, CLAIM_AS_SOURCE)
    })
    .await;
    world.claims().delete("fs", &DeleteParams::default()).await.unwrap();
    let claim = world.claims().get("fs").await.unwrap();
    assert!(claim.metadata.deletion_timestamp.is_some() && has_finalizer(&claim.metadata, CLAIM_AS_SOURCE));
    snaps.wait_snapshot("snap-slow", "ready despite its claim going", ready).await;
    std::fs::write(faults.path(), "{}").unwrap();
    eventually("the claim goes once the snapshot is cut", TIMEOUT, || async {
        matches!(world.claims().get_opt("fs").await, Ok(None))
    })
    .await;

    // A snapshot of a claim that is not bound says so, and the others are unaffected.
    let unbound = format!("{}-nobody", world.ns());
    world.claim("waiting", &unbound, None, "ReadWriteOnce").await;
    snaps.snapshot_of_claim("snap-unbound", "waiting", None).await;
    world.event("snap-unbound", "SetDefaultSnapshotClassFailed", "not yet bound to a PV").await;
    assert!(ready(&snaps.snapshots().get("snap-fs").await.unwrap()));

    // A class naming a Secret that does not exist: the snapshot says which, and is cut once the Secret is there.
    let secret_class = snaps
        .class_with(
            "secret",
            &[
                ("csi.storage.k8s.io/snapshotter-secret-name", "snap-creds"),
                ("csi.storage.k8s.io/snapshotter-secret-namespace", "${volumesnapshot.namespace}"),
            ],
        )
        .await;
    snaps.snapshot_of_claim("snap-secret", "blk", Some(&secret_class)).await;
    let waiting = snaps
        .wait_snapshot("snap-secret", "an error naming the Secret", |s| {
            let message = s.status.as_ref().and_then(|s| s.error.as_ref()).and_then(|e| e.message.clone());
            message.is_some_and(|m| m.contains("error getting secret snap-creds"))
        })
        .await;
    assert!(!ready(&waiting));
    world.secret("snap-creds", "token", "s3cr3t-value").await;
    snaps.wait_snapshot("snap-secret", "ready once the Secret exists", ready).await;
    for process in ["csi-snapshotter", "snapshot-controller"] {
        let log = std::fs::read_to_string(world.scenario.path(&format!("{process}.log"))).unwrap();
        assert!(!log.contains("s3cr3t-value"), "{process} logged a secret value");
    }
}
