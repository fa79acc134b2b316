//! A driver that answers wrong data is untrusted input: the hostpath plugin's fault rules with an `answer` do the
//! work, then alter the response. csi-provisioner and csi-snapshotter name the problem in an event, record nothing
//! wrong, and retry under the same name (CreateVolume and CreateSnapshot are idempotent by name), so once the driver
//! answers right the object is served and the driver holds exactly one volume or snapshot for it.

use std::time::{Duration, Instant};

use csi_sidecars_e2e::control_plane::cluster::Cluster;
use csi_sidecars_e2e::control_plane::snapshot_crds::install_snapshot_crds;
use csi_sidecars_e2e::http::free_port;
use csi_sidecars_e2e::worlds::group::plugin_snapshots;
use csi_sidecars_e2e::worlds::provisioner::ProvisionerWorld as World;
use csi_sidecars_e2e::worlds::snapshot::{
    Snapshots, bound_to, ready, start_csi_snapshotter, start_snapshot_controller,
};
use k8s_openapi::api::core::v1::PersistentVolume;
use snapshot_api::DeletionPolicy;

/// A fault file the test rewrites, and the plugin flag that names it.
struct Faults {
    file: tempfile::NamedTempFile,
}

impl Faults {
    fn new(config: &str) -> Faults {
        let faults = Faults { file: tempfile::NamedTempFile::new().unwrap() };
        faults.set(config);
        faults
    }

    fn flag(&self) -> String {
        format!("--fault-config={}", self.file.path().display())
    }

    fn set(&self, config: &str) {
        std::fs::write(self.file.path(), config).unwrap();
    }
}

/// How many calls the plugin answered wrong with `answer`, from its log.
fn wrong_answers(world: &World, answer: &str) -> usize {
    let log = world.plugin.log();
    log.lines().filter(|l| l.contains("injected fault after the work") && l.contains(answer)).count()
}

fn volume_handle(pv: &PersistentVolume) -> String {
    pv.spec.as_ref().and_then(|s| s.csi.as_ref()).map(|c| c.volume_handle.clone()).unwrap_or_default()
}

