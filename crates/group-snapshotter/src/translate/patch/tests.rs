use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;
use serde::de::DeserializeOwned;
use snapshot_api::{
    DeletionPolicy, SnapshotError, VolumeGroupSnapshotContentSource, VolumeGroupSnapshotContentSpec,
    VolumeSnapshotContentSource, VolumeSnapshotContentSpec, VolumeSnapshotInfo, VolumeSnapshotSource,
    VolumeSnapshotSpec,
};

use super::*;
use crate::translate::selection::tests::group;

/// What the API server stores after a JSON merge patch (RFC 7386): objects merged key by key, `null` removes a key,
/// anything else replaces. An annotation map left empty is dropped, as the API server's `omitempty` does.
fn stored<K: Serialize + DeserializeOwned>(object: &K, patch: &Value) -> K {
    fn merge(target: &mut Value, patch: &Value) {
        let Value::Object(patch) = patch else {
            *target = patch.clone();
            return;
        };
        if !target.is_object() {
            *target = Value::Object(Map::new());
        }
        let target = target.as_object_mut().unwrap();
        for (key, value) in patch {
            match value {
                Value::Null => {
                    target.remove(key);
                }
                value => merge(target.entry(key.clone()).or_insert(Value::Null), value),
            }
        }
    }
    let mut value = serde_json::to_value(object).unwrap();
    merge(&mut value, patch);
    let metadata = value.get_mut("metadata").and_then(Value::as_object_mut);
    if let Some(metadata) = metadata
        && metadata.get("annotations").and_then(Value::as_object).is_some_and(Map::is_empty)
    {
        metadata.remove("annotations");
    }
    serde_json::from_value(value).unwrap()
}

fn time(second: i64) -> Time {
    Time(Timestamp::from_second(second).unwrap())
}

