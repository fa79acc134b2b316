//! Driver loss: the plugin killed while a sidecar has calls in flight, then started again on the same socket and
//! state directory.
//!
//! Upstream's sidecars all connect with csi-lib-utils' `OnConnectionLoss(ExitOnConnectionLoss())`: on losing the
//! connection they write "Lost connection to CSI driver, exiting" to /dev/termination-log and exit 1, and the
//! kubelet restarts the container beside the restarted driver. Ours do the same (sidecar-runtime's
//! `connect_driver`). Each test here checks that exit for one sidecar, then starts the sidecar again as the kubelet
//! would and checks that every item pending at the loss (and those added while both were down) is finished, with
//! nothing lost (every claim Bound, size or class applied, snapshot ready) and nothing leaked (no backend object
//! without its API object, no name made twice: crate::backend). The provisioner's test restarts the sidecar before the
//! plugin, as a kubelet may: it waits for the socket rather than exiting again.
//!
//! The plugin holds each watched call for a minute before doing its work (a fault rule with latency), so the calls
//! are surely in flight when it is killed; it comes back without faults.

use std::time::Duration;

use csi_sidecars_e2e::control_plane::cluster::Cluster;
use csi_sidecars_e2e::control_plane::snapshot_crds::install_snapshot_crds;
use csi_sidecars_e2e::processes::rbac::Sidecar;
use csi_sidecars_e2e::processes::scenario::{Process, binary};
use csi_sidecars_e2e::wait::eventually;
use csi_sidecars_e2e::worlds::backend::Kind;
use csi_sidecars_e2e::worlds::group::{GATE, GATE_OFF, Groups, labelled_claim, sidecar_args, start, start_with};
use csi_sidecars_e2e::worlds::provisioner::{ProvisionerWorld as World, TIMEOUT};
use csi_sidecars_e2e::worlds::resizer::ResizerWorld;
use csi_sidecars_e2e::worlds::snapshot::{Snapshots, ready};
use kube::api::DeleteParams;
use kube::{Api, ResourceExt};
use serde_json::json;
use snapshot_api::{DeletionPolicy, VolumeSnapshotContent};

/// snapshot-controller watches every namespace: the tests of this binary that start it take turns.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// How long a sidecar may take to notice the loss and exit.
const EXIT_WITHIN: Duration = Duration::from_secs(15);
const LOST: &str = "Lost connection to CSI driver, exiting";

/// The plugin's fault rules, in a file of their own (the plugin starts before the scenario's folder is known).
struct Faults(tempfile::NamedTempFile);

impl Faults {
    /// Each of `rpcs` waits a minute before its work: longer than any test waits for the kill.
    fn holding(rpcs: &[&str]) -> Faults {
        let faults = Faults(tempfile::NamedTempFile::new().unwrap());
        let rules: serde_json::Map<String, serde_json::Value> =
            rpcs.iter().map(|rpc| (rpc.to_string(), json!({"latency_ms": 60_000}))).collect();
        faults.write(&serde_json::Value::Object(rules));
        faults
    }

    /// No rules yet.
    fn none() -> Faults {
        let faults = Faults(tempfile::NamedTempFile::new().unwrap());
        faults.clear();
        faults
    }

    fn flag(&self) -> String {
        format!("--fault-config={}", self.0.path().display())
    }

    fn write(&self, rules: &serde_json::Value) {
        std::fs::write(self.0.path(), rules.to_string()).unwrap();
    }

    fn clear(&self) {
        self.write(&json!({}));
    }
}

/// Waits until the sidecar (at -v=5, every CSI call logged) has sent `count` calls of `rpc`.
async fn calls_in_flight(sidecar: &Process, rpc: &str, count: usize) {
    // `CSI call method="/csi.v1.Controller/CreateVolume" request=…`, logged as each call is sent.
    let method = format!("/{rpc}\"");
    eventually(&format!("{} sent {count} {rpc} calls", sidecar.name()), TIMEOUT, || async {
        let log = sidecar.log();
        log.lines().filter(|l| l.contains("CSI call method=") && l.contains(&method)).count() >= count
    })
    .await;
}

