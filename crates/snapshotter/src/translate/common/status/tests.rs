use snapshot_api::{SnapshotError, VolumeSnapshotContentStatus};

use super::*;
use crate::translate::common::fixtures::*;

const NANOS: i64 = 1_700_000_000_123_456_789;

fn content(status: Option<VolumeSnapshotContentStatus>) -> VolumeSnapshotContent {
    let mut content = content_for("snapcontent-uid-1", "ns", "snap", "uid-1", ContentSourceKind::Volume);
    content.status = status;
    content
}

fn cut(ready: bool, size: Option<i64>, error: Option<SnapshotError>) -> Option<VolumeSnapshotContentStatus> {
    Some(VolumeSnapshotContentStatus {
        snapshot_handle: Some("h".into()),
        creation_time: Some(NANOS),
        restore_size: size,
        ready_to_use: Some(ready),
        error,
        volume_group_snapshot_handle: None,
    })
}

fn snapshot(status: Option<VolumeSnapshotStatus>) -> VolumeSnapshot {
    let mut vs = snapshot_of_claim("ns", "snap", "uid-1", "data");
    vs.status = status;
    vs
}

fn error(message: &str, second: Option<i64>) -> SnapshotError {
    SnapshotError { time: second.map(time), message: Some(message.into()) }
}

#[test]
fn first_status_of_a_new_content() {
    let update = snapshot_status(&snapshot(None), &content(None), None);
    let status = update.write.unwrap().status;
    assert_eq!(status.bound_volume_snapshot_content_name.as_deref(), Some("snapcontent-uid-1"), "bound name");
    assert_eq!(status.ready_to_use, Some(false), "not ready");
    assert_eq!(status.creation_time, None);
    assert!(update.events.is_empty());
}

#[test]
fn status_carried_from_the_content() {
    let bound = |ready: bool, size: Option<&str>, err: Option<SnapshotError>, created: bool| {
        snapshot(Some(VolumeSnapshotStatus {
            bound_volume_snapshot_content_name: Some("snapcontent-uid-1".into()),
            creation_time: created.then(|| unix_nanos(NANOS)),
            ready_to_use: Some(ready),
            restore_size: size.map(|s| Quantity(s.into())),
            error: err,
            volume_group_snapshot_name: None,
        }))
    };
    // (rule, snapshot, content status, (ready, size, error message) written or None, event reasons)
    type Want = Option<(bool, Option<&'static str>, Option<&'static str>)>;
    type Row = (&'static str, VolumeSnapshot, Option<VolumeSnapshotContentStatus>, Want, Vec<&'static str>);
    let table: Vec<Row> = vec![
        (
            "cut and ready at once",
            bound(false, None, None, false),
            cut(true, Some(1 << 30), None),
            Some((true, Some("1Gi"), None)),
            vec!["SnapshotCreated", "SnapshotReady"],
        ),
        (
            "cut, not ready yet",
            bound(false, None, None, false),
            cut(false, Some(0), None),
            Some((false, Some("0"), None)),
            vec!["SnapshotCreated"],
        ),
        (
            "becomes ready: events once, error cleared",
            bound(false, Some("0"), Some(error("old", Some(1))), true),
            cut(true, Some(5 << 20), None),
            Some((true, Some("5Mi"), None)),
            vec!["SnapshotReady"],
        ),
        ("nothing new: no write", bound(true, Some("1Gi"), None, true), cut(true, Some(1 << 30), None), None, vec![]),
        (
            "a known size is not changed",
            bound(true, Some("1Gi"), None, true),
            cut(true, Some(2 << 30), None),
            None,
            vec![],
        ),
        (
            "error copied",
            bound(false, None, None, true),
            cut(false, None, Some(error("driver says no", Some(2)))),
            Some((false, None, Some("driver says no"))),
            vec![],
        ),
        (
            "error cleared when the content has none",
            bound(false, None, Some(error("old", Some(1))), true),
            cut(false, None, None),
            Some((false, None, None)),
            vec![],
        ),
        (
            "an error without time is kept",
            bound(false, None, Some(error("mine", None)), true),
            cut(false, None, Some(error("theirs", Some(2)))),
            None,
            vec![],
        ),
        (
            "1000 bytes print as 1k",
            bound(false, None, None, true),
            cut(false, Some(1000), None),
            Some((false, Some("1k"), None)),
            vec![],
        ),
    ];
    for (rule, vs, status, want, reasons) in table {
        let update = snapshot_status(&vs, &content(status), None);
        let got = update.write.as_ref().map(|w| {
            (
                w.status.ready_to_use.unwrap(),
                w.status.restore_size.as_ref().map(|q| q.0.as_str()),
                w.status.error.as_ref().and_then(|e| e.message.as_deref()),
            )
        });
        assert_eq!(got, want, "{rule}");
        let got_reasons: Vec<&str> = update.events.iter().map(|e| e.reason).collect();
        assert_eq!(got_reasons, reasons, "{rule}: events");
        if let Some(write) = update.write {
            assert_eq!(write.status.creation_time, Some(unix_nanos(NANOS)), "{rule}: creation time");
        }
    }
}

