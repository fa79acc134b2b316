//! The driver's snapshot answers, arbitrary (no snapshot, empty or huge ids, any size and time, unknown groups):
//! none panics, an empty id is never recorded as a handle, and a status records no size the driver did not give.

use csi_client::proto::list_snapshots_response::Entry;
use csi_client::proto::{ListSnapshotsResponse, Snapshot};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use proptest::prelude::*;
use snapshot_api::VolumeSnapshotContentStatus;

use super::*;
use crate::translate::sidecar::fixtures::content;
use crate::translate::sidecar::outcome::{Phase, create_snapshot_answered, snapshot_described};

/// Ids as drivers give them: none, short, long, any string, and now and then 64 KiB.
fn id() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => Just(String::new()),
        4 => "[a-z0-9-]{1,16}",
        2 => any::<String>(),
        1 => "[a-z]{1,4}".prop_map(|s| s.repeat(65_536 / s.len())),
    ]
}

fn snapshot() -> impl Strategy<Value = Snapshot> {
    let time = prop::option::of(
        (any::<i64>(), any::<i32>()).prop_map(|(seconds, nanos)| prost_types::Timestamp { seconds, nanos }),
    );
    (id(), id(), id(), any::<i64>(), any::<bool>(), time).prop_map(
        |(snapshot_id, source_volume_id, group_snapshot_id, size_bytes, ready_to_use, creation_time)| Snapshot {
            size_bytes,
            snapshot_id,
            source_volume_id,
            creation_time,
            ready_to_use,
            group_snapshot_id,
            accessible_topology: Vec::new(),
        },
    )
}

fn response() -> impl Strategy<Value = ListSnapshotsResponse> {
    prop::collection::vec(prop::option::of(snapshot()), 0..4).prop_map(|entries| ListSnapshotsResponse {
        entries: entries.into_iter().map(|snapshot| Entry { snapshot }).collect(),
        next_token: String::new(),
    })
}

fn status() -> impl Strategy<Value = Option<VolumeSnapshotContentStatus>> {
    prop::option::of(
        (prop::option::of(id()), prop::option::of(any::<i64>()), prop::option::of(any::<bool>())).prop_map(
            |(snapshot_handle, restore_size, ready_to_use)| VolumeSnapshotContentStatus {
                snapshot_handle,
                restore_size,
                ready_to_use,
                ..Default::default()
            },
        ),
    )
}

fn at() -> Time {
    Time(Timestamp::new(1_700_000_000, 0).unwrap())
}

proptest! {
    /// ListSnapshots by id: the snapshot found is the one asked for, never one without an id.
    #[test]
    fn a_listed_snapshot_is_the_one_asked_for(response in response(), asked in id(), now in any::<i64>()) {
        match listed(&response, &asked, now) {
            Ok(info) => {
                prop_assert!(!asked.is_empty());
                prop_assert_eq!(&info.snapshot_id, &asked);
                prop_assert!(response.entries.iter().any(|e| e.snapshot.is_some()));
            }
            Err(error) => prop_assert!(error.starts_with("can not find snapshot")),
        }
    }

    /// The status after a listed answer keeps a handle it had, else records the id asked for; a size only when
    /// the driver gave one above 0; an empty group id is no group.
    #[test]
    fn a_described_status_records_no_empty_handle(
        response in response(),
        asked in id(),
        old in status(),
        now in any::<i64>(),
    ) {
        let mut content = content();
        content.status = old.clone();
        if let Ok(info) = listed(&response, &asked, now) {
            let described = snapshot_described(&content, &info);
            let new = described.status.map(|p| p.status).or(old.clone()).unwrap_or_default();
            let old = old.unwrap_or_default();
            prop_assert_eq!(new.snapshot_handle.as_deref(), Some(old.snapshot_handle.as_deref().unwrap_or(&asked)));
            if old.restore_size.is_none() {
                prop_assert!(new.restore_size.is_none_or(|size| size > 0 && size == info.restore_size));
            }
            if old.volume_group_snapshot_handle.is_none() {
                prop_assert_ne!(new.volume_group_snapshot_handle.as_deref(), Some(""));
            }
            prop_assert_eq!(new.ready_to_use, Some(info.ready_to_use));
            prop_assert_eq!(described.requeue, !info.ready_to_use);
        }
    }

    /// CreateSnapshot's answer without an id is a failed step; with one, the status records it (or keeps its own).
    #[test]
    fn a_created_snapshot_without_an_id_is_a_failure(snapshot in snapshot(), old in status(), now in any::<i64>()) {
        let mut content = content();
        content.status = old.clone();
        let info = SnapshotInfo::from_csi(&snapshot, now);
        match create_snapshot_answered(&content, Phase::Create, &info, at()) {
            Ok(described) => {
                prop_assert!(!snapshot.snapshot_id.is_empty());
                let new = described.status.map(|p| p.status).or(old.clone()).unwrap_or_default();
                let handle = old.and_then(|s| s.snapshot_handle).unwrap_or(snapshot.snapshot_id);
                prop_assert_eq!(new.snapshot_handle, Some(handle));
            }
            Err(failed) => {
                prop_assert!(snapshot.snapshot_id.is_empty());
                prop_assert!(failed.drop_being_created.is_none());
            }
        }
    }
}
