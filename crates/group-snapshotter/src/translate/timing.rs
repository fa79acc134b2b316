//! Which of the snapshot-controller's group operations a sync starts or finishes on
//! `snapshot_controller_operation_total_seconds` (upstream: external-snapshotter, pkg/common-controller/
//! groupsnapshot_controller_helper.go, `syncUnreadyGroupSnapshot` and `updateGroupSnapshotStatus`):
//! `CreateGroupSnapshot` runs until the group has a creation time, `CreateGroupSnapshotAndReady` until it is ready,
//! `DeleteGroupSnapshot` from the first sync of a group being deleted until it is gone. Starting an operation that
//! runs already keeps its first start.

use sidecar_runtime::snapshot_operations::{
    CREATE_GROUP_SNAPSHOT, CREATE_GROUP_SNAPSHOT_AND_READY, DELETE_GROUP_SNAPSHOT, DYNAMIC, PRE_PROVISIONED,
};
use snapshot_api::{VolumeGroupSnapshot, VolumeGroupSnapshotStatus};

/// The `snapshot_type` label: `pre-provisioned` for a group naming its content, else `dynamic`.
pub fn group_snapshot_type(group: &VolumeGroupSnapshot) -> &'static str {
    if group.spec.source.volume_group_snapshot_content_name.is_some() { PRE_PROVISIONED } else { DYNAMIC }
}

/// The operations a sync of `group` starts: its deletion, or the creation steps it has not reached.
pub fn operations_to_start(group: &VolumeGroupSnapshot) -> Vec<&'static str> {
    if group.metadata.deletion_timestamp.is_some() {
        return vec![DELETE_GROUP_SNAPSHOT];
    }
    let status = group.status.as_ref();
    let mut started = Vec::new();
    if status.and_then(|s| s.creation_time.as_ref()).is_none() {
        started.push(CREATE_GROUP_SNAPSHOT);
    }
    if status.and_then(|s| s.ready_to_use) != Some(true) {
        started.push(CREATE_GROUP_SNAPSHOT_AND_READY);
    }
    started
}

/// The creation operations a status as written has finished.
pub fn operations_done(status: &VolumeGroupSnapshotStatus) -> Vec<&'static str> {
    let mut done = Vec::new();
    if status.creation_time.is_some() {
        done.push(CREATE_GROUP_SNAPSHOT);
    }
    if status.ready_to_use == Some(true) {
        done.push(CREATE_GROUP_SNAPSHOT_AND_READY);
    }
    done
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;
    use crate::translate::selection::tests::group;

    fn status(created: bool, ready: Option<bool>) -> VolumeGroupSnapshotStatus {
        VolumeGroupSnapshotStatus {
            creation_time: created.then_some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)),
            ready_to_use: ready,
            ..Default::default()
        }
    }

    #[test]
    fn syncs_start_the_steps_not_reached_and_statuses_finish_them() {
        /// (rule, status, deleting, started, done)
        type Row =
            (&'static str, Option<VolumeGroupSnapshotStatus>, bool, &'static [&'static str], &'static [&'static str]);
        let table: [Row; 5] = [
            ("new group: both creations", None, false, &[CREATE_GROUP_SNAPSHOT, CREATE_GROUP_SNAPSHOT_AND_READY], &[]),
            (
                "cut, not ready: readiness only",
                Some(status(true, Some(false))),
                false,
                &[CREATE_GROUP_SNAPSHOT_AND_READY],
                &[CREATE_GROUP_SNAPSHOT],
            ),
            (
                "ready: nothing to start",
                Some(status(true, Some(true))),
                false,
                &[],
                &[CREATE_GROUP_SNAPSHOT, CREATE_GROUP_SNAPSHOT_AND_READY],
            ),
            (
                "bound, driver silent",
                Some(status(false, Some(false))),
                false,
                &[CREATE_GROUP_SNAPSHOT, CREATE_GROUP_SNAPSHOT_AND_READY],
                &[],
            ),
            ("being deleted: deletion only", Some(status(false, None)), true, &[DELETE_GROUP_SNAPSHOT], &[]),
        ];
        for (rule, status, deleting, started, done) in table {
            let mut group = group(None);
            group.status = status.clone();
            if deleting {
                group.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
            }
            assert_eq!(operations_to_start(&group), started, "{rule}");
            assert_eq!(operations_done(&status.unwrap_or_default()), done, "{rule}");
        }
    }

    #[test]
    fn the_type_follows_the_source() {
        let mut pre = group(None);
        pre.spec.source.volume_group_snapshot_content_name = Some("imported".into());
        // (group, type)
        for (group, want) in [(group(None), DYNAMIC), (pre, PRE_PROVISIONED)] {
            assert_eq!(group_snapshot_type(&group), want);
        }
    }
}