/// The sidecar ends as upstream's does when its driver goes: exit 1, saying why.
async fn exits_on_driver_loss(sidecar: &mut Process) {
    let code = sidecar.wait_exit(EXIT_WITHIN).await;
    assert_eq!(code, 1, "{} exits 1 when the driver goes", sidecar.name());
    assert!(sidecar.log().contains(LOST), "{} logs {LOST:?}", sidecar.name());
}

#[tokio::test]
async fn csi_provisioner_exits_on_driver_loss_and_its_restart_provisions_every_claim() {
    let faults = Faults::holding(&["CreateVolume"]);
    let mut world = World::new("loss-prov", &[&faults.flag()]).await;
    let class = world.class("loss", &[], "Delete").await;
    let mut provisioner = world.start_provisioner("csi-provisioner", &[]);
    for i in 0..4 {
        world.claim(&format!("claim-{i}"), &class, None, "ReadWriteOnce").await;
    }
    calls_in_flight(&provisioner, "CreateVolume", 4).await;

    world.kill_plugin();
    exits_on_driver_loss(&mut provisioner).await;

    // While both are down, one claim is given up on and another is asked for.
    world.claims().delete("claim-0", &DeleteParams::default()).await.unwrap();
    world.claim("claim-4", &class, None, "ReadWriteOnce").await;
    faults.clear();
    // The kubelet may restart the sidecar before the driver is back: it waits for the socket (the dead plugin's file
    // is still there, refusing connections) instead of exiting again.
    let mut restarted = world.start_provisioner("csi-provisioner-restarted", &[]);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(restarted.exited(), None, "a sidecar restarted before its driver waits for it");
    world.restart_plugin("hostpath-plugin-restarted", &[&faults.flag()]);

    let mut names = Vec::new();
    for i in 1..5 {
        let claim = format!("claim-{i}");
        world.bound(&claim).await;
        names.push(format!("pvc-{}", world.claims().get(&claim).await.unwrap().uid().unwrap()));
    }
    eventually("one backend volume per surviving claim", TIMEOUT, || async { world.plugin_volumes().len() == 4 }).await;
    eventually("the in-flight journal is empty", TIMEOUT, || async { world.journal().await.is_empty() }).await;
    let creations = world.creations(Kind::Volumes);
    assert_eq!(world.made_twice(Kind::Volumes), Vec::<String>::new(), "no name made twice: {creations:#?}");
    for name in &names {
        assert_eq!(creations.get(name).map(|c| c.created.len()), Some(1), "{name} made once: {creations:#?}");
    }
}

#[tokio::test]
async fn csi_resizer_exits_on_driver_loss_and_its_restart_applies_every_change() {
    let faults = Faults::none();
    let mut world = ResizerWorld::new("loss-rsz", &[&faults.flag()]).await;
    let silver = world.create_attribute_class("silver", &[("iops", "1000")]).await;
    let gold = world.create_attribute_class("gold", &[("iops", "5000")]).await;
    let mut resizer = world.start_resizer("csi-resizer", &[]);
    let grown = [world.bound_claim("grow-0", true, None).await, world.bound_claim("grow-1", true, None).await];
    let modified = world.bound_claim("modify", true, Some(&silver)).await;
    let late = world.bound_claim("late", true, None).await;
    let hold = json!({"latency_ms": 60_000});
    faults.write(&json!({"ControllerExpandVolume": hold, "ControllerModifyVolume": hold}));

    for claim in ["grow-0", "grow-1"] {
        world.patch_claim(claim, json!({"spec": {"resources": {"requests": {"storage": "2Gi"}}}})).await;
    }
    world.set_attribute_class("modify", &gold).await;
    calls_in_flight(&resizer, "ControllerExpandVolume", 2).await;
    calls_in_flight(&resizer, "ControllerModifyVolume", 1).await;

    world.kill_plugin();
    exits_on_driver_loss(&mut resizer).await;
    world.patch_claim("late", json!({"spec": {"resources": {"requests": {"storage": "3Gi"}}}})).await;
    faults.clear();
    world.restart_plugin("hostpath-plugin-restarted", &[&faults.flag()]);
    let _restarted = world.start_resizer("csi-resizer-restarted", &[]);

    let claims = world.claims();
    for (claim, size) in [("grow-0", "2Gi"), ("grow-1", "2Gi"), ("late", "3Gi")] {
        eventually(&format!("claim {claim} at {size}"), TIMEOUT, || async {
            let Ok(claim) = claims.get(claim).await else { return false };
            claim.status.and_then(|s| s.capacity).and_then(|c| c.get("storage").cloned()).map(|q| q.0).as_deref()
                == Some(size)
        })
        .await;
    }
    world.wait_for_current_class("modify", &gold).await;
    let gib = 1i64 << 30;
    for (id, bytes) in [(&grown[0], 2 * gib), (&grown[1], 2 * gib), (&late, 3 * gib)] {
        assert_eq!(world.backend_volume(id)["capacity_bytes"], bytes, "backend volume {id}");
    }
    assert_eq!(world.backend_parameter(&modified, "iops").as_deref(), Some("5000"));
}

