use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use snapshot_api::{
    DeletionPolicy, GroupSnapshotHandles, SnapshotError, VolumeGroupSnapshotContentSource,
    VolumeGroupSnapshotContentSpec,
};

use super::*;
use crate::translate::selection::tests::group;

fn at(seconds: i64) -> prost_types::Timestamp {
    prost_types::Timestamp { seconds, nanos: 5 }
}

fn csi_snapshot(volume: &str, ready: bool, size: i64, created: Option<i64>) -> proto::Snapshot {
    proto::Snapshot {
        size_bytes: size,
        snapshot_id: format!("snap-{volume}"),
        source_volume_id: volume.into(),
        creation_time: created.map(at),
        ready_to_use: ready,
        group_snapshot_id: "gs".into(),
        accessible_topology: Vec::new(),
    }
}

fn answer(ready: bool, created: Option<i64>, snapshots: Vec<proto::Snapshot>) -> proto::VolumeGroupSnapshot {
    proto::VolumeGroupSnapshot {
        group_snapshot_id: "gs".into(),
        snapshots,
        creation_time: created.map(at),
        ready_to_use: ready,
    }
}

fn entry(volume: &str, ready: bool, size: Option<i64>, created: Option<i64>) -> VolumeSnapshotInfo {
    VolumeSnapshotInfo {
        volume_handle: Some(volume.into()),
        snapshot_handle: Some(format!("snap-{volume}")),
        creation_time: created,
        ready_to_use: Some(ready),
        restore_size: size,
    }
}

fn time(seconds: i64, nanos: i32) -> Time {
    Time(Timestamp::new(seconds, nanos).unwrap())
}

#[test]
fn csi_times_become_nanoseconds() {
    assert_eq!(unix_nanos(Some(&at(2))), Some(2_000_000_005));
    assert_eq!(unix_nanos(Some(&prost_types::Timestamp { seconds: 0, nanos: 0 })), None);
    assert_eq!(unix_nanos(None), None);
    assert_eq!(unix_nanos(Some(&prost_types::Timestamp { seconds: i64::MAX, nanos: 0 })), None);
}

#[test]
fn the_first_answer_fills_the_status() {
    let now = Timestamp::new(100, 0).unwrap();
    let got = content_status_after_create(
        None,
        &answer(false, Some(50), vec![csi_snapshot("v2", true, 10, Some(40)), csi_snapshot("v1", false, 0, None)]),
        now,
    );
    assert_eq!(
        got,
        VolumeGroupSnapshotContentStatus {
            volume_group_snapshot_handle: Some("gs".into()),
            creation_time: Some(time(50, 5)),
            ready_to_use: Some(false),
            error: None,
            // The driver's order; size 0 and an unset time are unknowns, not values.
            volume_snapshot_info_list: Some(vec![
                entry("v2", true, Some(10), Some(40_000_000_005)),
                entry("v1", false, None, None),
            ]),
        }
    );
    // No time from the driver: now.
    let got = content_status_after_create(None, &answer(true, None, vec![]), now);
    assert_eq!(got.creation_time, Some(Time(now)));
    assert_eq!(got.volume_snapshot_info_list, None);
}

#[test]
fn later_answers_refresh_the_entries() {
    let old = VolumeGroupSnapshotContentStatus {
        volume_group_snapshot_handle: Some("gs".into()),
        creation_time: Some(time(50, 5)),
        ready_to_use: Some(false),
        error: Some(SnapshotError { time: None, message: Some("slow".into()) }),
        volume_snapshot_info_list: Some(vec![
            entry("v2", true, Some(10), Some(40_000_000_005)),
            entry("v1", false, None, None),
        ]),
    };
    let now = Timestamp::new(100, 0).unwrap();
    // Not ready yet: v1 has a size now, v2's answer forgot its time; the error stays.
    let got = content_status_after_create(
        Some(&old),
        &answer(false, None, vec![csi_snapshot("v1", false, 20, None), csi_snapshot("v2", true, 10, None)]),
        now,
    );
    assert_eq!(got.creation_time, Some(time(50, 5)), "a known time is kept");
    assert_eq!(got.error, old.error);
    assert_eq!(
        got.volume_snapshot_info_list,
        Some(vec![entry("v2", true, Some(10), Some(40_000_000_005)), entry("v1", false, Some(20), None)])
    );
    // Ready: v1 is ready, a new v3 is appended, the error goes.
    let got = content_status_after_create(
        Some(&got),
        &answer(true, None, vec![csi_snapshot("v1", true, 20, Some(60)), csi_snapshot("v3", true, 5, None)]),
        now,
    );
    assert_eq!(got.error, None);
    assert_eq!(got.ready_to_use, Some(true));
    assert_eq!(
        got.volume_snapshot_info_list,
        Some(vec![
            entry("v2", true, Some(10), Some(40_000_000_005)),
            entry("v1", true, Some(20), Some(60_000_000_005)),
            entry("v3", true, Some(5), None),
        ])
    );
}

