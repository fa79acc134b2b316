use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use snapshot_api::{
    DeletionPolicy, VolumeGroupSnapshotClassFields, VolumeGroupSnapshotContentSource, VolumeGroupSnapshotContentSpec,
};
use tonic::{Code, Status};

use super::*;
use snapshot_api::names::PARAM_GROUP_SNAPSHOTTER_SECRET_NAME;

const UID: &str = "3f1c2a9e-7b7d-4d8e-9f30-0c1b2a3d4e5f";

fn content(handles: &[&str]) -> VolumeGroupSnapshotContent {
    VolumeGroupSnapshotContent {
        metadata: ObjectMeta { name: Some(format!("groupsnapcontent-{UID}")), ..Default::default() },
        spec: VolumeGroupSnapshotContentSpec {
            volume_group_snapshot_ref: ObjectReference {
                name: Some("group".into()),
                namespace: Some("ns".into()),
                uid: Some(UID.into()),
                ..Default::default()
            },
            deletion_policy: DeletionPolicy::Delete,
            driver: "d".into(),
            volume_group_snapshot_class_name: Some("gold".into()),
            source: VolumeGroupSnapshotContentSource {
                volume_handles: Some(handles.iter().map(|h| h.to_string()).collect()),
                group_snapshot_handles: None,
            },
        },
        status: None,
    }
}