#[tokio::test]
async fn csi_snapshotter_exits_on_driver_loss_and_its_restart_finishes_every_snapshot() {
    let _turn = SERIAL.lock().await;
    install_snapshot_crds(&Cluster::shared().client().await).await;
    let faults = Faults::none();
    let mut world = World::new("loss-snap", &[&faults.flag()]).await;
    let class = world.class("source", &[], "Delete").await;
    let mut provisioner = world.start_provisioner("csi-provisioner", &[]);
    world.claim("source", &class, None, "ReadWriteOnce").await;
    world.bound("source").await;
    let _controller = start(&mut world, Sidecar::SnapshotController, "snapshot-controller").await;
    let (mut snapshotter, identity) = start_with(&mut world, Sidecar::Snapshotter, "csi-snapshotter", &[]).await;
    faults.write(&json!({"CreateSnapshot": {"latency_ms": 60_000}}));

    // `Snapshots` borrows the world, which the kill and the restart change: each use is forgotten (its drop would
    // delete the class and the contents) and the class deleted at the end.
    let mut snaps = Snapshots::new(&world);
    let snapshot_class = snaps.class("snap", DeletionPolicy::Delete, true).await;
    for i in 0..3 {
        snaps.snapshot_of_claim(&format!("snap-{i}"), "source", Some(&snapshot_class)).await;
    }
    std::mem::forget(snaps);
    calls_in_flight(&snapshotter, "CreateSnapshot", 3).await;

    world.kill_plugin();
    exits_on_driver_loss(&mut snapshotter).await;
    // The provisioner was connected to the same plugin: it goes too.
    assert_eq!(provisioner.wait_exit(EXIT_WITHIN).await, 1);
    // While the driver is down: one snapshot given up on (its content still says a CreateSnapshot may be running),
    // another asked for.
    let snaps = Snapshots::new(&world);
    let given_up = snaps.snapshots().get("snap-0").await.unwrap();
    snaps.snapshots().delete("snap-0", &DeleteParams::default()).await.unwrap();
    snaps.snapshot_of_claim("snap-3", "source", Some(&snapshot_class)).await;
    std::mem::forget(snaps);
    faults.clear();
    world.restart_plugin("hostpath-plugin-restarted", &[&faults.flag()]);
    let args = sidecar_args(&world, &identity, "csi-snapshotter", &[]);
    let _restarted = world.scenario.start("csi-snapshotter-restarted", &binary("csi-snapshotter"), &args);

    let mut snaps = Snapshots::new(&world);
    let mut names = Vec::new();
    for i in 1..4 {
        let snapshot = snaps.wait_snapshot(&format!("snap-{i}"), "ready", ready).await;
        names.push(format!("snapshot-{}", snapshot.uid().unwrap()));
    }
    snaps.gone("snap-0").await;
    let content = format!("snapcontent-{}", given_up.uid().unwrap());
    let contents: Api<VolumeSnapshotContent> = Api::all(world.client.clone());
    eventually(&format!("content {content} is gone"), TIMEOUT, || async {
        matches!(contents.get_opt(&content).await, Ok(None))
    })
    .await;
    eventually("one storage snapshot per surviving VolumeSnapshot", TIMEOUT, || async {
        world.csictl(&["list-snapshots"]).as_array().map_or(0, Vec::len) == 3
    })
    .await;
    let creations = world.creations(Kind::Snapshots);
    assert_eq!(world.made_twice(Kind::Snapshots), Vec::<String>::new(), "no name made twice: {creations:#?}");
    for name in &names {
        assert_eq!(creations.get(name).map(|c| c.created.len()), Some(1), "{name} made once: {creations:#?}");
    }
    snaps.delete_class(&snapshot_class).await;
}