fn content(dynamic: bool, status: Option<VolumeGroupSnapshotContentStatus>) -> VolumeGroupSnapshotContent {
    let source = if dynamic {
        VolumeGroupSnapshotContentSource { volume_handles: Some(vec!["v1".into()]), group_snapshot_handles: None }
    } else {
        VolumeGroupSnapshotContentSource {
            volume_handles: None,
            group_snapshot_handles: Some(GroupSnapshotHandles {
                volume_group_snapshot_handle: "gs".into(),
                volume_snapshot_handles: vec!["s1".into()],
            }),
        }
    };
    VolumeGroupSnapshotContent {
        metadata: ObjectMeta { name: Some("groupsnapcontent-group-uid".into()), ..Default::default() },
        spec: VolumeGroupSnapshotContentSpec {
            volume_group_snapshot_ref: ObjectReference::default(),
            deletion_policy: DeletionPolicy::Delete,
            driver: "d".into(),
            volume_group_snapshot_class_name: None,
            source,
        },
        status,
    }
}

fn content_status(handle: bool, ready: bool, members: &[bool]) -> VolumeGroupSnapshotContentStatus {
    VolumeGroupSnapshotContentStatus {
        volume_group_snapshot_handle: handle.then(|| "gs".into()),
        ready_to_use: Some(ready),
        volume_snapshot_info_list: Some(
            members.iter().enumerate().map(|(i, r)| entry(&format!("v{i}"), *r, None, None)).collect(),
        ),
        ..Default::default()
    }
}

#[test]
fn the_driver_is_asked_until_every_member_is_ready() {
    // (dynamic, status, refresh)
    let table = [
        (true, None, false),
        (true, Some(content_status(false, false, &[])), false),
        (true, Some(content_status(true, false, &[true])), true),
        (true, Some(content_status(true, true, &[true, false])), true),
        (true, Some(content_status(true, true, &[true, true])), false),
        (true, Some(content_status(true, true, &[])), false),
        // Pre-provisioned: asked again until ready, its members ready and listed.
        (false, Some(content_status(true, false, &[false])), true),
        (false, Some(content_status(true, true, &[])), true),
        (false, Some(content_status(true, true, &[true])), false),
    ];
    for (i, (dynamic, status, want)) in table.into_iter().enumerate() {
        assert_eq!(needs_refresh(&content(dynamic, status)), want, "row {i}");
    }
}

#[test]
fn each_kind_of_content_has_its_call() {
    let neither = {
        let mut c = content(true, None);
        c.spec.source.volume_handles = Some(vec![]);
        c
    };
    // (rule, content, call)
    let table = [
        ("dynamic, not cut: create", content(true, None), DriverCall::Create),
        (
            "dynamic, a member not ready: create again",
            content(true, Some(content_status(true, true, &[false]))),
            DriverCall::Create,
        ),
        ("dynamic, all ready: nothing", content(true, Some(content_status(true, true, &[true]))), DriverCall::Nothing),
        ("pre-provisioned, never asked: get", content(false, None), DriverCall::Get),
        (
            "pre-provisioned, ready but unlisted: get",
            content(false, Some(content_status(true, true, &[]))),
            DriverCall::Get,
        ),
        (
            "pre-provisioned, group not ready: get",
            content(false, Some(content_status(true, false, &[true]))),
            DriverCall::Get,
        ),
        (
            "pre-provisioned, all ready and listed: nothing",
            content(false, Some(content_status(true, true, &[true]))),
            DriverCall::Nothing,
        ),
        ("no volumes and no handles: nothing", neither, DriverCall::Nothing),
    ];
    for (rule, content, want) in table {
        assert_eq!(driver_call(&content), want, "{rule}");
    }
}

#[test]
fn member_contents_follow_their_entries_but_never_unready() {
    let ready = member_content_status(&entry("v1", true, Some(10), Some(7)), "gs");
    let not_ready = member_content_status(&entry("v1", false, None, None), "gs");
    // (entry, current, update)
    let table = [
        (entry("v1", true, Some(10), Some(7)), None, Some(ready.clone())),
        (entry("v1", true, Some(10), Some(7)), Some(&not_ready), Some(ready.clone())),
        (entry("v1", true, Some(10), Some(7)), Some(&ready), None),
        // A stale entry does not undo what ListSnapshots found.
        (entry("v1", false, None, None), Some(&ready), None),
        (entry("v1", false, None, None), Some(&not_ready), None),
    ];
    for (i, (info, current, want)) in table.into_iter().enumerate() {
        assert_eq!(member_status_update(&info, "gs", current), want, "row {i}");
    }
}

