//! VolumeGroupSnapshots (KEP-3476) against the real control plane, following the seed's story: a database on three
//! claims labelled `app: postgresql` (and a web claim that is not) is snapshotted as one group by the hostpath
//! plugin's CreateVolumeGroupSnapshot; each member is a VolumeSnapshot that restores like any other; deleting the
//! group takes its members, their contents and the storage group snapshot with it.
//!
//! snapshot-controller and csi-snapshotter run without `--feature-gates` (group snapshots are on by default since
//! external-snapshotter v8.7.0), each as a ServiceAccount with upstream's rules; csi-provisioner provisions the
//! claims and the restore. The
//! snapshot-controller watches every namespace, so the tests of this file take turns ([`SERIAL`]).

use std::collections::BTreeMap;

use csi_sidecars_e2e::control_plane::cluster::Cluster;
use csi_sidecars_e2e::control_plane::snapshot_crds::install_snapshot_crds;
use csi_sidecars_e2e::processes::rbac::Sidecar;
use csi_sidecars_e2e::wait::eventually;
use csi_sidecars_e2e::worlds::group::{
    GATE_OFF, GROUP_BOUND, Groups, IN_GROUP, labelled_claim, member_name, plugin_group_members, start, start_with,
};
use csi_sidecars_e2e::worlds::provisioner::{ProvisionerWorld as World, TIMEOUT, claim, has_finalizer};
use k8s_openapi::api::core::v1::TypedLocalObjectReference;
use kube::api::{DeleteParams, ListParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use snapshot_api::VolumeGroupSnapshotContent;

/// One snapshot-controller at a time in the cluster.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

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

/// csi-group-snapshotter runs the group loop alone, beside a csi-snapshotter whose own group loop is turned off with
/// the GA gate (which it warns about, as upstream's component-base does), under a Lease of its own.
#[tokio::test]
async fn csi_group_snapshotter_cuts_groups_alone_under_its_own_lease() {
    let _turn = SERIAL.lock().await;
    install_snapshot_crds(&Cluster::shared().client().await).await;
    let mut world = World::new("groupalone", &[]).await;
    let storage_class = world.class("data", &[], "Delete").await;
    let _provisioner = world.start_provisioner("csi-provisioner", &[]);
    let _controller = start(&mut world, Sidecar::SnapshotController, "snapshot-controller").await;
    let (snapshotter, _identity) = start_with(&mut world, Sidecar::Snapshotter, "csi-snapshotter", &[GATE_OFF]).await;
    eventually("csi-snapshotter warns about the GA gate", TIMEOUT, || async {
        let log = snapshotter.log();
        log.contains("Warning: setting GA feature gate") && log.contains("CSIVolumeGroupSnapshot")
    })
    .await;
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

/// A VolumeGroupSnapshotContent an administrator made for a storage group snapshot that exists already
/// (`source.groupSnapshotHandles`) binds to the group snapshot naming it, and csi-snapshotter asks the driver with
/// GetVolumeGroupSnapshot. The members are the administrator's, as upstream has it: the snapshot-controller makes
/// none (Kubernetes' e2e volumegroupsnapshottable suite counts the group's owned snapshots); a VolumeSnapshotContent
/// and a VolumeSnapshot per storage snapshot, the snapshot owned by the group, each ready and restorable.
#[tokio::test]
async fn a_pre_provisioned_group_binds_and_its_members_are_the_administrators() {
    let _turn = SERIAL.lock().await;
    install_snapshot_crds(&Cluster::shared().client().await).await;
    let mut world = World::new("grouppre", &[]).await;
    let storage_class = world.class("data", &[], "Delete").await;
    let _provisioner = world.start_provisioner("csi-provisioner", &[]);
    let _controller = start(&mut world, Sidecar::SnapshotController, "snapshot-controller").await;
    let _snapshotter = start(&mut world, Sidecar::Snapshotter, "csi-snapshotter").await;
    let groups = Groups::class(&world, "imported", "Delete", false).await;
    let mut handles = BTreeMap::new();
    for name in ["a", "b"] {
        labelled_claim(&world, name, &storage_class, &[("app", "legacy")]).await;
    }
    for name in ["a", "b"] {
        let volume = world.bound(name).await;
        let handle = world.volumes().get(&volume).await.unwrap().spec.unwrap().csi.unwrap().volume_handle;
        handles.insert(name, handle);
    }

    // The storage group snapshot exists before Kubernetes knows of it.
    let sources = format!("{},{}", handles["a"], handles["b"]);
    let cut = world.csictl(&["create-group-snapshot", "legacy-backup", "--source-volume-id", &sources]);
    let group_id = cut["group_snapshot_id"].as_str().unwrap().to_string();
    let snapshot_ids: Vec<String> =
        cut["snapshots"].as_array().unwrap().iter().map(|s| s["snapshot_id"].as_str().unwrap().to_string()).collect();
    assert_eq!(snapshot_ids.len(), 2);
    let content_name = format!("{}-imported", world.ns());
    let content: VolumeGroupSnapshotContent = serde_json::from_value(json!({
        "apiVersion": "groupsnapshot.storage.k8s.io/v1",
        "kind": "VolumeGroupSnapshotContent",
        "metadata": {"name": content_name},
        "spec": {
            "deletionPolicy": "Delete",
            "driver": world.driver,
            "source": {"groupSnapshotHandles": {"volumeGroupSnapshotHandle": group_id, "volumeSnapshotHandles": snapshot_ids}},
            "volumeGroupSnapshotRef": {"name": "imported", "namespace": world.ns()},
        },
    }))
    .unwrap();
    groups.contents().create(&Default::default(), &content).await.unwrap();

    let group = groups
        .create(
            "imported",
            json!({"source": {"volumeGroupSnapshotContentName": content_name}, "volumeGroupSnapshotClassName": groups.class}),
        )
        .await;
    let uid = group.uid().unwrap();
    let group = groups.ready("imported").await;
    assert_eq!(
        group.status.as_ref().unwrap().bound_volume_group_snapshot_content_name.as_deref(),
        Some(&*content_name)
    );
    assert!(has_finalizer(&group.metadata, GROUP_BOUND));
    let content = groups.contents().get(&content_name).await.unwrap();
    assert_eq!(content.spec.volume_group_snapshot_ref.uid.as_deref(), Some(uid.as_str()), "bound by UID");
    assert_eq!(content.spec.volume_group_snapshot_class_name.as_deref(), Some(groups.class.as_str()));

    // No member from the controller: a derived name finds nothing, and nothing is owned by the group.
    let owned = || async {
        let all = groups.snapshots().list(&ListParams::default()).await.unwrap().items;
        all.into_iter().filter(|s| s.owner_references().iter().any(|o| o.uid == uid)).count()
    };
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert_eq!(owned().await, 0, "the snapshot-controller made no member of a pre-provisioned group");
    assert!(groups.snapshots().get_opt(&member_name(&uid, &handles["a"])).await.unwrap().is_none());

    // The administrator's members, as upstream's procedure has them.
    let snapshot_contents: Api<snapshot_api::VolumeSnapshotContent> = Api::all(world.client.clone());
    for (index, id) in snapshot_ids.iter().enumerate() {
        let (content, snapshot) = (format!("{}-member-{index}", world.ns()), format!("member-{index}"));
        let member_content: snapshot_api::VolumeSnapshotContent = serde_json::from_value(json!({
            "apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotContent", "metadata": {"name": content},
            "spec": {"deletionPolicy": "Delete", "driver": world.driver, "source": {"snapshotHandle": id},
                     "volumeSnapshotRef": {"name": snapshot, "namespace": world.ns()}},
        }))
        .unwrap();
        snapshot_contents.create(&Default::default(), &member_content).await.unwrap();
        let member: snapshot_api::VolumeSnapshot = serde_json::from_value(json!({
            "apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
            "metadata": {"name": snapshot, "ownerReferences": [{"apiVersion": "groupsnapshot.storage.k8s.io/v1",
                "kind": "VolumeGroupSnapshot", "name": "imported", "uid": uid}]},
            "spec": {"source": {"volumeSnapshotContentName": content}},
        }))
        .unwrap();
        groups.snapshots().create(&Default::default(), &member).await.unwrap();
    }
    for index in 0..snapshot_ids.len() {
        let name = format!("member-{index}");
        eventually(&format!("{name} ready"), TIMEOUT, || async {
            let snapshot = groups.snapshots().get(&name).await.unwrap();
            snapshot.status.and_then(|s| s.ready_to_use) == Some(true)
        })
        .await;
    }
    assert_eq!(owned().await, snapshot_ids.len(), "exactly the administrator's members are the group's");
    let mut restored = claim("a-restored", &storage_class, None, "ReadWriteOnce");
    restored.spec.as_mut().unwrap().data_source = Some(TypedLocalObjectReference {
        api_group: Some("snapshot.storage.k8s.io".into()),
        kind: "VolumeSnapshot".into(),
        name: "member-0".into(),
    });
    world.claim_object(restored).await;
    world.bound("a-restored").await;

    // Policy Delete: deleting the group deletes its members and the imported storage group snapshot too.
    groups.groups().delete("imported", &DeleteParams::default()).await.unwrap();
    groups.gone("imported").await;
    eventually("the content is gone", TIMEOUT, || async {
        matches!(groups.contents().get_opt(&content_name).await, Ok(None))
    })
    .await;
    eventually("the members are gone", TIMEOUT, || async { owned().await == 0 }).await;
    assert_eq!(plugin_group_members(&world, &group_id), 0, "DeleteVolumeGroupSnapshot removed the storage group");
}

/// With a class of policy Retain, deleting a group snapshot deletes its VolumeSnapshots but keeps its content, the
/// members' contents and the storage group snapshot.
#[tokio::test]
async fn a_retained_group_keeps_its_contents_and_storage() {
    let _turn = SERIAL.lock().await;
    install_snapshot_crds(&Cluster::shared().client().await).await;
    let mut world = World::new("groupretain", &[]).await;
    let storage_class = world.class("data", &[], "Delete").await;
    let _provisioner = world.start_provisioner("csi-provisioner", &[]);
    let _controller = start(&mut world, Sidecar::SnapshotController, "snapshot-controller").await;
    let _snapshotter = start(&mut world, Sidecar::Snapshotter, "csi-snapshotter").await;
    let groups = Groups::class(&world, "retain", "Retain", false).await;
    for name in ["x", "y"] {
        labelled_claim(&world, name, &storage_class, &[("app", "cache")]).await;
        world.bound(name).await;
    }

    let group = groups.group_of_class("cache", json!({"matchLabels": {"app": "cache"}})).await;
    groups.ready("cache").await;
    let members = groups.ready_members(&group, 2).await;
    let content_name = format!("groupsnapcontent-{}", group.uid().unwrap());
    let content = groups.contents().get(&content_name).await.unwrap();
    let status = content.status.clone().unwrap();
    let group_id = status.volume_group_snapshot_handle.clone().unwrap();
    let snapshot_ids: Vec<String> =
        status.volume_snapshot_info_list.iter().flatten().filter_map(|e| e.snapshot_handle.clone()).collect();
    let member_contents: Vec<String> =
        members.iter().filter_map(|m| m.status.as_ref()?.bound_volume_snapshot_content_name.clone()).collect();
    assert_eq!(member_contents.len(), 2);

    groups.groups().delete("cache", &DeleteParams::default()).await.unwrap();
    groups.gone("cache").await;
    eventually("the member VolumeSnapshots are gone", TIMEOUT, || async {
        let list = groups.snapshots().list(&ListParams::default()).await.unwrap();
        list.items.is_empty()
    })
    .await;
    // Give a wrong deletion time to happen before looking.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let kept = groups.contents().get(&content_name).await.expect("the group content is kept");
    assert!(kept.metadata.deletion_timestamp.is_none(), "the group content is not being deleted");
    assert_eq!(kept.status.and_then(|s| s.volume_group_snapshot_handle).as_deref(), Some(group_id.as_str()));
    let snapshot_contents: Api<snapshot_api::VolumeSnapshotContent> = Api::all(world.client.clone());
    for name in &member_contents {
        let member = snapshot_contents.get(name).await.expect("the member content is kept");
        assert!(member.metadata.deletion_timestamp.is_none(), "{name} is not being deleted");
        assert_eq!(member.spec.deletion_policy, snapshot_api::DeletionPolicy::Retain);
    }
    assert_eq!(plugin_group_members(&world, &group_id), 2, "the storage group snapshot is kept");

    // The administrator's clean-up: the storage group, then the objects that recorded it.
    let ids = snapshot_ids.join(",");
    world.csictl(&["delete-group-snapshot", &group_id, "--snapshot-id", &ids]);
    assert_eq!(plugin_group_members(&world, &group_id), 0);
    groups.contents().delete(&content_name, &DeleteParams::default()).await.unwrap();
    for name in &member_contents {
        snapshot_contents.delete(name, &DeleteParams::default()).await.unwrap();
    }
    eventually("the retained contents are gone once deleted", TIMEOUT, || async {
        let mut gone = matches!(groups.contents().get_opt(&content_name).await, Ok(None));
        for name in &member_contents {
            gone &= matches!(snapshot_contents.get_opt(name).await, Ok(None));
        }
        gone
    })
    .await;
}

/// Every refused group snapshot gets a Warning naming the cause and an error in its status, and stays as it is,
/// while a group snapshot of good claims beside them is cut.
#[tokio::test]
async fn refused_groups_say_why_and_others_are_served() {
    let _turn = SERIAL.lock().await;
    install_snapshot_crds(&Cluster::shared().client().await).await;
    let mut world = World::new("grouprefuse", &[]).await;
    let storage_class = world.class("data", &[], "Delete").await;
    let _provisioner = world.start_provisioner("csi-provisioner", &[]);
    let _controller = start(&mut world, Sidecar::SnapshotController, "snapshot-controller").await;
    let _snapshotter = start(&mut world, Sidecar::Snapshotter, "csi-snapshotter").await;
    let groups = Groups::default_class(&world).await;

    labelled_claim(&world, "good", &storage_class, &[("app", "good")]).await;
    labelled_claim(&world, "mine", &storage_class, &[("app", "mixed")]).await;
    // No provisioner serves this class: the claim stays Pending.
    labelled_claim(&world, "waiting", "no-such-class", &[("app", "pending")]).await;
    // A claim bound to a volume of another driver.
    let foreign_volume = format!("{}-foreign", world.ns());
    let volume: k8s_openapi::api::core::v1::PersistentVolume = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": foreign_volume},
        "spec": {
            "capacity": {"storage": "1Mi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "csi": {"driver": "other.csi.e2e", "volumeHandle": "foreign-1"},
            "claimRef": {"namespace": world.ns(), "name": "foreign"},
        },
    }))
    .unwrap();
    world.volumes().create(&Default::default(), &volume).await.unwrap();
    let mut foreign = claim("foreign", "", None, "ReadWriteOnce");
    foreign.spec.as_mut().unwrap().volume_name = Some(foreign_volume.clone());
    foreign.metadata.labels = Some([("app".to_string(), "mixed".to_string())].into());
    world.claim_object(foreign).await;
    for name in ["good", "mine", "foreign"] {
        world.bound(name).await;
    }

    groups.group("empty", json!({"matchLabels": {"app": "nothing"}})).await;
    groups.group("pending", json!({"matchLabels": {"app": "pending"}})).await;
    groups.group_of_class("mixed", json!({"matchLabels": {"app": "mixed"}})).await;
    let good = groups.group("good", json!({"matchLabels": {"app": "good"}})).await;

    // (group, reason, cause)
    let refusals = [
        ("empty", "GroupSnapshotContentCreationFailed", "label selector".to_string()),
        ("pending", "GroupSnapshotContentCreationFailed", "the PVC waiting is not yet bound".to_string()),
        (
            "mixed",
            "CreateGroupSnapshotContentFailed",
            format!(
                "Volume CSI driver (other.csi.e2e) of PVC foreign mismatch with VolumeGroupSnapshotClass {}",
                groups.class
            ),
        ),
    ];
    for (group, reason, cause) in &refusals {
        world.event(group, reason, cause).await;
    }
    assert!(
        world.event("empty", "GroupSnapshotContentCreationFailed", "not applied to any PVC").await.message.is_some()
    );

    // The good group is served meanwhile.
    groups.ready("good").await;
    groups.ready_members(&good, 1).await;

    for (group, _, cause) in &refusals {
        let object = groups.groups().get(group).await.unwrap();
        assert!(object.metadata.deletion_timestamp.is_none(), "{group} is left as it is");
        let status = object.status.unwrap_or_default();
        assert_ne!(status.ready_to_use, Some(true), "{group}");
        assert!(status.bound_volume_group_snapshot_content_name.is_none(), "{group} has no content");
        let error = status.error.and_then(|e| e.message).unwrap_or_default();
        assert!(error.contains(cause.as_str()), "{group}: status error {error:?} names {cause:?}");
        let content = format!("groupsnapcontent-{}", object.metadata.uid.unwrap());
        assert!(groups.contents().get_opt(&content).await.unwrap().is_none(), "no content for {group}");
    }

    for name in ["empty", "pending", "mixed", "good"] {
        groups.groups().delete(name, &DeleteParams::default()).await.unwrap();
    }
    eventually("the groups are gone", TIMEOUT, || async {
        groups.groups().list(&ListParams::default()).await.is_ok_and(|l| l.items.is_empty())
    })
    .await;
    world.claims().delete("foreign", &DeleteParams::default()).await.unwrap();
    world.volumes().delete(&foreign_volume, &DeleteParams::default()).await.unwrap();
}
