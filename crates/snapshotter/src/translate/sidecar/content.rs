//! What several rules of the sidecar read off a content: its queue key, its annotations, whether it belongs to a
//! group. It sits below the step modules ([`super::sync`], [`super::deletion`], [`super::creation`],
//! [`super::outcome`]) so that they share it without importing each other.

use snapshot_api::VolumeSnapshotContent;

/// The queue key of a content: its name (contents are cluster-scoped).
pub fn content_name(content: &VolumeSnapshotContent) -> String {
    content.metadata.name.clone().unwrap_or_default()
}

/// Whether the content carries the annotation `key`, whatever its value.
pub fn has_annotation(content: &VolumeSnapshotContent, key: &str) -> bool {
    content.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(key))
}

/// A snapshot cut as part of a group: its status names both its own handle and the group's.
pub fn is_group_member(content: &VolumeSnapshotContent) -> bool {
    content.status.as_ref().is_some_and(|s| s.snapshot_handle.is_some() && s.volume_group_snapshot_handle.is_some())
}

#[cfg(test)]
mod tests {
    use snapshot_api::VolumeSnapshotContentStatus;
    use snapshot_api::names::ANN_VOLUME_SNAPSHOT_BEING_CREATED;

    use super::*;
    use crate::translate::sidecar::fixtures::{annotate, content};

    fn with_handles(snapshot: bool, group: bool) -> VolumeSnapshotContent {
        let mut c = content();
        c.status = Some(VolumeSnapshotContentStatus {
            snapshot_handle: snapshot.then(|| "snap-1".into()),
            volume_group_snapshot_handle: group.then(|| "group-1".into()),
            ..Default::default()
        });
        c
    }

    #[test]
    fn what_the_rules_read_off_a_content() {
        assert_eq!(content_name(&content()), "snapcontent-1");
        // (rule, content, has the being-created annotation, group member)
        let table = [
            ("no annotation, no status", content(), false, false),
            ("annotated: any value counts", annotate(content(), ANN_VOLUME_SNAPSHOT_BEING_CREATED, ""), true, false),
            ("both handles: a group member", with_handles(true, true), false, true),
            ("the group's handle alone: not yet a member", with_handles(false, true), false, false),
            ("its own handle alone: not a member", with_handles(true, false), false, false),
        ];
        for (rule, content, annotated, member) in table {
            assert_eq!(has_annotation(&content, ANN_VOLUME_SNAPSHOT_BEING_CREATED), annotated, "{rule}");
            assert_eq!(is_group_member(&content), member, "{rule}");
        }
    }
}