#[test]
fn group_status_follows_its_content() {
    let mut group = group(None);
    let error = SnapshotError { time: None, message: Some("driver busy".into()) };
    let mut not_ready = content_status(true, false, &[]);
    not_ready.error = Some(error.clone());
    not_ready.creation_time = Some(time(50, 0));
    let (status, events) = group_status(&group, &content(true, Some(not_ready)));
    assert_eq!(
        status,
        VolumeGroupSnapshotStatus {
            bound_volume_group_snapshot_content_name: Some("groupsnapcontent-group-uid".into()),
            creation_time: Some(time(50, 0)),
            ready_to_use: Some(false),
            error: Some(error),
        }
    );
    assert_eq!(
        events,
        [PlannedEvent::normal(
            EVENT_GROUP_SNAPSHOT_CREATED,
            "GroupSnapshot ns/group was successfully created by the CSI driver."
        )]
    );

    group.status = Some(status);
    let mut ready = content_status(true, true, &[]);
    ready.creation_time = Some(time(50, 0));
    let (status, events) = group_status(&group, &content(true, Some(ready)));
    assert_eq!((status.ready_to_use, status.error.clone()), (Some(true), None));
    assert_eq!(events, [PlannedEvent::normal(EVENT_GROUP_SNAPSHOT_READY, "GroupSnapshot ns/group is ready to use.")]);

    // Nothing new, nothing said.
    group.status = Some(status.clone());
    let (again, events) = group_status(&group, &content(true, Some(content_status(true, true, &[]))));
    assert_eq!(again.creation_time, status.creation_time, "the known time stays");
    assert!(events.is_empty());

    // A content the driver has not answered for yet: bound, not ready.
    let (status, events) = group_status(&super::super::selection::tests::group(None), &content(true, None));
    assert_eq!(status.ready_to_use, Some(false));
    assert_eq!(status.bound_volume_group_snapshot_content_name.as_deref(), Some("groupsnapcontent-group-uid"));
    assert!(events.is_empty());
}

#[test]
fn a_new_content_binds_the_group_and_clears_its_refusal() {
    let mut refused = group(None);
    refused.status = Some(VolumeGroupSnapshotStatus {
        ready_to_use: Some(false),
        error: Some(SnapshotError { time: None, message: Some("PVC a is not bound".into()) }),
        ..Default::default()
    });
    for before in [group(None), refused] {
        assert_eq!(
            status_after_content_created(&before, "groupsnapcontent-group-uid"),
            VolumeGroupSnapshotStatus {
                bound_volume_group_snapshot_content_name: Some("groupsnapcontent-group-uid".into()),
                ready_to_use: Some(false),
                ..Default::default()
            }
        );
    }
}

#[test]
fn a_refusal_is_written_once() {
    let now = time(100, 0);
    let with_error = |message: &str, ready: Option<bool>| {
        let mut group = group(None);
        group.status = Some(VolumeGroupSnapshotStatus {
            bound_volume_group_snapshot_content_name: Some("c".into()),
            ready_to_use: ready,
            error: Some(SnapshotError { time: Some(time(1, 0)), message: Some(message.into()) }),
            ..Default::default()
        });
        group
    };
    let refused = |bound: Option<&str>| VolumeGroupSnapshotStatus {
        bound_volume_group_snapshot_content_name: bound.map(str::to_string),
        ready_to_use: Some(false),
        error: Some(SnapshotError { time: Some(now.clone()), message: Some("PVC a is not bound".into()) }),
        ..Default::default()
    };
    // (rule, group, status to write)
    let table = [
        ("no status yet: the error, not ready", group(None), Some(refused(None))),
        ("another error before: replaced, the rest kept", with_error("older", Some(true)), Some(refused(Some("c")))),
        ("the same error already: nothing to write", with_error("PVC a is not bound", Some(true)), None),
    ];
    for (rule, group, want) in table {
        assert_eq!(refused_status(&group, "PVC a is not bound", now.clone()), want, "{rule}");
    }
}

#[test]
fn a_failed_call_is_recorded_in_the_content_status() {
    let now = time(100, 0);
    let mut status = content_status(true, true, &[true]);
    status.error = Some(SnapshotError { time: None, message: Some("older".into()) });
    for before in [content(true, None), content(true, Some(status))] {
        let status = content_status_with_error(&before, "driver down", now.clone());
        let want_error = SnapshotError { time: Some(now.clone()), message: Some("driver down".into()) };
        assert_eq!(status.error, Some(want_error));
        let kept = VolumeGroupSnapshotContentStatus { error: None, ..before.status.clone().unwrap_or_default() };
        assert_eq!(VolumeGroupSnapshotContentStatus { error: None, ..status }, kept);
    }
}
