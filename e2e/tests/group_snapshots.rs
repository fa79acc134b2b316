//! VolumeGroupSnapshots (KEP-3476) against the real control plane, following the seed's story: a database on three
//! claims labelled `app: postgresql` (and a web claim that is not) is snapshotted as one group by the hostpath
//! plugin's CreateVolumeGroupSnapshot; each member is a VolumeSnapshot that restores like any other; deleting the
//! group takes its members, their contents and the storage group snapshot with it.
//!
//! snapshot-controller and csi-snapshotter run with `--feature-gates=CSIVolumeGroupSnapshot=true`, each as a
//! ServiceAccount with upstream's rules; csi-provisioner provisions the claims and the restore. The
//! snapshot-controller watches every namespace, so the tests of this file take turns ([`SERIAL`]).

use std::collections::BTreeMap;

use csi_sidecars_e2e::provisioner_world::{ProvisionerWorld as World, TIMEOUT, claim, has_finalizer};
use csi_sidecars_e2e::{Cluster, Rules, Sidecar, SidecarIdentity, binary, eventually, install_snapshot_crds, wait_for};
use k8s_openapi::api::core::v1::TypedLocalObjectReference;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use snapshot_api::{VolumeGroupSnapshot, VolumeGroupSnapshotClass, VolumeGroupSnapshotContent, VolumeSnapshot};

const IN_GROUP: &str = "snapshot.storage.kubernetes.io/volumesnapshot-in-group-protection";
const GROUP_BOUND: &str = "groupsnapshot.storage.kubernetes.io/volumegroupsnapshot-bound-protection";
const GATE: &str = "--feature-gates=CSIVolumeGroupSnapshot=true";

/// One snapshot-controller at a time in the cluster.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A sidecar of the snapshot pair as a ServiceAccount with upstream's rules, group snapshots on. The process comes
/// first so that it stops before the identity's bindings go.
async fn start(world: &mut World, sidecar: Sidecar, name: &str) -> (csi_sidecars_e2e::Process, SidecarIdentity) {
    start_with(world, sidecar, name, &[GATE]).await
}

/// [`start`] with other flags than the gate.
async fn start_with(
    world: &mut World,
    sidecar: Sidecar,
    name: &str,
    extra: &[&str],
) -> (csi_sidecars_e2e::Process, SidecarIdentity) {
    // csi-group-snapshotter has csi-snapshotter's rules, under an account of its own beside it.
    let identity =
        SidecarIdentity::with_rules(&world.client, world.ns(), name, Rules::of(sidecar), world.scenario.dir()).await;
    let mut args = vec![
        identity.kubeconfig_flag(),
        "--retry-interval-start=200ms".to_string(),
        "--retry-interval-max=2s".to_string(),
        "-v=5".to_string(),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    if name != "snapshot-controller" {
        args.push(format!("--csi-address={}", world.socket.display()));
    }
    let process = world.scenario.start(name, &binary(name), &args);
    (process, identity)
}

struct Groups<'a> {
    world: &'a World,
    class: String,
}