fn group_content(
    annotations: &[(&str, &str)],
    status: Option<VolumeGroupSnapshotContentStatus>,
) -> VolumeGroupSnapshotContent {
    let annotations: BTreeMap<String, String> =
        annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    VolumeGroupSnapshotContent {
        metadata: ObjectMeta {
            name: Some("groupsnapcontent-u".into()),
            annotations: (!annotations.is_empty()).then_some(annotations),
            ..Default::default()
        },
        spec: VolumeGroupSnapshotContentSpec {
            volume_group_snapshot_ref: ObjectReference {
                name: Some("group".into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            deletion_policy: DeletionPolicy::Delete,
            driver: "d".into(),
            volume_group_snapshot_class_name: None,
            source: VolumeGroupSnapshotContentSource {
                volume_handles: Some(vec!["vol-a".into()]),
                ..Default::default()
            },
        },
        status,
    }
}

fn member_content(status: Option<VolumeSnapshotContentStatus>) -> VolumeSnapshotContent {
    VolumeSnapshotContent {
        metadata: ObjectMeta { name: Some("snapcontent-h".into()), ..Default::default() },
        spec: VolumeSnapshotContentSpec {
            volume_snapshot_ref: ObjectReference {
                kind: Some("VolumeSnapshot".into()),
                name: Some("snapshot-h".into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            deletion_policy: DeletionPolicy::Delete,
            driver: "d".into(),
            volume_snapshot_class_name: None,
            source: VolumeSnapshotContentSource { volume_handle: Some("vol-a".into()), snapshot_handle: None },
            source_volume_mode: None,
        },
        status,
    }
}

fn member_snapshot(status: Option<VolumeSnapshotStatus>) -> VolumeSnapshot {
    VolumeSnapshot {
        metadata: ObjectMeta { name: Some("snapshot-h".into()), namespace: Some("ns".into()), ..Default::default() },
        spec: VolumeSnapshotSpec {
            source: VolumeSnapshotSource { persistent_volume_claim_name: Some("a".into()), ..Default::default() },
            volume_snapshot_class_name: None,
        },
        status,
    }
}

#[test]
fn a_group_status_patch_writes_every_field_and_clears_unset_ones() {
    let error = SnapshotError { time: None, message: Some("PVC a is not bound".into()) };
    let refused = VolumeGroupSnapshotStatus { ready_to_use: Some(false), error: Some(error), ..Default::default() };
    let bound = VolumeGroupSnapshotStatus {
        bound_volume_group_snapshot_content_name: Some("groupsnapcontent-u".into()),
        ready_to_use: Some(true),
        ..Default::default()
    };
    let mut with_error = group(None);
    with_error.status = Some(refused.clone());
    // (rule, group before, status, patch)
    let table = [
        (
            "a refusal: not ready, the error",
            group(None),
            refused,
            json!({ "status": {
                "boundVolumeGroupSnapshotContentName": null, "creationTime": null, "readyToUse": false,
                "error": { "message": "PVC a is not bound" },
            }}),
        ),
        (
            "bound and ready: the earlier error cleared",
            with_error,
            bound,
            json!({ "status": {
                "boundVolumeGroupSnapshotContentName": "groupsnapcontent-u", "creationTime": null,
                "readyToUse": true, "error": null,
            }}),
        ),
    ];
    for (rule, before, status, want) in table {
        let patch = GroupStatusPatch { status: status.clone() };
        assert_eq!(patch.merge_patch(), want, "{rule}");
        let after = patch.apply(&before);
        assert_eq!(after, stored(&before, &want), "{rule}");
        assert_eq!(after.status, Some(status), "{rule}");
    }
}

#[test]
fn the_default_class_is_written_into_the_group() {
    let patch = GroupClassPatch { class_name: "gold".into() };
    let want = json!({ "spec": { "volumeGroupSnapshotClassName": "gold" } });
    assert_eq!(patch.merge_patch(), want);
    let after = patch.apply(&group(None));
    assert_eq!(after, stored(&group(None), &want));
    assert_eq!(after.spec.volume_group_snapshot_class_name.as_deref(), Some("gold"));
}

#[test]
fn content_annotations_are_set_to_yes_or_removed() {
    let being_created = "groupsnapshot.storage.kubernetes.io/volumegroupsnapshot-being-created";
    let being_deleted = "groupsnapshot.storage.kubernetes.io/volumegroupsnapshot-being-deleted";
    let other = ("other", "kept");
    // (rule, patch, content before, merge patch, annotations after)
    let table = [
        (
            "being-created set before the call",
            ContentAnnotationPatch::being_created(true),
            group_content(&[other], None),
            json!({ "metadata": { "annotations": { being_created: "yes" } } }),
            Some(vec![(being_created, "yes"), other]),
        ),
        (
            "being-created removed after the answer",
            ContentAnnotationPatch::being_created(false),
            group_content(&[(being_created, "yes"), other], None),
            json!({ "metadata": { "annotations": { being_created: null } } }),
            Some(vec![other]),
        ),
        (
            "the last annotation removed: no map left",
            ContentAnnotationPatch::being_created(false),
            group_content(&[(being_created, "yes")], None),
            json!({ "metadata": { "annotations": { being_created: null } } }),
            None,
        ),
        (
            "being-deleted tells csi-snapshotter to go",
            ContentAnnotationPatch::being_deleted(),
            group_content(&[], None),
            json!({ "metadata": { "annotations": { being_deleted: "yes" } } }),
            Some(vec![(being_deleted, "yes")]),
        ),
    ];
    for (rule, patch, before, want, annotations) in table {
        assert_eq!(patch.merge_patch(), want, "{rule}");
        let after = patch.apply(&before);
        assert_eq!(after, stored(&before, &want), "{rule}");
        let annotations =
            annotations.map(|a| a.into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>());
        assert_eq!(after.metadata.annotations, annotations, "{rule}");
    }
}

#[test]
fn a_content_status_patch_writes_every_field() {
    let info = VolumeSnapshotInfo {
        volume_handle: Some("vol-a".into()),
        snapshot_handle: Some("snap-a".into()),
        ..Default::default()
    };
    let cut = VolumeGroupSnapshotContentStatus {
        volume_group_snapshot_handle: Some("group-1".into()),
        ready_to_use: Some(true),
        volume_snapshot_info_list: Some(vec![info]),
        ..Default::default()
    };
    let failed = VolumeGroupSnapshotContentStatus {
        creation_time: Some(time(100)),
        error: Some(SnapshotError { time: None, message: Some("failed".into()) }),
        ..Default::default()
    };
    // (rule, content before, status, patch)
    let table = [
        (
            "a cut group: every field, the error cleared",
            group_content(&[], Some(failed)),
            cut,
            json!({ "status": {
                "volumeGroupSnapshotHandle": "group-1", "creationTime": null, "readyToUse": true, "error": null,
                "volumeSnapshotInfoList": [{ "volumeHandle": "vol-a", "snapshotHandle": "snap-a" }],
            }}),
        ),
        (
            "nothing known: all null",
            group_content(&[], None),
            VolumeGroupSnapshotContentStatus::default(),
            json!({ "status": {
                "volumeGroupSnapshotHandle": null, "creationTime": null, "readyToUse": null, "error": null,
                "volumeSnapshotInfoList": null,
            }}),
        ),
    ];
    for (rule, before, status, want) in table {
        let patch = ContentStatusPatch { status: status.clone() };
        assert_eq!(patch.merge_patch(), want, "{rule}");
        let after = patch.apply(&before);
        assert_eq!(after, stored(&before, &want), "{rule}");
        assert_eq!(after.status, Some(status), "{rule}");
    }
}

#[test]
fn the_bind_patch_writes_only_what_is_missing() {
    let mut named = group_content(&[], None);
    named.spec.volume_group_snapshot_class_name = Some("silver".into());
    // (patch, merge patch)
    let table = [
        (ContentBindPatch::default(), json!({ "spec": {} })),
        (
            ContentBindPatch { group_uid: Some("u".into()), class_name: None },
            json!({ "spec": { "volumeGroupSnapshotRef": { "uid": "u" } } }),
        ),
        (
            ContentBindPatch { group_uid: Some("u".into()), class_name: Some("gold".into()) },
            json!({ "spec": { "volumeGroupSnapshotRef": { "uid": "u" }, "volumeGroupSnapshotClassName": "gold" } }),
        ),
    ];
    for (patch, want) in table {
        assert_eq!(patch.merge_patch(), want, "{patch:?}");
        assert_eq!(patch.is_empty(), want["spec"].as_object().unwrap().is_empty());
        for before in [group_content(&[], None), named.clone()] {
            let after = patch.apply(&before);
            assert_eq!(after, stored(&before, &want), "{patch:?}");
            assert_eq!(
                after.spec.volume_group_snapshot_ref.name.as_deref(),
                Some("group"),
                "{patch:?}: the rest stays"
            );
        }
    }
}

#[test]
fn a_member_content_gains_its_snapshot_uid() {
    let patch = MemberContentRefPatch { snapshot_uid: Some("snap-uid".into()) };
    let want = json!({ "spec": { "volumeSnapshotRef": { "uid": "snap-uid" } } });
    assert_eq!(patch.merge_patch(), want);
    let before = member_content(None);
    let after = patch.apply(&before);
    assert_eq!(after, stored(&before, &want));
    let reference = &after.spec.volume_snapshot_ref;
    assert_eq!(
        (reference.uid.as_deref(), reference.name.as_deref(), reference.kind.as_deref()),
        (Some("snap-uid"), Some("snapshot-h"), Some("VolumeSnapshot"))
    );
}

#[test]
fn a_member_content_status_patch_writes_only_the_fields_it_has() {
    let known = VolumeSnapshotContentStatus {
        snapshot_handle: Some("snap-a".into()),
        creation_time: Some(5),
        restore_size: Some(1024),
        ready_to_use: Some(false),
        error: Some(SnapshotError { time: None, message: Some("not yet".into()) }),
        volume_group_snapshot_handle: Some("group-1".into()),
    };
    let ready = VolumeSnapshotContentStatus { ready_to_use: Some(true), ..Default::default() };
    // (rule, content before, status, patch, status after)
    let table = [
        (
            "the first status: every field it has",
            member_content(None),
            known.clone(),
            json!({ "status": {
                "snapshotHandle": "snap-a", "creationTime": 5, "restoreSize": 1024, "readyToUse": false,
                "error": { "message": "not yet" }, "volumeGroupSnapshotHandle": "group-1",
            }}),
            known.clone(),
        ),
        (
            "a later one: unset fields (the error among them) stay as they are",
            member_content(Some(known.clone())),
            ready,
            json!({ "status": { "readyToUse": true } }),
            VolumeSnapshotContentStatus { ready_to_use: Some(true), ..known },
        ),
    ];
    for (rule, before, status, want, status_after) in table {
        let patch = MemberContentStatusPatch { status };
        assert_eq!(patch.merge_patch(), want, "{rule}");
        let after = patch.apply(&before);
        assert_eq!(after, stored(&before, &want), "{rule}");
        assert_eq!(after.status, Some(status_after), "{rule}");
    }
}

#[test]
fn a_member_snapshot_is_bound_to_its_content_and_group() {
    let patch = MemberSnapshotStatusPatch {
        bound_content_name: Some("snapcontent-h".into()),
        group_name: Some("group".into()),
    };
    let want =
        json!({ "status": { "boundVolumeSnapshotContentName": "snapcontent-h", "volumeGroupSnapshotName": "group" } });
    assert_eq!(patch.merge_patch(), want);
    let ready = VolumeSnapshotStatus { ready_to_use: Some(true), ..Default::default() };
    for before in [member_snapshot(None), member_snapshot(Some(ready))] {
        let after = patch.apply(&before);
        assert_eq!(after, stored(&before, &want));
        let status = after.status.unwrap();
        assert_eq!(status.bound_volume_snapshot_content_name.as_deref(), Some("snapcontent-h"));
        assert_eq!(status.volume_group_snapshot_name.as_deref(), Some("group"));
    }
}
