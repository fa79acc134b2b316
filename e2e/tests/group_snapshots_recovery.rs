//! Group snapshots when things go wrong, and how long they take: a CreateVolumeGroupSnapshot whose answer is lost
//! after the driver cut the group, and a csi-snapshotter killed (SIGKILL) while the driver holds the answer, leak
//! nothing — every storage group snapshot and member snapshot ends up with its content, and deleting the group
//! empties the storage; the group operations are timed on both programs' /metrics.
//!
//! The hostpath plugin's fault injection (`--fault-config`) makes the failures; the snapshot-controller watches
//! every namespace, so the tests of this file take turns ([`SERIAL`]).

use std::collections::BTreeSet;
use std::time::Duration;

use csi_sidecars_e2e::control_plane::cluster::Cluster;
use csi_sidecars_e2e::control_plane::snapshot_crds::install_snapshot_crds;
use csi_sidecars_e2e::http::{free_port, http_get};
use csi_sidecars_e2e::processes::rbac::{Sidecar, SidecarIdentity};
use csi_sidecars_e2e::processes::scenario::{Process, Scenario, binary};
use csi_sidecars_e2e::wait::{eventually, wait_for};
use csi_sidecars_e2e::worlds::group::{
    GATE, Groups, labelled_claim, plugin_group_members, plugin_snapshots, sidecar_args, start, start_with,
};
use csi_sidecars_e2e::worlds::provisioner::{ProvisionerWorld as World, TIMEOUT};
use k8s_openapi::api::core::v1::Event;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use snapshot_api::{VolumeGroupSnapshot, VolumeGroupSnapshotClass, VolumeSnapshotContent};

/// One snapshot-controller at a time in the cluster.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The storage's group snapshots and member snapshots each have their content: every group id the plugin lists is
/// the handle of a VolumeGroupSnapshotContent, every member snapshot the handle of a member VolumeSnapshotContent.
async fn every_storage_snapshot_has_its_content(world: &World, groups: &Groups<'_>) {
    let contents = groups.contents().list(&ListParams::default()).await.unwrap().items;
    let group_handles: BTreeSet<String> = contents
        .iter()
        .filter(|c| c.spec.driver == world.driver)
        .filter_map(|c| c.status.as_ref()?.volume_group_snapshot_handle.clone())
        .collect();
    let snapshot_contents: Api<VolumeSnapshotContent> = Api::all(world.client.clone());
    let snapshot_handles: BTreeSet<String> = snapshot_contents
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|c| c.spec.driver == world.driver)
        .filter_map(|c| c.status?.snapshot_handle)
        .collect();
    let rows = plugin_snapshots(world);
    assert!(!rows.is_empty(), "the storage has the group's snapshots");
    for row in rows {
        let group = row["group_snapshot_id"].as_str().unwrap_or_default();
        let snapshot = row["snapshot_id"].as_str().unwrap_or_default();
        assert!(group_handles.contains(group), "storage group snapshot {group} has no content ({group_handles:?})");
        assert!(snapshot_handles.contains(snapshot), "member snapshot {snapshot} has no content");
    }
}

/// Deletes the group snapshot and waits until it and every snapshot on the storage are gone.
async fn delete_and_check_empty(world: &World, groups: &Groups<'_>, name: &str) {
    groups.groups().delete(name, &DeleteParams::default()).await.unwrap();
    groups.gone(name).await;
    eventually("the storage holds no snapshot", TIMEOUT, || async { plugin_snapshots(world).is_empty() }).await;
}

/// A world whose plugin follows the fault `rule` (a `--fault-config` object, rewritten by the test through the
/// returned file), with a storage class served by csi-provisioner.
async fn world_with_faults(prefix: &str, rule: serde_json::Value) -> (tempfile::NamedTempFile, World, String) {
    install_snapshot_crds(&Cluster::shared().client().await).await;
    let faults = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(faults.path(), rule.to_string()).unwrap();
    let fault_flag = format!("--fault-config={}", faults.path().display());
    let mut world = World::new(prefix, &[fault_flag.as_str()]).await;
    let storage_class = world.class("data", &[], "Delete").await;
    (faults, world, storage_class)
}