impl Groups<'_> {
    fn groups(&self) -> Api<VolumeGroupSnapshot> {
        Api::namespaced(self.world.client.clone(), self.world.ns())
    }

    fn snapshots(&self) -> Api<VolumeSnapshot> {
        Api::namespaced(self.world.client.clone(), self.world.ns())
    }

    /// The driver's default VolumeGroupSnapshotClass, policy Delete, named after the namespace.
    async fn default_class(world: &World) -> Groups<'_> {
        let class = format!("{}-group", world.ns());
        let object: VolumeGroupSnapshotClass = serde_json::from_value(json!({
            "apiVersion": "groupsnapshot.storage.k8s.io/v1",
            "kind": "VolumeGroupSnapshotClass",
            "metadata": {"name": class, "annotations": {"groupsnapshot.storage.kubernetes.io/is-default-class": "true"}},
            "driver": world.driver,
            "deletionPolicy": "Delete",
        }))
        .unwrap();
        Api::<VolumeGroupSnapshotClass>::all(world.client.clone())
            .create(&PostParams::default(), &object)
            .await
            .unwrap();
        Groups { world, class }
    }

    async fn group(&self, name: &str, selector: serde_json::Value) -> VolumeGroupSnapshot {
        let object: VolumeGroupSnapshot = serde_json::from_value(json!({
            "apiVersion": "groupsnapshot.storage.k8s.io/v1",
            "kind": "VolumeGroupSnapshot",
            "metadata": {"name": name},
            "spec": {"source": {"selector": selector}},
        }))
        .unwrap();
        self.groups().create(&PostParams::default(), &object).await.unwrap()
    }

    async fn ready(&self, name: &str) -> VolumeGroupSnapshot {
        let api = self.groups();
        wait_for(&format!("group snapshot {name} ready"), TIMEOUT, || async {
            api.get(name).await.ok().filter(|g| g.status.as_ref().and_then(|s| s.ready_to_use) == Some(true))
        })
        .await
    }

    /// The VolumeSnapshots owned by the group, once there are `count` of them and all are ready.
    async fn ready_members(&self, group: &VolumeGroupSnapshot, count: usize) -> Vec<VolumeSnapshot> {
        let uid = group.uid().unwrap();
        let api = self.snapshots();
        wait_for(&format!("{count} ready members of {}", group.name_any()), TIMEOUT, || async {
            let members: Vec<VolumeSnapshot> = api
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .into_iter()
                .filter(|s| s.owner_references().iter().any(|o| o.uid == uid))
                .collect();
            let ready = members.iter().all(|s| s.status.as_ref().and_then(|s| s.ready_to_use) == Some(true));
            (members.len() == count && ready).then_some(members)
        })
        .await
    }
}

impl Drop for Groups<'_> {
    fn drop(&mut self) {
        let class = self.class.clone();
        csi_sidecars_e2e::clean_up(move |client| async move {
            let _ = Api::<VolumeGroupSnapshotClass>::all(client).delete(&class, &DeleteParams::default()).await;
        });
    }
}

/// A claim of the story, with its labels.
async fn labelled_claim(world: &World, name: &str, class: &str, labels: &[(&str, &str)]) {
    let mut object = claim(name, class, None, "ReadWriteOnce");
    object.metadata.labels = Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
    world.claim_object(object).await;
}

/// `snapshot-` and the hex SHA-256 of the group UID followed by the volume handle, computed by `sha256sum` so that
/// the check does not rely on the code under test.
fn member_name(group_uid: &str, volume_handle: &str) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run sha256sum");
    child.stdin.take().unwrap().write_all(format!("{group_uid}{volume_handle}").as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    let hex = String::from_utf8(output.stdout).unwrap();
    format!("snapshot-{}", hex.split_whitespace().next().unwrap())
}

/// The plugin's snapshots of one storage group snapshot, through csictl's ListSnapshots.
fn plugin_group_members(world: &World, group_snapshot_id: &str) -> usize {
    let output = std::process::Command::new(binary("csictl"))
        .arg(format!("--endpoint=unix://{}", world.socket.display()))
        .args(["list-snapshots", "-o", "json"])
        .output()
        .expect("run csictl");
    assert!(output.status.success(), "csictl: {}", String::from_utf8_lossy(&output.stderr));
    let rows: serde_json::Value = serde_json::from_slice(&output.stdout).expect("csictl json");
    let rows = rows.as_array().cloned().unwrap_or_default();
    rows.iter().filter(|r| r["group_snapshot_id"] == group_snapshot_id).count()
}

