//! csi-provisioner restoring claims from VolumeSnapshots, against the real control plane with the generated
//! snapshot CRDs and the hostpath plugin.
//!
//! No snapshot controller runs here: each test takes the snapshot through the plugin (csictl), then writes the
//! pre-provisioned VolumeSnapshotContent and VolumeSnapshot and their statuses as the snapshot controller would.

use std::time::Duration;

use csi_sidecars_e2e::control_plane::api_proxy::{ApiFaults, ApiProxy, through_proxy};
use csi_sidecars_e2e::control_plane::cluster::Cluster;
use csi_sidecars_e2e::control_plane::snapshot_crds::install_snapshot_crds;
use csi_sidecars_e2e::processes::scenario::binary;
use csi_sidecars_e2e::processes::sidecar_mode::sidecar_command;
use csi_sidecars_e2e::wait::eventually;
use csi_sidecars_e2e::worlds::provisioner::{
    ProvisionerWorld as World, TIMEOUT, claim, has_finalizer, plugin_volume_rows,
};
use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolumeClaim, TypedLocalObjectReference};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use snapshot_api::{
    DeletionPolicy, VolumeSnapshot, VolumeSnapshotContent, VolumeSnapshotContentSource, VolumeSnapshotContentSpec,
    VolumeSnapshotSource, VolumeSnapshotSpec,
};

const SOURCE_PROTECTION: &str = "provisioner.storage.kubernetes.io/volumesnapshot-as-source-protection";

/// The relist test runs while no other test of this file does; the others run side by side.
static TURNS: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

async fn world(prefix: &str, plugin_args: &[&str]) -> World {
    install_snapshot_crds(&Cluster::shared().client().await).await;
    World::new(prefix, plugin_args).await
}

fn snapshots(world: &World) -> Api<VolumeSnapshot> {
    Api::namespaced(world.client.clone(), world.ns())
}

fn contents(world: &World) -> Api<VolumeSnapshotContent> {
    Api::all(world.client.clone())
}

/// Takes a snapshot of `volume_handle` in the plugin; returns the snapshot id and its size.
fn plugin_snapshot(world: &World, name: &str, volume_handle: &str) -> (String, i64) {
    let output = std::process::Command::new(binary("csictl"))
        .arg(format!("--endpoint=unix://{}", world.socket.display()))
        .args(["create-snapshot", name, "--source-volume-id", volume_handle, "-o", "json"])
        .output()
        .expect("run csictl");
    assert!(output.status.success(), "csictl create-snapshot: {}", String::from_utf8_lossy(&output.stderr));
    let snapshot: serde_json::Value = serde_json::from_slice(&output.stdout).expect("csictl json");
    let id = snapshot["snapshot_id"].as_str().expect("a snapshot id").to_string();
    (id, snapshot["size_bytes"].as_i64().unwrap_or_default())
}

/// A bound VolumeSnapshot `name` over a pre-provisioned content for `handle`, as the snapshot controller leaves
/// them; `ready` is the snapshot's readyToUse. Returns the content's name.
async fn bound_snapshot(
    world: &World,
    name: &str,
    handle: &str,
    size: i64,
    source_mode: Option<&str>,
    ready: bool,
) -> String {
    let content_name = format!("{}-{name}", world.ns());
    let snapshot = VolumeSnapshot::new(
        name,
        VolumeSnapshotSpec {
            source: VolumeSnapshotSource {
                volume_snapshot_content_name: Some(content_name.clone()),
                ..Default::default()
            },
            volume_snapshot_class_name: None,
        },
    );
    let snapshot = snapshots(world).create(&PostParams::default(), &snapshot).await.unwrap();
    let content = VolumeSnapshotContent::new(
        &content_name,
        VolumeSnapshotContentSpec {
            volume_snapshot_ref: ObjectReference {
                name: Some(name.into()),
                namespace: Some(world.ns().into()),
                uid: snapshot.metadata.uid.clone(),
                ..Default::default()
            },
            deletion_policy: DeletionPolicy::Retain,
            driver: world.driver.clone(),
            volume_snapshot_class_name: None,
            source: VolumeSnapshotContentSource { volume_handle: None, snapshot_handle: Some(handle.into()) },
            source_volume_mode: source_mode.map(str::to_string),
        },
    );
    contents(world).create(&PostParams::default(), &content).await.unwrap();
    let status = json!({"status": {"snapshotHandle": handle, "readyToUse": true, "restoreSize": size}});
    contents(world).patch_status(&content_name, &PatchParams::default(), &Patch::Merge(status)).await.unwrap();
    set_ready(world, name, &content_name, size, ready).await;
    content_name
}