fn class(parameters: &[(&str, &str)]) -> VolumeGroupSnapshotClass {
    VolumeGroupSnapshotClass {
        metadata: ObjectMeta { name: Some("gold".into()), ..Default::default() },
        spec: VolumeGroupSnapshotClassFields {
            driver: "d".into(),
            parameters: Some(parameters.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            deletion_policy: DeletionPolicy::Delete,
        },
    }
}

#[test]
fn names_follow_the_prefix_and_uuid_length_flags() {
    // (prefix, uid, length, name or error)
    let table = [
        ("groupsnapshot", UID, -1, Ok(format!("groupsnapshot-{UID}"))),
        ("gs", UID, 8, Ok("gs-3f1c2a9e".to_string())),
        ("gs", UID, 32, Ok("gs-3f1c2a9e7b7d4d8e9f300c1b2a3d4e5f".to_string())),
        ("gs", UID, 0, Ok("gs-".to_string())),
        ("gs", UID, 33, Err(RequestError::UuidLength { length: 33, uid: UID.into() })),
        ("gs", UID, -2, Err(RequestError::UuidLength { length: -2, uid: UID.into() })),
        ("", UID, -1, Err(RequestError::EmptyPrefix)),
        ("gs", "", -1, Err(RequestError::MissingGroupUid)),
    ];
    for (prefix, uid, length, want) in table {
        assert_eq!(group_snapshot_name(prefix, uid, length), want, "{prefix:?} {length}");
    }
}

#[test]
fn reserved_parameters_never_reach_the_driver() {
    let mut parameters: Vec<(&str, &str)> = RESERVED_PARAMETERS.iter().map(|k| (*k, "x")).collect();
    parameters.push(("consistency", "crash"));
    let got = group_snapshot_parameters(class(&parameters).spec.parameters.as_ref(), &content(&["v1"]), false);
    assert_eq!(got, Ok(HashMap::from([("consistency".to_string(), "crash".to_string())])));

    let unknown = class(&[("csi.storage.k8s.io/fstype", "ext4")]);
    let err = group_snapshot_parameters(unknown.spec.parameters.as_ref(), &content(&["v1"]), false).unwrap_err();
    assert_eq!(
        err.to_string(),
        "failed to strip CSI Parameters of prefixed keys: found unknown parameter key \"csi.storage.k8s.io/fstype\" with reserved namespace csi.storage.k8s.io/"
    );
    assert_eq!(group_snapshot_parameters(None, &content(&["v1"]), false), Ok(HashMap::new()));
}

#[test]
fn extra_create_metadata_names_the_group() {
    let got = group_snapshot_parameters(class(&[("a", "b")]).spec.parameters.as_ref(), &content(&["v1"]), true);
    let want: HashMap<String, String> = [
        ("a", "b".to_string()),
        ("csi.storage.k8s.io/volumegroupsnapshot/name", "group".to_string()),
        ("csi.storage.k8s.io/volumegroupsnapshot/namespace", "ns".to_string()),
        ("csi.storage.k8s.io/volumegroupsnapshotcontent/name", format!("groupsnapcontent-{UID}")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(got, Ok(want));
}

#[test]
fn the_request_snapshots_every_handle_in_order() {
    let secrets = HashMap::from([("password".to_string(), "hunter2".to_string())]);
    let options = RequestOptions { name_prefix: "gs".into(), name_uuid_length: -1, extra_create_metadata: false };
    let request = create_group_snapshot_request(
        &content(&["v2", "v1"]),
        Some(&class(&[("consistency", "crash"), (PARAM_GROUP_SNAPSHOTTER_SECRET_NAME, "creds")])),
        secrets.clone(),
        &options,
    )
    .unwrap();
    assert_eq!(request.name, format!("gs-{UID}"));
    assert_eq!(request.source_volume_ids, ["v2", "v1"]);
    assert_eq!(request.parameters, HashMap::from([("consistency".to_string(), "crash".to_string())]));
    assert_eq!(request.secrets, secrets);
    assert!(!format!("{request:?}").contains("hunter2"), "secrets are stripped from Debug");
}

#[test]
fn requests_that_cannot_be_made() {
    let options = RequestOptions::default();
    let gold = class(&[]);
    let mut no_uid = content(&["v1"]);
    no_uid.spec.volume_group_snapshot_ref.uid = None;
    // (content, class, error)
    let table = [
        (content(&["v1"]), None, RequestError::NoClass(format!("groupsnapcontent-{UID}"))),
        (content(&[]), Some(&gold), RequestError::NoVolumes(format!("groupsnapcontent-{UID}"))),
        (no_uid, Some(&gold), RequestError::MissingGroupUid),
    ];
    for (content, class, want) in table {
        assert_eq!(create_group_snapshot_request(&content, class, HashMap::new(), &options), Err(want));
    }
}

#[test]
fn only_definite_failures_release_the_being_created_annotation() {
    let status = |code| CallError::Status {
        method: "/csi.v1.GroupController/CreateVolumeGroupSnapshot",
        status: Status::new(code, "boom"),
    };
    // (error, release)
    let table = [
        (status(Code::InvalidArgument), true),
        (status(Code::NotFound), true),
        (status(Code::Internal), true),
        (status(Code::AlreadyExists), true),
        (status(Code::DeadlineExceeded), false),
        (status(Code::Unavailable), false),
        (status(Code::Aborted), false),
        (status(Code::Cancelled), false),
        (status(Code::ResourceExhausted), false),
        (
            CallError::Timeout {
                method: "/csi.v1.GroupController/CreateVolumeGroupSnapshot",
                timeout: Duration::from_secs(60),
            },
            false,
        ),
    ];
    for (error, release) in table {
        let failure = creation_failure("c", &error);
        assert_eq!(failure.release_being_created, release, "{error}");
        assert_eq!(failure.event.reason, "GroupSnapshotCreationFailed");
        assert!(
            failure.event.message.starts_with("failed to create group snapshot for content c: "),
            "{}",
            failure.event.message
        );
    }
    let refused = request_refused("c", &RequestError::MissingGroupUid);
    assert!(refused.release_being_created);
}

#[test]
fn an_unreadable_secret_refuses_the_call_and_keeps_its_text() {
    let refused = creation_refused("error getting secret creds in namespace ns: forbidden".into());
    assert_eq!(
        refused,
        CreationFailure {
            release_being_created: true,
            event: PlannedEvent::warning(
                "GroupSnapshotCreationFailed",
                "error getting secret creds in namespace ns: forbidden"
            ),
        }
    );
}

#[test]
fn answers_without_ids_are_not_recorded() {
    use csi_client::proto::{Snapshot, VolumeGroupSnapshot};
    let member = |snapshot: &str, volume: &str| Snapshot {
        snapshot_id: snapshot.into(),
        source_volume_id: volume.into(),
        ..Default::default()
    };
    let group = |id: &str, members: Vec<Snapshot>| VolumeGroupSnapshot {
        group_snapshot_id: id.into(),
        snapshots: members,
        ..Default::default()
    };
    // (answer, defect)
    let table: [(VolumeGroupSnapshot, Option<&str>); 6] = [
        (group("g", vec![member("s1", "v1"), member("s2", "v2")]), None),
        (group("g", vec![]), None),
        (VolumeGroupSnapshot::default(), Some("the driver returned an empty group snapshot id")),
        (group("", vec![member("s1", "v1")]), Some("the driver returned an empty group snapshot id")),
        (
            group("g", vec![member("s1", "v1"), member("", "v2")]),
            Some("the driver returned an empty snapshot id for the member of volume v2"),
        ),
        (
            group("g", vec![member("s1", "")]),
            Some("the driver returned member snapshot \"s1\" without its source volume id"),
        ),
    ];
    for (answer, want) in table {
        assert_eq!(answer_defect(&answer).as_deref(), want, "{answer:?}");
    }
    let failure = wrong_answer("content-1", "the driver returned an empty group snapshot id");
    assert!(!failure.release_being_created, "the group may be cut: it stays being created");
    assert_eq!(
        failure.event.message,
        "failed to create group snapshot for content content-1: the driver returned an empty group snapshot id"
    );
}