#[tokio::test]
async fn a_database_is_snapshotted_as_one_group_restored_and_deleted() {
    let _turn = SERIAL.lock().await;
    install_snapshot_crds(&Cluster::shared().client().await).await;
    let mut world = World::new("groupsnap", &[]).await;
    let storage_class = world.class("data", &[], "Delete").await;
    let _provisioner = world.start_provisioner("csi-provisioner", &[]);
    let _controller = start(&mut world, Sidecar::SnapshotController, "snapshot-controller").await;
    let _snapshotter = start(&mut world, Sidecar::Snapshotter, "csi-snapshotter").await;
    let groups = Groups::default_class(&world).await;

    for (name, role) in [("db-0", "primary"), ("db-1", "replica"), ("db-2", "replica")] {
        labelled_claim(&world, name, &storage_class, &[("app", "postgresql"), ("role", role)]).await;
    }
    labelled_claim(&world, "web", &storage_class, &[("app", "web")]).await;
    let mut handles = BTreeMap::new();
    for name in ["db-0", "db-1", "db-2", "web"] {
        let volume = world.bound(name).await;
        let handle = world.volumes().get(&volume).await.unwrap().spec.unwrap().csi.unwrap().volume_handle;
        handles.insert(name, handle);
    }

    // One group of the three database claims, with the driver's default class.
    let pg = groups.group("pg", json!({"matchLabels": {"app": "postgresql"}})).await;
    let uid = pg.uid().unwrap();
    let pg = groups.ready("pg").await;
    assert_eq!(pg.spec.volume_group_snapshot_class_name.as_deref(), Some(groups.class.as_str()));
    assert!(has_finalizer(&pg.metadata, GROUP_BOUND));
    let content_name = format!("groupsnapcontent-{uid}");
    assert_eq!(pg.status.as_ref().unwrap().bound_volume_group_snapshot_content_name.as_deref(), Some(&*content_name));
    let contents: Api<VolumeGroupSnapshotContent> = Api::all(world.client.clone());
    let content = contents.get(&content_name).await.unwrap();
    let mut selected = content.spec.source.volume_handles.clone().unwrap();
    selected.sort();
    let mut wanted: Vec<String> = ["db-0", "db-1", "db-2"].iter().map(|c| handles[c].clone()).collect();
    wanted.sort();
    assert_eq!(selected, wanted, "the web claim is not in the group");
    let group_handle = content.status.unwrap().volume_group_snapshot_handle.expect("the driver's group id");
    assert_eq!(plugin_group_members(&world, &group_handle), 3);

    // Three ready members, named after the group UID and their volume, each restorable.
    let members = groups.ready_members(&pg, 3).await;
    for claim_name in ["db-0", "db-1", "db-2"] {
        let name = member_name(&uid, &handles[claim_name]);
        let member = members.iter().find(|m| m.name_any() == name).unwrap_or_else(|| panic!("member {name}"));
        assert_eq!(member.spec.source.persistent_volume_claim_name.as_deref(), Some(claim_name));
        assert_eq!(member.status.as_ref().unwrap().volume_group_snapshot_name.as_deref(), Some("pg"));
        assert!(has_finalizer(&member.metadata, IN_GROUP));
    }
    let replica = member_name(&uid, &handles["db-1"]);
    let mut restored = claim("db-1-restored", &storage_class, None, "ReadWriteOnce");
    restored.spec.as_mut().unwrap().data_source = Some(TypedLocalObjectReference {
        api_group: Some("snapshot.storage.k8s.io".into()),
        kind: "VolumeSnapshot".into(),
        name: replica.clone(),
    });
    world.claim_object(restored).await;
    world.bound("db-1-restored").await;

    // A member cannot be deleted on its own while its group exists.
    groups.snapshots().delete(&replica, &DeleteParams::default()).await.unwrap();
    world.event(&replica, "SnapshotDeletePending", "belongs to group snapshot").await;
    assert!(groups.snapshots().get_opt(&replica).await.unwrap().is_some());

    // matchExpressions: the replicas only.
    let replicas = groups
        .group(
            "pg-replicas",
            json!({"matchExpressions": [
                {"key": "app", "operator": "In", "values": ["postgresql"]},
                {"key": "role", "operator": "NotIn", "values": ["primary"]},
            ]}),
        )
        .await;
    groups.ready("pg-replicas").await;
    let replica_members = groups.ready_members(&replicas, 2).await;
    let names: Vec<String> = replica_members.iter().map(|m| m.name_any()).collect();
    assert!(!names.contains(&member_name(&replicas.uid().unwrap(), &handles["db-0"])), "{names:?}");

    // A selector no claim matches is refused with a Warning naming it.
    groups.group("nothing", json!({"matchLabels": {"app": "mysql"}})).await;
    world.event("nothing", "GroupSnapshotContentCreationFailed", "not applied to any PVC").await;

    // Deleting the group takes its members, their contents, its content and the storage group snapshot.
    let member_contents: Vec<String> =
        members.iter().filter_map(|m| m.status.as_ref()?.bound_volume_snapshot_content_name.clone()).collect();
    assert_eq!(member_contents.len(), 3);
    groups.groups().delete("pg", &DeleteParams::default()).await.unwrap();
    eventually("group snapshot pg is gone", TIMEOUT, || async {
        matches!(groups.groups().get_opt("pg").await, Ok(None))
    })
    .await;
    eventually("its content is gone", TIMEOUT, || async { matches!(contents.get_opt(&content_name).await, Ok(None)) })
        .await;
    let snapshot_contents: Api<snapshot_api::VolumeSnapshotContent> = Api::all(world.client.clone());
    eventually("its members and their contents are gone", TIMEOUT, || async {
        for member in &members {
            if !matches!(groups.snapshots().get_opt(&member.name_any()).await, Ok(None)) {
                return false;
            }
        }
        for content in &member_contents {
            if !matches!(snapshot_contents.get_opt(content).await, Ok(None)) {
                return false;
            }
        }
        true
    })
    .await;
    assert_eq!(plugin_group_members(&world, &group_handle), 0, "DeleteVolumeGroupSnapshot removed the storage group");
    // The other group is untouched.
    assert_eq!(groups.ready_members(&replicas, 2).await.len(), 2);
    groups.groups().delete("pg-replicas", &DeleteParams::default()).await.unwrap();
    groups.groups().delete("nothing", &DeleteParams::default()).await.unwrap();
    eventually("the other groups are gone", TIMEOUT, || async {
        groups.groups().list(&ListParams::default()).await.is_ok_and(|l| l.items.is_empty())
    })
    .await;
}

