use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{
    ObjectReference, PersistentVolumeClaimSpec, PersistentVolumeClaimStatus, TypedLocalObjectReference,
    TypedObjectReference,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use snapshot_api::{
    GroupSnapshotHandles, VolumeGroupSnapshotContentSource, VolumeGroupSnapshotContentSpec,
    VolumeGroupSnapshotContentStatus, VolumeSnapshotInfo,
};

use super::*;
use crate::translate::selection::tests::group;

fn content(policy: DeletionPolicy, uid: Option<&str>) -> VolumeGroupSnapshotContent {
    VolumeGroupSnapshotContent {
        metadata: ObjectMeta { name: Some("groupsnapcontent-group-uid".into()), ..Default::default() },
        spec: VolumeGroupSnapshotContentSpec {
            volume_group_snapshot_ref: ObjectReference {
                name: Some("group".into()),
                namespace: Some("ns".into()),
                uid: uid.map(Into::into),
                ..Default::default()
            },
            deletion_policy: policy,
            driver: "d".into(),
            volume_group_snapshot_class_name: None,
            source: VolumeGroupSnapshotContentSource {
                volume_handles: Some(vec!["v1".into()]),
                group_snapshot_handles: None,
            },
        },
        status: None,
    }
}

fn member(name: &str) -> VolumeSnapshot {
    VolumeSnapshot {
        metadata: ObjectMeta { name: Some(name.into()), namespace: Some("ns".into()), ..Default::default() },
        spec: Default::default(),
        status: None,
    }
}

/// A claim of `namespace` restoring from `snapshot` (through dataSource, or dataSourceRef when `by_ref`).
fn restore(name: &str, namespace: &str, snapshot: &str, phase: &str, by_ref: bool) -> PersistentVolumeClaim {
    let source = TypedLocalObjectReference {
        api_group: Some("snapshot.storage.k8s.io".into()),
        kind: "VolumeSnapshot".into(),
        name: snapshot.into(),
    };
    let reference = TypedObjectReference {
        api_group: source.api_group.clone(),
        kind: source.kind.clone(),
        name: source.name.clone(),
        namespace: None,
    };
    PersistentVolumeClaim {
        metadata: ObjectMeta { name: Some(name.into()), namespace: Some(namespace.into()), ..Default::default() },
        spec: Some(PersistentVolumeClaimSpec {
            data_source: (!by_ref).then_some(source),
            data_source_ref: by_ref.then_some(reference),
            ..Default::default()
        }),
        status: Some(PersistentVolumeClaimStatus { phase: Some(phase.into()), ..Default::default() }),
    }
}

#[test]
fn group_deletion_by_policy() {
    let group = group(None);
    let delete = content(DeletionPolicy::Delete, Some("group-uid"));
    let retain = content(DeletionPolicy::Retain, Some("group-uid"));
    let someone_elses = content(DeletionPolicy::Delete, Some("other-uid"));
    let members = [member("snapshot-a"), member("snapshot-b")];
    let names = vec!["snapshot-a".to_string(), "snapshot-b".to_string()];
    // (content, expected)
    let table = [
        (
            Some(&delete),
            GroupDeletion {
                mark_content_being_deleted: true,
                delete_content: true,
                delete_members: names.clone(),
                remove_finalizer: false,
            },
        ),
        (
            Some(&retain),
            GroupDeletion {
                mark_content_being_deleted: true,
                delete_content: false,
                delete_members: names.clone(),
                remove_finalizer: true,
            },
        ),
        // A content that is not the group's is left alone.
        (
            Some(&someone_elses),
            GroupDeletion { delete_members: names.clone(), remove_finalizer: true, ..Default::default() },
        ),
        (None, GroupDeletion { delete_members: names.clone(), remove_finalizer: true, ..Default::default() }),
    ];
    for (content, want) in table {
        assert_eq!(group_deletion(&group, content, &members, &[]), Ok(want), "{content:?}");
    }
}

#[test]
fn steps_done_already_are_not_repeated() {
    let mut marked = content(DeletionPolicy::Delete, Some("group-uid"));
    let annotation = (ANN_VOLUME_GROUP_SNAPSHOT_BEING_DELETED.to_string(), "yes".to_string());
    marked.metadata.annotations = Some(BTreeMap::from([annotation]));
    let marked_and_going =
        deleting(content(DeletionPolicy::Delete, Some("group-uid")), &[ANN_VOLUME_GROUP_SNAPSHOT_BEING_DELETED]);
    let mut member_going = member("snapshot-b");
    member_going.metadata.deletion_timestamp = Some(Time(Timestamp::from_second(100).unwrap()));
    let every_step = || GroupDeletion {
        mark_content_being_deleted: true,
        delete_content: true,
        delete_members: vec!["snapshot-a".into(), "snapshot-b".into()],
        remove_finalizer: false,
    };
    let fresh = content(DeletionPolicy::Delete, Some("group-uid"));
    let members = [member("snapshot-a"), member("snapshot-b")];
    // (rule, content now, members now, steps left)
    let table = [
        ("nothing done yet", Some(&fresh), &members[..], every_step()),
        (
            "the content is marked",
            Some(&marked),
            &members[..],
            GroupDeletion { mark_content_being_deleted: false, ..every_step() },
        ),
        (
            "the content is marked and going",
            Some(&marked_and_going),
            &members[..],
            GroupDeletion { mark_content_being_deleted: false, delete_content: false, ..every_step() },
        ),
        (
            "a member is going",
            Some(&fresh),
            &[member("snapshot-a"), member_going][..],
            GroupDeletion { delete_members: vec!["snapshot-a".into()], ..every_step() },
        ),
        ("no content now", None, &members[..], every_step()),
    ];
    for (rule, content, members, want) in table {
        assert_eq!(every_step().left_to_do(content, members), want, "{rule}");
    }
    let retain = GroupDeletion { remove_finalizer: true, ..GroupDeletion::default() };
    assert_eq!(retain.clone().left_to_do(Some(&marked_and_going), &[]), retain, "the finalizer's fate stays");
}

#[test]
fn a_member_being_restored_holds_the_group_back() {
    let group = group(None);
    let delete = content(DeletionPolicy::Delete, Some("group-uid"));
    let members = [member("snapshot-a"), member("snapshot-b")];
    // (claims, held back by)
    let table = [
        (
            vec![restore("r", "ns", "snapshot-b", "Pending", false)],
            Some("snapshot snapshot-b is the data source of the pending PVC r"),
        ),
        (
            vec![restore("r", "ns", "snapshot-a", "Pending", true)],
            Some("snapshot snapshot-a is the data source of the pending PVC r"),
        ),
        (vec![restore("r", "ns", "snapshot-a", "Bound", false)], None),
        (vec![restore("r", "other", "snapshot-a", "Pending", false)], None),
        (vec![restore("r", "ns", "unrelated", "Pending", false)], None),
    ];
    for (claims, held) in table {
        let got = group_deletion(&group, Some(&delete), &members, &claims);
        match held {
            Some(text) => {
                let event = got.unwrap_err();
                assert_eq!(event.reason, EVENT_SNAPSHOT_DELETE_PENDING);
                assert!(event.message.contains(text), "{}", event.message);
            }
            None => assert!(got.is_ok(), "{claims:?}"),
        }
    }
}

fn deleting(mut content: VolumeGroupSnapshotContent, annotations: &[&str]) -> VolumeGroupSnapshotContent {
    content.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
    let mut map: BTreeMap<String, String> = annotations.iter().map(|a| (a.to_string(), "yes".to_string())).collect();
    map.insert(ANN_GROUP_DELETION_SECRET_NAME.into(), "creds".into());
    map.insert(ANN_GROUP_DELETION_SECRET_NAMESPACE.into(), "kube-system".into());
    content.metadata.annotations = Some(map);
    content
}

fn cut(mut content: VolumeGroupSnapshotContent, ids: &[&str]) -> VolumeGroupSnapshotContent {
    content.status = Some(VolumeGroupSnapshotContentStatus {
        volume_group_snapshot_handle: Some("gs".into()),
        ready_to_use: Some(true),
        volume_snapshot_info_list: Some(
            ids.iter()
                .map(|id| VolumeSnapshotInfo { snapshot_handle: Some(id.to_string()), ..Default::default() })
                .collect(),
        ),
        ..Default::default()
    });
    content
}

fn pre_provisioned(uid: Option<&str>) -> VolumeGroupSnapshotContent {
    let mut content = content(DeletionPolicy::Delete, uid);
    content.spec.source = VolumeGroupSnapshotContentSource {
        volume_handles: None,
        group_snapshot_handles: Some(GroupSnapshotHandles {
            volume_group_snapshot_handle: "gs-pre".into(),
            volume_snapshot_handles: vec!["s1".into(), "s2".into()],
        }),
    };
    content
}

fn delete(group_snapshot_id: &str, ids: &[&str]) -> ContentDeletion {
    ContentDeletion::DeleteGroupSnapshot(GroupSnapshotToDelete {
        group_snapshot_id: group_snapshot_id.into(),
        snapshot_ids: ids.iter().map(|i| i.to_string()).collect(),
        secret: Some(SecretReference { name: "creds".into(), namespace: "kube-system".into() }),
    })
}

#[test]
fn the_sidecar_deletes_when_released() {
    let bound = || content(DeletionPolicy::Delete, Some("group-uid"));
    let created = ANN_VOLUME_GROUP_SNAPSHOT_BEING_CREATED;
    let deleted = ANN_VOLUME_GROUP_SNAPSHOT_BEING_DELETED;
    // (content, decision)
    let table = [
        (cut(bound(), &["s1"]), Ok(ContentDeletion::NotDeleting)),
        (deleting(cut(bound(), &["s1"]), &[]), Ok(ContentDeletion::Wait)),
        // A creation under way is finished (for the group's id) before anything is deleted.
        (deleting(cut(bound(), &["s1"]), &[created, deleted]), Ok(ContentDeletion::FinishCreation)),
        (deleting(bound(), &[created]), Ok(ContentDeletion::FinishCreation)),
        (deleting(cut(bound(), &["s1", "s2"]), &[deleted]), Ok(delete("gs", &["s1", "s2"]))),
        (
            deleting(cut(content(DeletionPolicy::Retain, Some("group-uid")), &["s1"]), &[deleted]),
            Ok(ContentDeletion::RemoveFinalizer),
        ),
        // Never cut: nothing to delete on the storage.
        (deleting(bound(), &[deleted]), Ok(ContentDeletion::RemoveFinalizer)),
        // Unbound pre-provisioned contents go at once, by their spec handles.
        (deleting(pre_provisioned(None), &[]), Ok(delete("gs-pre", &["s1", "s2"]))),
        (deleting(pre_provisioned(Some("group-uid")), &[]), Ok(ContentDeletion::Wait)),
        // The status's handles win over the spec's.
        (deleting(cut(pre_provisioned(None), &["s9"]), &[]), Ok(delete("gs", &["s9"]))),
    ];
    for (i, (content, want)) in table.into_iter().enumerate() {
        assert_eq!(content_deletion(&content), want, "row {i}");
    }
}

#[test]
fn delete_needs_the_member_ids() {
    let content = deleting(
        cut(content(DeletionPolicy::Delete, Some("group-uid")), &[]),
        &[ANN_VOLUME_GROUP_SNAPSHOT_BEING_DELETED],
    );
    let event = content_deletion(&content).unwrap_err();
    assert_eq!(event.reason, EVENT_GROUP_SNAPSHOT_DELETE_ERROR);
    assert!(event.message.contains("the snapshot ids of its members are unknown"), "{}", event.message);
}

#[test]
fn the_request_and_the_cleared_status() {
    let ContentDeletion::DeleteGroupSnapshot(plan) = delete("gs", &["s1", "s2"]) else { unreachable!() };
    let secrets = HashMap::from([("key".to_string(), "hunter2".to_string())]);
    let request = plan.request(secrets.clone());
    assert_eq!(
        (request.group_snapshot_id.as_str(), request.snapshot_ids.clone(), request.secrets.clone()),
        ("gs", vec!["s1".to_string(), "s2".to_string()], secrets)
    );
    assert!(!format!("{request:?}").contains("hunter2"));

    let content = cut(content(DeletionPolicy::Delete, Some("group-uid")), &["s1"]);
    let status = status_after_delete(&content);
    assert_eq!((status.volume_group_snapshot_handle, status.ready_to_use, status.creation_time), (None, None, None));
    assert_eq!(status.volume_snapshot_info_list, content.status.unwrap().volume_snapshot_info_list);
}

#[test]
fn a_content_whose_group_is_gone_is_deleted_by_policy() {
    let unbound = content(DeletionPolicy::Delete, None);
    let already = deleting(content(DeletionPolicy::Delete, Some("group-uid")), &[]);
    // (rule, content, UID of the group now under the reference, delete)
    let table = [
        ("group gone, Delete", content(DeletionPolicy::Delete, Some("group-uid")), None, true),
        (
            "group recreated under the same name",
            content(DeletionPolicy::Delete, Some("group-uid")),
            Some("new-uid"),
            true,
        ),
        ("its group is there", content(DeletionPolicy::Delete, Some("group-uid")), Some("group-uid"), false),
        ("Retain keeps it", content(DeletionPolicy::Retain, Some("group-uid")), None, false),
        ("never bound: an administrator's, waiting", unbound, None, false),
        ("already being deleted", already, None, false),
    ];
    for (rule, content, now, want) in table {
        assert_eq!(orphan_content_deletion(&content, now), want, "{rule}");
    }
}

#[test]
fn failed_deletions_name_what_was_refused() {
    // (event, want)
    let table = [
        (
            content_delete_failed("forbidden"),
            PlannedEvent::warning(
                "GroupSnapshotContentObjectDeleteError",
                "Failed to delete group snapshot content API object: forbidden",
            ),
        ),
        (
            member_delete_failed("snapshot-h", "forbidden"),
            PlannedEvent::warning("SnapshotDeleteError", "Failed to delete snapshot snapshot-h: forbidden"),
        ),
        (
            group_snapshot_delete_failed("groupsnapcontent-u", "driver down"),
            PlannedEvent::warning(
                "GroupSnapshotDeleteError",
                "failed to delete group snapshot content groupsnapcontent-u: driver down",
            ),
        ),
    ];
    for (event, want) in table {
        assert_eq!(event, want);
    }
}