/// CreateVolume answers once without a volume id: no PV is written, a ProvisioningFailed Warning names the problem,
/// and the retry (same name) gets the real id, so the claim binds to the one volume the driver made.
#[tokio::test]
async fn an_empty_volume_id_is_named_and_retried_without_a_leak() {
    let started = Instant::now();
    let faults = Faults::new(r#"{"CreateVolume": {"answer": "empty_id", "times": 1}}"#);
    let mut world = World::new("wrong-vol-id", &[faults.flag().as_str()]).await;
    let class = world.class("c", &[], "Delete").await;
    let mut provisioner = world.start_provisioner("csi-provisioner", &[]);
    world.claim("data", &class, None, "ReadWriteOnce").await;

    let event = world.event("data", "ProvisioningFailed", "the driver returned an empty volume id").await;
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    let pv_name = world.bound("data").await;
    let pv = world.volumes().get(&pv_name).await.unwrap();
    let handle = volume_handle(&pv);
    assert!(!handle.is_empty(), "the PV names the volume: {pv:?}");
    assert_eq!(world.plugin_volumes(), vec![handle], "one volume, the claim's");
    assert_eq!(provisioner.exited(), None, "the provisioner keeps running");
    eprintln!("empty volume id: {:?}", started.elapsed());
}

/// CreateVolume answers capacity 0, which CSI reads as unknown: the PV records the requested size.
#[tokio::test]
async fn a_zero_capacity_records_the_requested_size() {
    let started = Instant::now();
    let faults = Faults::new(r#"{"CreateVolume": {"answer": "zero_capacity"}}"#);
    let mut world = World::new("wrong-capacity", &[faults.flag().as_str()]).await;
    let class = world.class("c", &[], "Delete").await;
    let _provisioner = world.start_provisioner("csi-provisioner", &[]);
    world.claim("data", &class, None, "ReadWriteOnce").await;

    let pv_name = world.bound("data").await;
    let pv = world.volumes().get(&pv_name).await.unwrap();
    let capacity = pv.spec.as_ref().and_then(|s| s.capacity.as_ref()).and_then(|c| c.get("storage")).cloned();
    assert_eq!(capacity.map(|q| q.0).as_deref(), Some("1Mi"), "the claim's request");
    assert_eq!(world.plugin_volumes().len(), 1);
    assert_eq!(wrong_answers(&world, "zero_capacity"), 1, "the driver said 0");
    eprintln!("zero capacity: {:?}", started.elapsed());
}

/// snapshot-controller watches every namespace: the snapshot tests of this binary take turns.
static SNAPSHOT_CONTROLLER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A world with a bound claim `data`, snapshot-controller, csi-snapshotter and a snapshot class; runs `test`.
async fn with_snapshot_world(prefix: &str, faults: &Faults, test: impl AsyncFnOnce(&Snapshots<'_>, &str)) {
    let _turn = SNAPSHOT_CONTROLLER.lock().await;
    install_snapshot_crds(&Cluster::shared().client().await).await;
    let mut world = World::new(prefix, &[faults.flag().as_str()]).await;
    let storage_class = world.class("data", &[], "Delete").await;
    let _provisioner = world.start_provisioner("csi-provisioner", &[]);
    world.claim("data", &storage_class, None, "ReadWriteOnce").await;
    world.bound("data").await;
    let mut controller = start_snapshot_controller(&mut world, free_port()).await;
    let mut snapshotter = start_csi_snapshotter(&mut world).await;
    let mut snaps = Snapshots::new(&world);
    let class = snaps.class("snap", DeletionPolicy::Delete, false).await;
    test(&snaps, &class).await;
    assert_eq!(controller.0.exited(), None, "snapshot-controller keeps running");
    assert_eq!(snapshotter.0.exited(), None, "csi-snapshotter keeps running");
}

/// The content's status handle.
async fn content_handle(snaps: &Snapshots<'_>, snapshot: &str) -> Option<String> {
    let content = bound_to(&snaps.snapshots().get(snapshot).await.ok()?)?;
    snaps.contents().get(&content).await.ok()?.status?.snapshot_handle
}

/// CreateSnapshot and ListSnapshots say "not ready" for as long as the rule is there: the snapshot stays not ready,
/// csi-snapshotter keeps asking (CreateSnapshot again, by the same name) and the driver cuts no second snapshot; once
/// the rule is gone the snapshot is ready.
#[tokio::test]
async fn a_snapshot_never_ready_stays_not_ready_until_the_driver_says_so() {
    let started = Instant::now();
    let faults =
        Faults::new(r#"{"CreateSnapshot": {"answer": "never_ready"}, "ListSnapshots": {"answer": "never_ready"}}"#);
    with_snapshot_world("wrong-never-ready", &faults, async |snaps, class| {
        snaps.snapshot_of_claim("snap", "data", Some(class)).await;
        csi_sidecars_e2e::wait::eventually("the content names the snapshot", Duration::from_secs(60), || async {
            content_handle(snaps, "snap").await.is_some_and(|h| !h.is_empty())
        })
        .await;
        // Several readiness checks at the snapshotter's backoff (200ms to 2s).
        tokio::time::sleep(Duration::from_secs(6)).await;
        let snapshot = snaps.snapshots().get("snap").await.unwrap();
        assert!(!ready(&snapshot), "not ready while the driver says so: {:?}", snapshot.status);
        assert_eq!(plugin_snapshots(snaps.world).len(), 1, "one backend snapshot");
        let checks = wrong_answers(snaps.world, "never_ready");
        assert!(checks >= 3, "csi-snapshotter keeps asking: {checks} answers");

        faults.set("{}");
        snaps.wait_snapshot("snap", "ready", ready).await;
        let ids: Vec<_> = plugin_snapshots(snaps.world).iter().map(|r| r["snapshot_id"].clone()).collect();
        assert_eq!(ids.len(), 1, "still one backend snapshot: {ids:?}");
        assert_eq!(content_handle(snaps, "snap").await.as_deref(), ids[0].as_str());
    })
    .await;
    eprintln!("never ready: {:?}", started.elapsed());
}

/// CreateSnapshot answers once without a snapshot id: the content records no handle, an event names the problem,
/// and the retry (same name) records the real one; one backend snapshot.
#[tokio::test]
async fn an_empty_snapshot_id_is_named_and_retried_without_a_leak() {
    let started = Instant::now();
    let faults = Faults::new(r#"{"CreateSnapshot": {"answer": "empty_id", "times": 1}}"#);
    with_snapshot_world("wrong-snap-id", &faults, async |snaps, class| {
        snaps.snapshot_of_claim("snap", "data", Some(class)).await;
        snaps.wait_event("snap", "SnapshotCreationFailed", "the driver returned an empty snapshot id").await;
        snaps.wait_snapshot("snap", "ready", ready).await;
        let ids: Vec<_> = plugin_snapshots(snaps.world).iter().map(|r| r["snapshot_id"].clone()).collect();
        assert_eq!(ids.len(), 1, "one backend snapshot: {ids:?}");
        let handle = content_handle(snaps, "snap").await;
        assert_eq!(handle.as_deref(), ids[0].as_str(), "the content names the driver's snapshot");
    })
    .await;
    eprintln!("empty snapshot id: {:?}", started.elapsed());
}