/// The programs of a group snapshot world. Fields drop in order: each process stops before its identity goes.
struct Programs {
    _provisioner: Process,
    _controller: (Process, SidecarIdentity),
    snapshotter: Process,
    /// csi-snapshotter's identity, for a restart.
    snapshotter_identity: SidecarIdentity,
}

async fn start_programs(world: &mut World) -> Programs {
    let _provisioner = world.start_provisioner("csi-provisioner", &[]);
    let _controller = start(world, Sidecar::SnapshotController, "snapshot-controller").await;
    let (snapshotter, snapshotter_identity) = start(world, Sidecar::Snapshotter, "csi-snapshotter").await;
    Programs { _provisioner, _controller, snapshotter, snapshotter_identity }
}

/// The plugin cuts the group at once but answers the first CreateVolumeGroupSnapshot only 20 s later.
fn held_answer() -> serde_json::Value {
    json!({"CreateVolumeGroupSnapshot": {"after_work": true, "latency_ms": 20000, "times": 1}})
}

/// csi-snapshotter again, under the identity of the one that was killed, in a scenario of its own (`groups` holds
/// the world); its log is printed on failure like the others.
fn restart_snapshotter(world: &World, programs: &Programs) -> (Scenario, Process) {
    let args = sidecar_args(world, &programs.snapshotter_identity, "csi-snapshotter", &[GATE]);
    let mut restart = Scenario::new("csi-snapshotter-restarted");
    let process = restart.start("csi-snapshotter-restarted", &binary("csi-snapshotter"), &args);
    (restart, process)
}

/// The driver cuts the group but the answer is lost (DEADLINE_EXCEEDED after the work, twice): csi-snapshotter
/// asks again under the same name and gets the same group.
#[tokio::test]
async fn a_lost_create_volume_group_snapshot_answer_leaks_nothing() {
    let _turn = SERIAL.lock().await;
    let rule = json!({"CreateVolumeGroupSnapshot": {"code": "DeadlineExceeded", "after_work": true, "times": 2}});
    let (_faults, mut world, storage_class) = world_with_faults("grouplost", rule).await;
    let _programs = start_programs(&mut world).await;
    let groups = Groups::default_class(&world).await;
    for name in ["p", "q"] {
        labelled_claim(&world, name, &storage_class, &[("app", "lost")]).await;
        world.bound(name).await;
    }

    let group = groups.group("lost", json!({"matchLabels": {"app": "lost"}})).await;
    groups.ready("lost").await;
    groups.ready_members(&group, 2).await;
    let faults_fired = world.plugin.log().matches("injected fault after the work").count();
    assert_eq!(faults_fired, 2, "both lost answers happened");
    let content = groups.contents().get(&format!("groupsnapcontent-{}", group.uid().unwrap())).await.unwrap();
    let handle = content.status.unwrap().volume_group_snapshot_handle.unwrap();
    assert_eq!(plugin_group_members(&world, &handle), 2);
    let storage_groups: BTreeSet<String> =
        plugin_snapshots(&world).iter().map(|r| r["group_snapshot_id"].as_str().unwrap().to_string()).collect();
    assert_eq!(storage_groups.len(), 1, "one storage group for three calls: {storage_groups:?}");
    every_storage_snapshot_has_its_content(&world, &groups).await;

    delete_and_check_empty(&world, &groups, "lost").await;
}