async fn set_ready(world: &World, name: &str, content_name: &str, size: i64, ready: bool) {
    let status = json!({"status": {
        "boundVolumeSnapshotContentName": content_name,
        "readyToUse": ready,
        "restoreSize": size.to_string(),
    }});
    snapshots(world).patch_status(name, &PatchParams::default(), &Patch::Merge(status)).await.unwrap();
}

fn restore_claim(name: &str, class: &str, snapshot: &str, mode: Option<&str>) -> PersistentVolumeClaim {
    let mut restored = claim(name, class, mode, "ReadWriteOnce");
    restored.spec.as_mut().unwrap().data_source = Some(TypedLocalObjectReference {
        api_group: Some("snapshot.storage.k8s.io".into()),
        kind: "VolumeSnapshot".into(),
        name: snapshot.into(),
    });
    restored
}

/// The origin volume's handle, after provisioning claim `origin`.
async fn origin_volume(world: &World, class: &str) -> String {
    world.claim("origin", class, None, "ReadWriteOnce").await;
    let volume = world.bound("origin").await;
    world.volumes().get(&volume).await.unwrap().spec.unwrap().csi.unwrap().volume_handle
}

async fn delete_contents(world: &World, names: &[&str]) {
    for name in names {
        let _ = contents(world).delete(name, &DeleteParams::default()).await;
    }
}

