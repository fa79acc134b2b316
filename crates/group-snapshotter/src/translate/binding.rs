//! Pre-provisioned group snapshots (upstream: external-snapshotter, pkg/common-controller/
//! groupsnapshot_controller_helper.go, `checkAndBindGroupSnapshotContent`): a VolumeGroupSnapshot naming
//! `source.volumeGroupSnapshotContentName` binds to a VolumeGroupSnapshotContent an administrator made from a group
//! snapshot that exists on the storage already (`source.groupSnapshotHandles`).
//!
//! The content must exist, be pre-provisioned, and point back at the group by namespace and name (its UID empty, or
//! the group's). Binding then writes the group's UID, and its class when the content names none, into the content.
//! csi-snapshotter asks the driver with GetVolumeGroupSnapshot; beyond upstream, the answer's snapshots fill the
//! content's `volumeSnapshotInfoList`, so the members are made as for a dynamic group (see [`super::members`]).

use sidecar_runtime::events::PlannedEvent;
use snapshot_api::{VolumeGroupSnapshot, VolumeGroupSnapshotContent};

use super::names::{EVENT_BIND_FAILED, EVENT_CONTENT_MISBOUND, EVENT_CONTENT_MISMATCH, EVENT_CONTENT_MISSING};
use super::patch::ContentBindPatch;

/// Whether a pre-provisioned group snapshot may bind to `content` (the object named by its
/// `source.volumeGroupSnapshotContentName`, `None` when it does not exist), and what binding writes. A refusal is
/// the Warning to record on the group; the group is synced again later.
pub fn bind_pre_provisioned(
    group: &VolumeGroupSnapshot,
    content_name: &str,
    content: Option<&VolumeGroupSnapshotContent>,
) -> Result<ContentBindPatch, PlannedEvent> {
    let Some(content) = content else {
        let message = format!("VolumeGroupSnapshotContent {content_name} requested but not found");
        return Err(PlannedEvent::warning(EVENT_CONTENT_MISSING, message));
    };
    if content.spec.source.group_snapshot_handles.is_none() {
        let message = format!(
            "VolumeGroupSnapshotContent {content_name} is dynamically provisioned while expecting a pre-provisioned one"
        );
        return Err(PlannedEvent::warning(EVENT_CONTENT_MISMATCH, message));
    }
    let reference = &content.spec.volume_group_snapshot_ref;
    let same_object = reference.name == group.metadata.name && reference.namespace == group.metadata.namespace;
    let same_uid = reference.uid.is_none() || reference.uid == group.metadata.uid;
    if !same_object || !same_uid {
        let message = format!("VolumeGroupSnapshotContent {content_name} is bound to a different group snapshot");
        return Err(PlannedEvent::warning(EVENT_CONTENT_MISBOUND, message));
    }
    let class_name =
        match (&content.spec.volume_group_snapshot_class_name, &group.spec.volume_group_snapshot_class_name) {
            (None, Some(class)) => Some(class.clone()),
            _ => None,
        };
    Ok(ContentBindPatch {
        group_uid: reference.uid.is_none().then(|| group.metadata.uid.clone()).flatten(),
        class_name,
    })
}

/// The content could not be bound: the API server refused the write of [`bind_pre_provisioned`]'s patch.
pub fn bind_failed(content_name: &str, error: &str) -> PlannedEvent {
    let message = format!("Failed to bind VolumeGroupSnapshotContent {content_name}: {error}");
    PlannedEvent::warning(EVENT_BIND_FAILED, message)
}