/// The driver cuts the group but answers without its id, once: csi-snapshotter records no empty handle (a content
/// marked done with nothing to delete it by), names the problem in a Warning, keeps the content being created and
/// asks again by the same name, which gives the group with its id: one storage group.
#[tokio::test]
async fn a_create_volume_group_snapshot_answer_without_an_id_is_named_and_asked_again() {
    let _turn = SERIAL.lock().await;
    let rule = json!({"CreateVolumeGroupSnapshot": {"answer": "empty_id", "times": 1}});
    let (_faults, mut world, storage_class) = world_with_faults("groupnoid", rule).await;
    let _programs = start_programs(&mut world).await;
    let groups = Groups::default_class(&world).await;
    for name in ["p", "q"] {
        labelled_claim(&world, name, &storage_class, &[("app", "noid")]).await;
        world.bound(name).await;
    }

    let group = groups.group("noid", json!({"matchLabels": {"app": "noid"}})).await;
    groups.ready("noid").await;
    groups.ready_members(&group, 2).await;
    assert_eq!(world.plugin.log().matches("injected fault after the work").count(), 1, "the wrong answer was given");
    let content_name = format!("groupsnapcontent-{}", group.uid().unwrap());
    let events = Api::<Event>::all(world.client.clone())
        .list(&ListParams::default().fields(&format!("involvedObject.name={content_name}")))
        .await
        .unwrap();
    let named = events.items.iter().any(|e| {
        e.reason.as_deref() == Some("GroupSnapshotCreationFailed")
            && e.message.as_deref().is_some_and(|m| m.contains("the driver returned an empty group snapshot id"))
    });
    assert!(named, "a Warning names the empty id: {:?}", events.items.iter().map(|e| &e.message).collect::<Vec<_>>());
    let content = groups.contents().get(&content_name).await.unwrap();
    let handle = content.status.unwrap().volume_group_snapshot_handle.unwrap();
    assert!(!handle.is_empty());
    assert_eq!(plugin_group_members(&world, &handle), 2);
    let storage_groups: BTreeSet<String> =
        plugin_snapshots(&world).iter().map(|r| r["group_snapshot_id"].as_str().unwrap().to_string()).collect();
    assert_eq!(storage_groups.len(), 1, "one storage group for both calls: {storage_groups:?}");

    delete_and_check_empty(&world, &groups, "noid").await;
}

/// csi-snapshotter is killed after the driver cut the group but before it answered (the plugin holds the answer
/// back). The being-created annotation, stored before the call, makes the restarted sidecar ask again; the group
/// and its members get their contents.
#[tokio::test]
async fn a_group_sidecar_killed_after_the_cut_leaks_nothing() {
    let _turn = SERIAL.lock().await;
    let (faults, mut world, storage_class) = world_with_faults("groupkill", held_answer()).await;
    let mut programs = start_programs(&mut world).await;
    let groups = Groups::default_class(&world).await;
    for name in ["m", "n"] {
        labelled_claim(&world, name, &storage_class, &[("app", "killed")]).await;
        world.bound(name).await;
    }

    let group = groups.group("killed", json!({"matchLabels": {"app": "killed"}})).await;
    let content_name = format!("groupsnapcontent-{}", group.uid().unwrap());
    eventually("the driver cut the group", TIMEOUT, || async { plugin_snapshots(&world).len() == 2 }).await;
    let content = groups.contents().get(&content_name).await.unwrap();
    assert!(
        content.annotations().contains_key("groupsnapshot.storage.kubernetes.io/volumegroupsnapshot-being-created"),
        "the call in flight is recorded on the content"
    );
    assert!(content.status.and_then(|s| s.volume_group_snapshot_handle).is_none(), "the answer has not arrived");
    programs.snapshotter.kill9();
    std::fs::write(faults.path(), "{}").unwrap();

    let _restarted = restart_snapshotter(&world, &programs);
    groups.ready("killed").await;
    groups.ready_members(&group, 2).await;
    let content = groups.contents().get(&content_name).await.unwrap();
    assert!(
        !content.annotations().contains_key("groupsnapshot.storage.kubernetes.io/volumegroupsnapshot-being-created")
    );
    assert_eq!(plugin_snapshots(&world).len(), 2, "the second call found the group the first one cut");
    every_storage_snapshot_has_its_content(&world, &groups).await;

    delete_and_check_empty(&world, &groups, "killed").await;
}