#[tokio::test]
async fn csi_group_snapshotter_exits_on_driver_loss_and_its_restart_finishes_the_group() {
    let _turn = SERIAL.lock().await;
    install_snapshot_crds(&Cluster::shared().client().await).await;
    let faults = Faults::none();
    let mut world = World::new("loss-group", &[&faults.flag()]).await;
    let storage_class = world.class("data", &[], "Delete").await;
    let _provisioner = world.start_provisioner("csi-provisioner", &[]);
    for name in ["a", "b"] {
        labelled_claim(&world, name, &storage_class, &[("app", "db")]).await;
        world.bound(name).await;
    }
    let _controller = start(&mut world, Sidecar::SnapshotController, "snapshot-controller").await;
    // csi-group-snapshotter runs the group loop beside a csi-snapshotter with its groups off, which serves the members.
    let (mut snapshotter, snapshotter_identity) =
        start_with(&mut world, Sidecar::Snapshotter, "csi-snapshotter", &[GATE_OFF]).await;
    let (mut group_snapshotter, identity) = start(&mut world, Sidecar::Snapshotter, "csi-group-snapshotter").await;
    faults.write(&json!({"CreateVolumeGroupSnapshot": {"latency_ms": 60_000}}));

    // `Groups` borrows the world, which the kill and the restart change: forgotten here (its drop deletes the
    // class), remade after the restart.
    let groups = Groups::default_class(&world).await;
    groups.group("db", json!({"matchLabels": {"app": "db"}})).await;
    let class = groups.class.clone();
    std::mem::forget(groups);
    calls_in_flight(&group_snapshotter, "CreateVolumeGroupSnapshot", 1).await;

    world.kill_plugin();
    exits_on_driver_loss(&mut group_snapshotter).await;
    exits_on_driver_loss(&mut snapshotter).await;
    faults.clear();
    world.restart_plugin("hostpath-plugin-restarted", &[&faults.flag()]);
    // The provisioner went with the plugin too; the group needs only the two snapshot sidecars.
    let args = sidecar_args(&world, &snapshotter_identity, "csi-snapshotter", &[]);
    let _snapshotter_restarted = world.scenario.start("csi-snapshotter-restarted", &binary("csi-snapshotter"), &args);
    let args = sidecar_args(&world, &identity, "csi-group-snapshotter", &[GATE]);
    let _restarted = world.scenario.start("csi-group-snapshotter-restarted", &binary("csi-group-snapshotter"), &args);

    let groups = Groups { world: &world, class };
    let group = groups.ready("db").await;
    groups.ready_members(&group, 2).await;
    let creations = world.creations(Kind::GroupSnapshots);
    assert_eq!(creations.len(), 1, "one group snapshot asked for: {creations:#?}");
    assert_eq!(world.made_twice(Kind::GroupSnapshots), Vec::<String>::new(), "made once: {creations:#?}");
    let members = world.csictl(&["list-snapshots"]);
    assert_eq!(members.as_array().map_or(0, Vec::len), 2, "two member snapshots in storage: {members}");

    groups.groups().delete("db", &DeleteParams::default()).await.unwrap();
    groups.gone("db").await;
    eventually("the storage group snapshot is deleted", TIMEOUT, || async {
        world.csictl(&["list-snapshots"]).as_array().is_none_or(Vec::is_empty)
    })
    .await;
}
