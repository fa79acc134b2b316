//! What the snapshot-controller writes to bring an existing member pair (a VolumeSnapshotContent and a VolumeSnapshot
//! of the group, found in the caches or just created) to what the group content's entry for it says. Each write is
//! sent only when something is missing or changed, so that a group synced again writes nothing.

use snapshot_api::{VolumeSnapshot, VolumeSnapshotContent, VolumeSnapshotInfo};

use super::members::Member;
use super::patch::{MemberContentRefPatch, MemberContentStatusPatch, MemberSnapshotStatusPatch};
use super::status::member_status_update;

/// The writes for one member, in the order they are sent.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MemberWrites {
    /// The content's back-reference gains the snapshot's UID, once the snapshot exists.
    pub content_ref: Option<MemberContentRefPatch>,
    /// The content's status follows its entry ([`member_status_update`]).
    pub content_status: Option<MemberContentStatusPatch>,
    /// The snapshot is bound to its content and its group, while either name is missing.
    pub snapshot_status: Option<MemberSnapshotStatusPatch>,
}

/// The writes that bring `content` and `snapshot` (as they are now) to `wanted`, the member made from `info`, an
/// entry of the group content whose handle is `group_handle`.
pub fn member_writes(
    wanted: &Member,
    content: &VolumeSnapshotContent,
    snapshot: &VolumeSnapshot,
    info: &VolumeSnapshotInfo,
    group_handle: &str,
) -> MemberWrites {
    let content_ref = content
        .spec
        .volume_snapshot_ref
        .uid
        .is_none()
        .then(|| MemberContentRefPatch { snapshot_uid: snapshot.metadata.uid.clone() });
    let content_status = member_status_update(info, group_handle, content.status.as_ref())
        .map(|status| MemberContentStatusPatch { status });
    let current = snapshot.status.clone().unwrap_or_default();
    let bound = &wanted.snapshot_status;
    let snapshot_status = (current.bound_volume_snapshot_content_name.is_none()
        || current.volume_group_snapshot_name.is_none())
    .then(|| MemberSnapshotStatusPatch {
        bound_content_name: bound.bound_volume_snapshot_content_name.clone(),
        group_name: bound.volume_group_snapshot_name.clone(),
    });
    MemberWrites { content_ref, content_status, snapshot_status }
}

#[cfg(test)]
mod tests {
    use snapshot_api::{VolumeSnapshotContentStatus, VolumeSnapshotStatus};

    use super::*;
    use crate::translate::members::tests::group_content;
    use crate::translate::members::{member, member_content_status};
    use crate::translate::selection::tests::group;

    fn info(ready: bool) -> VolumeSnapshotInfo {
        VolumeSnapshotInfo {
            volume_handle: Some("handle-a".into()),
            snapshot_handle: Some("snap-a".into()),
            creation_time: Some(5),
            ready_to_use: Some(ready),
            restore_size: Some(1024),
        }
    }

    fn wanted(ready: bool) -> Member {
        member(&group(None), &group_content(Some("gs"), false), &info(ready), None).unwrap()
    }

    /// The member pair as a sync finds it: the content with or without the snapshot's UID and with `status`, the
    /// snapshot (UID `snap-uid`) with `status`.
    fn pair(
        ready: bool,
        uid_known: bool,
        content_status: Option<VolumeSnapshotContentStatus>,
        snapshot_status: Option<VolumeSnapshotStatus>,
    ) -> (VolumeSnapshotContent, VolumeSnapshot) {
        let wanted = wanted(ready);
        let mut content = wanted.content.clone();
        content.spec.volume_snapshot_ref.uid = uid_known.then(|| "snap-uid".into());
        content.status = content_status;
        let mut snapshot = wanted.snapshot.clone();
        snapshot.metadata.uid = Some("snap-uid".into());
        snapshot.status = snapshot_status;
        (content, snapshot)
    }

    #[test]
    fn each_write_is_sent_only_while_something_is_missing() {
        let bound = || Some(wanted(true).snapshot_status);
        let status_of = |ready| Some(member_content_status(&info(ready), "gs"));
        let ref_patch = || Some(MemberContentRefPatch { snapshot_uid: Some("snap-uid".into()) });
        let status_patch = |ready| status_of(ready).map(|status| MemberContentStatusPatch { status });
        let bind_patch = || {
            let member = wanted(true).snapshot_status;
            Some(MemberSnapshotStatusPatch {
                bound_content_name: member.bound_volume_snapshot_content_name,
                group_name: member.volume_group_snapshot_name,
            })
        };
        let group_only =
            VolumeSnapshotStatus { volume_group_snapshot_name: Some("group".into()), ..Default::default() };
        // (rule, entry ready, pair, writes)
        let table = [
            (
                "just created: every write",
                true,
                pair(true, false, None, None),
                MemberWrites {
                    content_ref: ref_patch(),
                    content_status: status_patch(true),
                    snapshot_status: bind_patch(),
                },
            ),
            ("synced before: nothing", true, pair(true, true, status_of(true), bound()), MemberWrites::default()),
            (
                "the entry became ready: the content's status only",
                true,
                pair(false, true, status_of(false), bound()),
                MemberWrites { content_status: status_patch(true), ..Default::default() },
            ),
            (
                "the content was seen ready already: never back to not ready",
                false,
                pair(true, true, status_of(true), bound()),
                MemberWrites::default(),
            ),
            (
                "a snapshot missing its content name: bound again",
                true,
                pair(true, true, status_of(true), Some(group_only)),
                MemberWrites { snapshot_status: bind_patch(), ..Default::default() },
            ),
        ];
        for (rule, ready, (content, snapshot), want) in table {
            let got = member_writes(&wanted(ready), &content, &snapshot, &info(ready), "gs");
            assert_eq!(got, want, "{rule}");
        }
    }
}