/// A killed sidecar whose group snapshot is deleted before it comes back: the restarted sidecar learns the group's
/// id (CreateVolumeGroupSnapshot again, the annotation says one may exist) before it deletes, so nothing stays on
/// the storage.
#[tokio::test]
async fn a_group_deleted_while_its_creation_was_cut_off_leaks_nothing() {
    let _turn = SERIAL.lock().await;
    let (faults, mut world, storage_class) = world_with_faults("groupgone", held_answer()).await;
    let mut programs = start_programs(&mut world).await;
    let groups = Groups::default_class(&world).await;
    labelled_claim(&world, "only", &storage_class, &[("app", "gone")]).await;
    world.bound("only").await;

    let group = groups.group("gone", json!({"matchLabels": {"app": "gone"}})).await;
    let content_name = format!("groupsnapcontent-{}", group.uid().unwrap());
    eventually("the driver cut the group", TIMEOUT, || async { plugin_snapshots(&world).len() == 1 }).await;
    programs.snapshotter.kill9();
    std::fs::write(faults.path(), "{}").unwrap();
    groups.groups().delete("gone", &DeleteParams::default()).await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(groups.contents().get_opt(&content_name).await.unwrap().is_some(), "the content waits for the sidecar");

    let _restarted = restart_snapshotter(&world, &programs);
    groups.gone("gone").await;
    eventually("the content is gone", TIMEOUT, || async {
        matches!(groups.contents().get_opt(&content_name).await, Ok(None))
    })
    .await;
    eventually("the storage holds no snapshot", TIMEOUT, || async { plugin_snapshots(&world).is_empty() }).await;
}

/// Upstream's operation names for groups: the snapshot-controller's `CreateGroupSnapshot`,
/// `CreateGroupSnapshotAndReady` and `DeleteGroupSnapshot` on `snapshot_controller_operation_total_seconds`, and
/// csi-snapshotter's GroupController calls on `csi_sidecar_operations_seconds`.
#[tokio::test]
async fn group_operations_are_timed_on_metrics() {
    let _turn = SERIAL.lock().await;
    install_snapshot_crds(&Cluster::shared().client().await).await;
    let mut world = World::new("groupmetrics", &[]).await;
    let storage_class = world.class("data", &[], "Delete").await;
    let _provisioner = world.start_provisioner("csi-provisioner", &[]);
    let (controller_port, sidecar_port) = (free_port(), free_port());
    let controller_http = format!("--http-endpoint=127.0.0.1:{controller_port}");
    let _controller =
        start_with(&mut world, Sidecar::SnapshotController, "snapshot-controller", &[GATE, &controller_http]).await;
    let sidecar_http = format!("--http-endpoint=127.0.0.1:{sidecar_port}");
    let _snapshotter = start_with(&mut world, Sidecar::Snapshotter, "csi-snapshotter", &[GATE, &sidecar_http]).await;
    let groups = Groups::default_class(&world).await;
    labelled_claim(&world, "timed", &storage_class, &[("app", "timed")]).await;
    world.bound("timed").await;

    let group = groups.group("timed", json!({"matchLabels": {"app": "timed"}})).await;
    groups.ready("timed").await;
    groups.ready_members(&group, 1).await;
    delete_and_check_empty(&world, &groups, "timed").await;

    let series = |operation: &str| {
        format!(
            "snapshot_controller_operation_total_seconds_count{{driver_name=\"{}\",operation_name=\"{operation}\",operation_status=\"success\",snapshot_type=\"dynamic\"}} 1",
            world.driver
        )
    };
    let metrics = wait_for("the group deletion timed", TIMEOUT, || async {
        let metrics = http_get(controller_port, "/metrics").await;
        metrics.contains(&series("DeleteGroupSnapshot")).then_some(metrics)
    })
    .await;
    for operation in ["CreateGroupSnapshot", "CreateGroupSnapshotAndReady", "DeleteGroupSnapshot"] {
        assert!(metrics.contains(&series(operation)), "{} in\n{metrics}", series(operation));
    }

    let metrics = http_get(sidecar_port, "/metrics").await;
    for method in ["CreateVolumeGroupSnapshot", "DeleteVolumeGroupSnapshot"] {
        let series = format!(
            "csi_sidecar_operations_seconds_count{{driver_name=\"{}\",method_name=\"/csi.v1.GroupController/{method}\",grpc_status_code=\"OK\"}}",
            world.driver
        );
        assert!(metrics.lines().any(|l| l.starts_with(&series)), "{series} in\n{metrics}");
    }
}