#[tokio::test]
async fn provisioner_restores_a_snapshot_once_ready_and_protects_it_meanwhile() {
    let _turn = TURNS.read().await;
    let faults = tempfile::NamedTempFile::new().unwrap();
    let fault_flag = format!("--fault-config={}", faults.path().display());
    let mut world = world("prov-restore", &[fault_flag.as_str()]).await;
    let class = world.class("restore", &[], "Delete").await;
    let _provisioner = world.start_provisioner("csi-provisioner", &[]);
    let origin = origin_volume(&world, &class).await;
    let (handle, size) = plugin_snapshot(&world, "snap-origin", &origin);
    let content = bound_snapshot(&world, "snap", &handle, size, Some("Filesystem"), false).await;

    // Not ready yet: the claim waits and the event says why.
    world.claim_object(restore_claim("restored", &class, "snap", None)).await;
    let event = world.event("restored", "ProvisioningFailed", "snapshot snap is not Ready").await;
    assert!(
        event.message.unwrap().starts_with("error getting handle for DataSource Type VolumeSnapshot by Name snap: "),
        "worded as upstream"
    );
    assert!(world.claims().get("restored").await.unwrap().spec.unwrap().volume_name.is_none());

    // A slow CreateVolume shows the snapshot protected while the restore is in flight.
    std::fs::write(faults.path(), r#"{"CreateVolume": {"latency_ms": 4000}}"#).unwrap();
    set_ready(&world, "snap", &content, size, true).await;
    eventually("the snapshot is protected during the restore", TIMEOUT, || async {
        let snapshot = snapshots(&world).get("snap").await.unwrap();
        has_finalizer(&snapshot.metadata, SOURCE_PROTECTION)
    })
    .await;
    let volume = world.bound("restored").await;
    std::fs::write(faults.path(), "{}").unwrap();

    let pv = world.volumes().get(&volume).await.unwrap();
    let restored_handle = pv.spec.unwrap().csi.unwrap().volume_handle;
    let rows = plugin_volume_rows(&world.socket);
    let row = rows.iter().find(|r| r["volume_id"] == restored_handle.as_str()).expect("the restored volume");
    assert_eq!(row["content_source"]["snapshot_id"], handle.as_str(), "restored from the snapshot's handle");
    eventually("the protection is lifted once the PV exists", TIMEOUT, || async {
        let snapshot = snapshots(&world).get("snap").await.unwrap();
        !has_finalizer(&snapshot.metadata, SOURCE_PROTECTION)
    })
    .await;
    delete_contents(&world, &[&content]).await;
}

#[tokio::test]
async fn provisioner_refuses_a_volume_mode_change_until_the_content_allows_it() {
    let _turn = TURNS.read().await;
    let mut world = world("prov-restore-mode", &[]).await;
    let class = world.class("mode", &[], "Delete").await;
    let _provisioner = world.start_provisioner("csi-provisioner", &[]);
    let origin = origin_volume(&world, &class).await;
    let (handle, size) = plugin_snapshot(&world, "snap-origin", &origin);
    // The content says the snapshot was of a Block volume; a Filesystem restore changes the mode.
    let content = bound_snapshot(&world, "snap", &handle, size, Some("Block"), true).await;

    world.claim_object(restore_claim("converted", &class, "snap", Some("Filesystem"))).await;
    let annotation = "snapshot.storage.kubernetes.io/allow-volume-mode-change";
    world.event("converted", "ProvisioningFailed", &format!("{annotation} annotation is not present")).await;
    assert!(world.claims().get("converted").await.unwrap().spec.unwrap().volume_name.is_none(), "the claim waits");
    assert_eq!(world.plugin_volumes().len(), 1, "no CreateVolume for a refused restore");

    let allow = json!({"metadata": {"annotations": {annotation: "true"}}});
    contents(&world).patch(&content, &PatchParams::default(), &Patch::Merge(allow)).await.unwrap();
    world.bound("converted").await;
    delete_contents(&world, &[&content]).await;
}

#[tokio::test]
async fn provisioner_sweeps_orphaned_snapshot_protection_but_keeps_it_for_pending_restores() {
    let _turn = TURNS.read().await;
    let mut world = world("prov-restore-sweep", &[]).await;
    let class = world.class("sweep", &[], "Delete").await;
    let _provisioner = world.start_provisioner("csi-provisioner", &["--snapshot-orphan-sweep-interval=1s"]);
    let origin = origin_volume(&world, &class).await;
    let (handle, size) = plugin_snapshot(&world, "snap-origin", &origin);
    let orphan = bound_snapshot(&world, "orphan", &handle, size, None, true).await;
    let wanted = bound_snapshot(&world, "wanted", &handle, size, None, true).await;
    // Left behind as after a crash: a protection nobody needs, and one a pending claim still needs. That claim names
    // a class that does not exist, so it stays Pending.
    let protect = json!({"metadata": {"finalizers": [SOURCE_PROTECTION]}});
    for name in ["orphan", "wanted"] {
        snapshots(&world).patch(name, &PatchParams::default(), &Patch::Merge(&protect)).await.unwrap();
    }
    world.claim_object(restore_claim("waiting", &format!("{}-missing", world.ns()), "wanted", None)).await;

    eventually("the orphaned protection is swept", TIMEOUT, || async {
        let snapshot = snapshots(&world).get("orphan").await.unwrap();
        !has_finalizer(&snapshot.metadata, SOURCE_PROTECTION)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let wanted_snapshot = snapshots(&world).get("wanted").await.unwrap();
    assert!(has_finalizer(&wanted_snapshot.metadata, SOURCE_PROTECTION), "a pending restore keeps the protection");

    // Once that claim is gone, the sweep lets the snapshot go too.
    world.claims().delete("waiting", &DeleteParams::default()).await.unwrap();
    eventually("the protection goes with the last pending restore", TIMEOUT, || async {
        let snapshot = snapshots(&world).get("wanted").await.unwrap();
        !has_finalizer(&snapshot.metadata, SOURCE_PROTECTION)
    })
    .await;
    delete_contents(&world, &[&orphan, &wanted]).await;
}

#[tokio::test]
async fn provisioner_crash_during_a_restore_of_a_deleted_claim_leaks_nothing() {
    let _turn = TURNS.read().await;
    let faults = tempfile::NamedTempFile::new().unwrap();
    let fault_flag = format!("--fault-config={}", faults.path().display());
    let mut world = world("prov-restore-crash", &[fault_flag.as_str()]).await;
    let class = world.class("crash", &[], "Delete").await;
    let mut provisioner = world.start_provisioner("csi-provisioner", &[]);
    let origin = origin_volume(&world, &class).await;
    let (handle, size) = plugin_snapshot(&world, "snap-origin", &origin);
    let content = bound_snapshot(&world, "snap", &handle, size, None, true).await;

    // The restore's CreateVolume makes the volume but its answer is lost; then the provisioner dies and the user
    // gives up on the claim.
    std::fs::write(faults.path(), r#"{"CreateVolume": {"code": "DeadlineExceeded", "after_work": true}}"#).unwrap();
    world.claim_object(restore_claim("doomed", &class, "snap", None)).await;
    eventually("the driver restored the volume", TIMEOUT, || async { world.plugin_volumes().len() == 2 }).await;
    let snapshot = snapshots(&world).get("snap").await.unwrap();
    assert!(has_finalizer(&snapshot.metadata, SOURCE_PROTECTION), "the snapshot is protected while in flight");
    provisioner.kill9();
    world.claims().delete("doomed", &DeleteParams::default()).await.unwrap();

    std::fs::write(faults.path(), "{}").unwrap();
    let _restarted = world.start_provisioner("csi-provisioner-restarted", &[]);
    eventually("the claim is gone", TIMEOUT, || async { world.claims().get_opt("doomed").await.unwrap().is_none() })
        .await;
    // The claim goes at once (the journal, not a finalizer, remembers it); the restored volume follows.
    eventually("only the origin volume is left", TIMEOUT, || async { world.plugin_volumes() == vec![origin.clone()] })
        .await;
    eventually("the snapshot's protection is lifted", TIMEOUT, || async {
        let snapshot = snapshots(&world).get("snap").await.unwrap();
        !has_finalizer(&snapshot.metadata, SOURCE_PROTECTION)
    })
    .await;
    delete_contents(&world, &[&content]).await;
}

/// A claim deleted while the provisioner's watches are cut, found gone only by the relist after a 410 (no DELETED
/// event ever reaches it): the relist hands the claim over as deleted, so the source protection it held on its
/// snapshot comes off. The orphan sweep is off, so nothing else would lift it; CreateVolume fails with a final error,
/// so the claim is not in flight either (an in-flight claim found absent is cleaned up by its own worker), and its
/// retry is 10 minutes away.
#[tokio::test]
async fn a_claim_deleted_while_the_watch_is_cut_is_seen_deleted_at_the_relist() {
    // Alone: every provisioner of this file watches the whole cluster, and another one, whose watches are not held,
    // would see the delete and release the snapshot's protection itself.
    let _alone = TURNS.write().await;
    let faults = tempfile::NamedTempFile::new().unwrap();
    let fault_flag = format!("--fault-config={}", faults.path().display());
    let mut world = world("prov-relist", &[fault_flag.as_str()]).await;
    let class = world.class("relist", &[], "Delete").await;
    let proxy = ApiProxy::start(Cluster::shared().kubeconfig(), ApiFaults::standard(0.0)).await.unwrap();
    let proxied = world.scenario.path("provisioner-through-proxy.kubeconfig");
    std::fs::copy(world.identity.kubeconfig(), &proxied).unwrap();
    through_proxy(&proxied, &proxy.url()).unwrap();
    let mut args = world.provisioner_args(&["--snapshot-orphan-sweep-interval=0"]);
    // No retry of the refused claim while the watches are held: a retry's own requests (its event, a fresh read)
    // would learn of the delete without any watch.
    args.retain(|arg| !arg.starts_with("--kubeconfig=") && !arg.starts_with("--retry-interval-"));
    args.extend(["--retry-interval-start=10m".to_string(), "--retry-interval-max=10m".to_string()]);
    args.push(format!("--kubeconfig={}", proxied.display()));
    let (program, args) = sidecar_command("csi-provisioner", args);
    let ns = world.ns().to_string();
    let _provisioner = world.scenario.start_with_env("csi-provisioner", &program, &args, &[("POD_NAMESPACE", &ns)]);

    let origin = origin_volume(&world, &class).await;
    let (handle, size) = plugin_snapshot(&world, "snap-origin", &origin);
    let content = bound_snapshot(&world, "snap", &handle, size, None, true).await;
    std::fs::write(faults.path(), r#"{"CreateVolume": {"code": "InvalidArgument", "message": "refused"}}"#).unwrap();
    world.claim_object(restore_claim("dropped", &class, "snap", None)).await;
    world.event("dropped", "ProvisioningFailed", "refused").await;
    let snapshot = snapshots(&world).get("snap").await.unwrap();
    assert!(has_finalizer(&snapshot.metadata, SOURCE_PROTECTION), "a pending restore protects its snapshot");

    proxy.hold_watches();
    world.claims().delete("dropped", &DeleteParams::default()).await.unwrap();
    eventually("the claim is gone", TIMEOUT, || async { world.claims().get_opt("dropped").await.unwrap().is_none() })
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let snapshot = snapshots(&world).get("snap").await.unwrap();
    assert!(has_finalizer(&snapshot.metadata, SOURCE_PROTECTION), "unseen while the watches are held");
    proxy.expire_resumed_watches();
    eventually("the relist hands the claim over as deleted and its protection comes off", TIMEOUT, || async {
        let snapshot = snapshots(&world).get("snap").await.unwrap();
        !has_finalizer(&snapshot.metadata, SOURCE_PROTECTION)
    })
    .await;
    let counts = proxy.counts();
    assert!(counts.get("410 watch").copied().unwrap_or_default() >= 1, "the caches relisted after a 410: {counts:?}");
    assert!(counts.get("held watch").copied().unwrap_or_default() >= 1, "the watches were cut: {counts:?}");
    std::fs::write(faults.path(), "{}").unwrap();
    delete_contents(&world, &[&content]).await;
}