/// csi-group-snapshotter runs the group loop alone, beside a csi-snapshotter without the gate, under a Lease of its
/// own.
#[tokio::test]
async fn csi_group_snapshotter_cuts_groups_alone_under_its_own_lease() {
    let _turn = SERIAL.lock().await;
    install_snapshot_crds(&Cluster::shared().client().await).await;
    let mut world = World::new("groupalone", &[]).await;
    let storage_class = world.class("data", &[], "Delete").await;
    let _provisioner = world.start_provisioner("csi-provisioner", &[]);
    let _controller = start(&mut world, Sidecar::SnapshotController, "snapshot-controller").await;
    let _snapshotter = start_with(&mut world, Sidecar::Snapshotter, "csi-snapshotter", &[]).await;
    let namespace = format!("--leader-election-namespace={}", world.ns());
    let _groups_alone =
        start_with(&mut world, Sidecar::Snapshotter, "csi-group-snapshotter", &["--leader-election", &namespace]).await;
    let groups = Groups::default_class(&world).await;
    for name in ["a", "b"] {
        labelled_claim(&world, name, &storage_class, &[("app", "queue")]).await;
        world.bound(name).await;
    }

    let group = groups.group("queue", json!({"matchLabels": {"app": "queue"}})).await;
    groups.ready("queue").await;
    groups.ready_members(&group, 2).await;
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> = Api::namespaced(world.client.clone(), world.ns());
    let lease_name = format!("external-snapshotter-group-leader-{}", world.driver.replace(['.', '/', '_'], "-"));
    let lease = leases.get(&lease_name).await.expect("csi-group-snapshotter's Lease");
    assert!(lease.spec.and_then(|s| s.holder_identity).is_some_and(|h| !h.is_empty()));

    groups.groups().delete("queue", &DeleteParams::default()).await.unwrap();
    eventually("group snapshot queue is gone", TIMEOUT, || async {
        matches!(groups.groups().get_opt("queue").await, Ok(None))
    })
    .await;
}