/// A driver without group snapshots (GroupControllerGetCapabilities and CreateVolumeGroupSnapshot answer
/// UNIMPLEMENTED, as a driver without a GroupController service does) under csi-snapshotter with the gate on: the
/// sidecar still serves group contents, as upstream's does, so each gets a `GroupSnapshotCreationFailed` Warning
/// naming the driver's answer instead of waiting unseen; the group is never ready and no storage snapshot is made.
#[tokio::test]
async fn a_driver_without_group_snapshots_gets_a_named_event() {
    let _turn = SERIAL.lock().await;
    let unimplemented = json!({"code": "Unimplemented", "message": "this driver has no group snapshots"});
    let rule = json!({"GroupControllerGetCapabilities": unimplemented, "CreateVolumeGroupSnapshot": unimplemented});
    let (_faults, mut world, storage_class) = world_with_faults("groupnocap", rule).await;
    let _programs = start_programs(&mut world).await;
    let groups = Groups::default_class(&world).await;
    labelled_claim(&world, "p", &storage_class, &[("app", "nocap")]).await;
    world.bound("p").await;

    let group = groups.group("nocap", json!({"matchLabels": {"app": "nocap"}})).await;
    let event = creation_failed_event(&world, &group).await;
    let message = event.message.clone().unwrap_or_default();
    assert!(message.contains("this driver has no group snapshots"), "names the driver's answer: {message}");
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    let group = groups.groups().get("nocap").await.unwrap();
    assert_ne!(group.status.and_then(|s| s.ready_to_use), Some(true), "the group is not ready");
    assert!(plugin_snapshots(&world).is_empty(), "no storage snapshot");
}

/// A VolumeGroupSnapshotClass naming a group-snapshotter Secret that does not exist yet: the content gets a
/// `GroupSnapshotCreationFailed` Warning naming the Secret and nothing is cut; once the Secret exists the group is
/// cut with it, and deleted (its deletion reads the same Secret) with nothing left in the storage.
#[tokio::test]
async fn a_group_secret_is_named_until_it_exists_then_used_to_cut_and_delete() {
    let _turn = SERIAL.lock().await;
    let (_faults, mut world, storage_class) = world_with_faults("groupsecret", json!({})).await;
    let _programs = start_programs(&mut world).await;
    let class = format!("{}-group-secret", world.ns());
    let object: VolumeGroupSnapshotClass = serde_json::from_value(json!({
        "apiVersion": "groupsnapshot.storage.k8s.io/v1",
        "kind": "VolumeGroupSnapshotClass",
        "metadata": {"name": class},
        "driver": world.driver,
        "deletionPolicy": "Delete",
        "parameters": {
            "csi.storage.k8s.io/group-snapshotter-secret-name": "group-credentials",
            "csi.storage.k8s.io/group-snapshotter-secret-namespace": "${volumegroupsnapshot.namespace}",
        },
    }))
    .unwrap();
    Api::<VolumeGroupSnapshotClass>::all(world.client.clone()).create(&PostParams::default(), &object).await.unwrap();
    let groups = Groups { world: &world, class };
    labelled_claim(&world, "p", &storage_class, &[("app", "secret")]).await;
    world.bound("p").await;

    let group = groups.group_of_class("guarded", json!({"matchLabels": {"app": "secret"}})).await;
    let event = creation_failed_event(&world, &group).await;
    let message = event.message.clone().unwrap_or_default();
    assert!(message.contains("group-credentials"), "names the Secret: {message}");
    assert!(plugin_snapshots(&world).is_empty(), "nothing cut without the Secret");

    world.secret("group-credentials", "password", "group-secret-value").await;
    groups.ready("guarded").await;
    groups.ready_members(&group, 1).await;
    delete_and_check_empty(&world, &groups, "guarded").await;
}

/// The `GroupSnapshotCreationFailed` event on the group's content (cluster-scoped: its events are in `default`).
async fn creation_failed_event(world: &World, group: &VolumeGroupSnapshot) -> Event {
    let content = format!("groupsnapcontent-{}", group.uid().unwrap());
    let events: Api<Event> = Api::all(world.client.clone());
    wait_for("a GroupSnapshotCreationFailed event on the content", TIMEOUT, || async {
        let params = ListParams::default().fields(&format!("involvedObject.name={content}"));
        let listed = events.list(&params).await.ok()?.items;
        listed.into_iter().find(|e| e.reason.as_deref() == Some("GroupSnapshotCreationFailed"))
    })
    .await
}