#[test]
fn event_texts_and_group_name() {
    let update = snapshot_status(&snapshot(None), &content(cut(true, None, None)), Some("group"));
    assert_eq!(
        update.events,
        vec![
            PlannedEvent::normal("SnapshotCreated", "Snapshot ns/snap was successfully created by the CSI driver."),
            PlannedEvent::normal("SnapshotReady", "Snapshot ns/snap is ready to use."),
        ]
    );
    assert_eq!(update.write.unwrap().status.volume_group_snapshot_name.as_deref(), Some("group"), "group name");
}

#[test]
fn creation_time_from_nanoseconds() {
    assert_eq!(unix_nanos(NANOS).0.to_string(), "2023-11-14T22:13:20.123456789Z");
    assert_eq!(unix_nanos(0).0, Timestamp::UNIX_EPOCH);
}

#[test]
fn when_the_content_sync_enqueues_the_snapshot() {
    let with = |status: VolumeSnapshotStatus| snapshot(Some(status));
    let bound = VolumeSnapshotStatus {
        bound_volume_snapshot_content_name: Some("c".into()),
        creation_time: Some(unix_nanos(NANOS)),
        ready_to_use: Some(true),
        restore_size: Some(Quantity("1Gi".into())),
        ..Default::default()
    };
    // (rule, snapshot, content status, enqueue)
    let table = [
        ("content without status", snapshot(None), None, false),
        ("snapshot without status", snapshot(None), cut(false, None, None), true),
        ("in sync", with(bound.clone()), cut(true, Some(1 << 30), None), false),
        (
            "not bound yet",
            with(VolumeSnapshotStatus { bound_volume_snapshot_content_name: None, ..bound.clone() }),
            cut(true, Some(1 << 30), None),
            true,
        ),
        ("readiness differs", with(bound.clone()), cut(false, Some(1 << 30), None), true),
        (
            "size was 0",
            with(VolumeSnapshotStatus { restore_size: Some(Quantity("0".into())), ..bound.clone() }),
            cut(true, Some(10), None),
            true,
        ),
        (
            "creation time missing",
            with(VolumeSnapshotStatus { creation_time: None, ..bound.clone() }),
            cut(true, Some(1 << 30), None),
            true,
        ),
    ];
    let unready = VolumeSnapshotStatus {
        bound_volume_snapshot_content_name: Some("c".into()),
        ready_to_use: Some(false),
        ..Default::default()
    };
    let failing = |message: &str| {
        Some(VolumeSnapshotContentStatus {
            ready_to_use: Some(false),
            error: Some(error(message, Some(1))),
            ..Default::default()
        })
    };
    let failed_already = VolumeSnapshotStatus { error: Some(error("no secret", None)), ..unready.clone() };
    let errors = [
        ("an error the snapshot does not show", with(unready.clone()), failing("no secret"), true),
        ("the error the snapshot shows", with(failed_already.clone()), failing("no secret"), false),
        ("another error", with(failed_already), failing("timed out"), true),
        ("no error on either", with(unready), Some(VolumeSnapshotContentStatus::default()), false),
    ];
    for (rule, vs, status, want) in table.into_iter().chain(errors) {
        assert_eq!(snapshot_needs_status(&vs, &content(status)), want, "{rule}");
    }
}

#[test]
fn restore_sizes_print_as_kubernetes_prints_them() {
    // (bytes, text): binary-SI, below 1024 decimal-SI (`Quantity(bytes, BinarySI)` in upstream's updateSnapshotStatus)
    let table = [(0, "0"), (500, "500"), (1000, "1k"), (1023, "1023"), (1536, "1536"), (3072, "3Ki"), (1 << 30, "1Gi")];
    for (bytes, want) in table {
        assert_eq!(binary_si_quantity(bytes).0, want, "{bytes}");
    }
    assert!(is_zero(&Quantity("0Gi".into())) && !is_zero(&Quantity("1k".into())));
}