/// Whether the content a group snapshot found (bound, named or created) points back at it by name and UID; a
/// content bound to another group snapshot is refused (upstream: external-snapshotter, pkg/common-controller/
/// groupsnapshot_controller_helper.go, `syncUnreadyGroupSnapshot`).
pub fn check_bound(group: &VolumeGroupSnapshot, content: &VolumeGroupSnapshotContent) -> Result<(), PlannedEvent> {
    let reference = &content.spec.volume_group_snapshot_ref;
    if reference.uid != group.metadata.uid || reference.name != group.metadata.name {
        let name = content.metadata.name.as_deref().unwrap_or_default();
        let message = format!("VolumeGroupSnapshotContent {name} is bound to a different group snapshot");
        return Err(PlannedEvent::warning(EVENT_CONTENT_MISBOUND, message));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ObjectReference;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use snapshot_api::{
        DeletionPolicy, GroupSnapshotHandles, VolumeGroupSnapshotContentSource, VolumeGroupSnapshotContentSpec,
    };

    use super::*;
    use crate::translate::selection::tests::group;

    fn pre_group(class: Option<&str>) -> VolumeGroupSnapshot {
        let mut group = group(None);
        group.spec.source.volume_group_snapshot_content_name = Some("imported".into());
        group.spec.volume_group_snapshot_class_name = class.map(str::to_string);
        group
    }

    /// A content named `imported` pointing at `ns/<name>` with `uid`, pre-provisioned or not, with a class or not.
    fn content(
        name: &str,
        uid: Option<&str>,
        pre_provisioned: bool,
        class: Option<&str>,
    ) -> VolumeGroupSnapshotContent {
        let handles = GroupSnapshotHandles {
            volume_group_snapshot_handle: "g1".into(),
            volume_snapshot_handles: vec!["s1".into(), "s2".into()],
        };
        VolumeGroupSnapshotContent {
            metadata: ObjectMeta { name: Some("imported".into()), ..Default::default() },
            spec: VolumeGroupSnapshotContentSpec {
                volume_group_snapshot_ref: ObjectReference {
                    name: Some(name.into()),
                    namespace: Some("ns".into()),
                    uid: uid.map(str::to_string),
                    ..Default::default()
                },
                deletion_policy: DeletionPolicy::Delete,
                driver: "d".into(),
                volume_group_snapshot_class_name: class.map(str::to_string),
                source: VolumeGroupSnapshotContentSource {
                    volume_handles: (!pre_provisioned).then(|| vec!["v1".into()]),
                    group_snapshot_handles: pre_provisioned.then_some(handles),
                },
            },
            status: None,
        }
    }

    #[test]
    fn a_pre_provisioned_group_binds_only_to_its_own_pre_provisioned_content() {
        let patch = |uid: Option<&str>, class: Option<&str>| ContentBindPatch {
            group_uid: uid.map(str::to_string),
            class_name: class.map(str::to_string),
        };
        /// (rule, group's class, content, want: the patch or the Warning's reason)
        type Row = (
            &'static str,
            Option<&'static str>,
            Option<VolumeGroupSnapshotContent>,
            Result<ContentBindPatch, &'static str>,
        );
        let table: [Row; 7] = [
            ("no content: missing", None, None, Err("GroupSnapshotContentMissing")),
            (
                "a dynamic content cannot be bound by name",
                None,
                Some(content("group", None, false, None)),
                Err("GroupSnapshotContentMismatch"),
            ),
            (
                "a content pointing at another group",
                None,
                Some(content("other", None, true, None)),
                Err("GroupSnapshotContentMisbound"),
            ),
            (
                "a content bound to another UID of the same name",
                None,
                Some(content("group", Some("old-uid"), true, None)),
                Err("GroupSnapshotContentMisbound"),
            ),
            (
                "unbound: the UID is written",
                None,
                Some(content("group", None, true, None)),
                Ok(patch(Some("group-uid"), None)),
            ),
            (
                "the group's class goes into a content without one",
                Some("gold"),
                Some(content("group", None, true, None)),
                Ok(patch(Some("group-uid"), Some("gold"))),
            ),
            (
                "already bound, class kept: nothing to write",
                Some("gold"),
                Some(content("group", Some("group-uid"), true, Some("silver"))),
                Ok(patch(None, None)),
            ),
        ];
        for (rule, class, content, want) in table {
            let got = bind_pre_provisioned(&pre_group(class), "imported", content.as_ref());
            assert_eq!(got.map_err(|e| e.reason), want, "{rule}");
        }
    }

    #[test]
    fn a_group_goes_on_only_with_a_content_pointing_back_at_it() {
        // (rule, content, refused)
        let table = [
            ("bound by name and UID", content("group", Some("group-uid"), true, None), false),
            ("dynamic, bound by name and UID", content("group", Some("group-uid"), false, None), false),
            ("another group of another name", content("other", Some("group-uid"), true, None), true),
            ("a group of the same name before this one", content("group", Some("old-uid"), true, None), true),
            ("no UID yet", content("group", None, true, None), true),
        ];
        for (rule, content, refused) in table {
            let got = check_bound(&group(None), &content);
            match refused {
                false => assert_eq!(got, Ok(()), "{rule}"),
                true => assert_eq!(
                    got,
                    Err(PlannedEvent::warning(
                        EVENT_CONTENT_MISBOUND,
                        "VolumeGroupSnapshotContent imported is bound to a different group snapshot"
                    )),
                    "{rule}"
                ),
            }
        }
    }

    #[test]
    fn a_refused_bind_names_the_content_and_the_error() {
        assert_eq!(
            bind_failed("imported", "conflict"),
            PlannedEvent::warning(
                "GroupSnapshotBindFailed",
                "Failed to bind VolumeGroupSnapshotContent imported: conflict"
            )
        );
    }
}
