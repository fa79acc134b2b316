//! The members of a dynamic group snapshot: for each snapshot the driver reported (one `volumeSnapshotInfoList`
//! entry of the group content), one VolumeSnapshotContent and one VolumeSnapshot, so that each can be restored like
//! any snapshot (upstream: external-snapshotter, pkg/common-controller/groupsnapshot_controller_helper.go,
//! `createSnapshotsForGroupSnapshotContent`).
//!
//! Names are derived, not random: `snapshot-` / `snapcontent-` followed by the 64 hex digits of
//! SHA-256(group UID ‖ volume handle). A controller restarted mid-way finds what it created, and tools (Kubernetes'
//! own e2e tests among them) compute the name of the snapshot of a given volume without listing anything.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use snapshot_api::{
    DeletionPolicy, VolumeGroupSnapshot, VolumeGroupSnapshotContent, VolumeSnapshot, VolumeSnapshotContent,
    VolumeSnapshotContentSource, VolumeSnapshotContentSpec, VolumeSnapshotContentStatus, VolumeSnapshotInfo,
    VolumeSnapshotSource, VolumeSnapshotSpec, VolumeSnapshotStatus,
};

use super::names::{
    ANN_DELETION_SECRET_NAME, ANN_DELETION_SECRET_NAMESPACE, ANN_GROUP_DELETION_SECRET_NAME,
    ANN_GROUP_DELETION_SECRET_NAMESPACE, ANN_VOLUME_GROUP_SNAPSHOT_HANDLE, FINALIZER_VOLUME_SNAPSHOT_AS_SOURCE,
    FINALIZER_VOLUME_SNAPSHOT_BOUND, FINALIZER_VOLUME_SNAPSHOT_CONTENT_BOUND, FINALIZER_VOLUME_SNAPSHOT_IN_GROUP,
    GROUP_SNAPSHOT_API_VERSION, KIND_VOLUME_GROUP_SNAPSHOT, KIND_VOLUME_SNAPSHOT, MEMBER_CONTENT_NAME_PREFIX,
    MEMBER_SNAPSHOT_NAME_PREFIX,
};
use super::secrets::secret_from_annotations;

/// Whether the snapshot-controller makes the group's members: only for a dynamic group. A pre-provisioned group
/// (`source.volumeGroupSnapshotContentName`) is bound and its status kept, and its members are the VolumeSnapshots
/// and VolumeSnapshotContents its administrator creates, owned by the group (upstream: external-snapshotter,
/// pkg/common-controller/groupsnapshot_controller_helper.go, `syncUnreadyGroupSnapshot`; Kubernetes' e2e
/// volumegroupsnapshottable suite counts the group's owned snapshots).
pub fn controller_makes_members(group: &VolumeGroupSnapshot) -> bool {
    group.spec.source.volume_group_snapshot_content_name.is_none()
}

/// Why members cannot be made from a content yet.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MemberError {
    #[error("group snapshot content {0} has no volumeGroupSnapshotHandle yet")]
    NoGroupHandle(String),
    #[error("group snapshot content {content} lists a snapshot without {field}")]
    IncompleteInfo { content: String, field: &'static str },
}

/// Hex SHA-256 of the group UID followed by the volume handle, all 64 digits (upstream since v8.3).
pub fn member_hash(group_uid: &str, volume_handle: &str) -> String {
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    context.update(group_uid.as_bytes());
    context.update(volume_handle.as_bytes());
    context.finish().as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// `snapshot-<hash>`, in the group's namespace.
pub fn member_snapshot_name(group_uid: &str, volume_handle: &str) -> String {
    format!("{MEMBER_SNAPSHOT_NAME_PREFIX}{}", member_hash(group_uid, volume_handle))
}

/// `snapcontent-<hash>`.
pub fn member_content_name(group_uid: &str, volume_handle: &str) -> String {
    format!("{MEMBER_CONTENT_NAME_PREFIX}{}", member_hash(group_uid, volume_handle))
}

/// The PersistentVolume of `driver` with this handle, if exactly one has it; several means the cluster is confused
/// and none is trusted.
pub fn volume_for_handle<'v>(
    volumes: impl IntoIterator<Item = &'v PersistentVolume>,
    driver: &str,
    volume_handle: &str,
) -> Option<&'v PersistentVolume> {
    let mut found = volumes.into_iter().filter(|pv| {
        pv.spec
            .as_ref()
            .and_then(|s| s.csi.as_ref())
            .is_some_and(|csi| csi.driver == driver && csi.volume_handle == volume_handle)
    });
    let first = found.next()?;
    found.next().is_none().then_some(first)
}

/// One member: its content and snapshot as they are created, then the status each is given right after (a status
/// sent with a create is dropped by the API server: both have a `status` subresource).
#[derive(Clone, Debug, PartialEq)]
pub struct Member {
    pub content: VolumeSnapshotContent,
    pub content_status: VolumeSnapshotContentStatus,
    pub snapshot: VolumeSnapshot,
    pub snapshot_status: VolumeSnapshotStatus,
}

/// A member VolumeSnapshot's finalizers at its creation: in-group, and those snapshot-controller's snapshot loop
/// adds on its first sync (as-source always, bound-protection with the Delete policy). Added later, that write raced
/// this controller's own status write on the new member (`make chaos` saw dozens of Conflicts per group phase, each
/// retried with backoff); the end state is the same.
fn member_snapshot_finalizers(policy: DeletionPolicy) -> Vec<String> {
    let mut finalizers = vec![FINALIZER_VOLUME_SNAPSHOT_IN_GROUP, FINALIZER_VOLUME_SNAPSHOT_AS_SOURCE];
    if policy == DeletionPolicy::Delete {
        finalizers.push(FINALIZER_VOLUME_SNAPSHOT_BOUND);
    }
    finalizers.into_iter().map(String::from).collect()
}

/// The member for one info entry. `volume` is the entry's PersistentVolume when known ([`volume_for_handle`]): it
/// gives the snapshot its source claim and the content its volume mode.
pub fn member(
    group: &VolumeGroupSnapshot,
    content: &VolumeGroupSnapshotContent,
    info: &VolumeSnapshotInfo,
    volume: Option<&PersistentVolume>,
) -> Result<Member, MemberError> {
    let content_name = content.metadata.name.clone().unwrap_or_default();
    let group_handle = content
        .status
        .as_ref()
        .and_then(|s| s.volume_group_snapshot_handle.clone())
        .ok_or_else(|| MemberError::NoGroupHandle(content_name.clone()))?;
    let volume_handle = info
        .volume_handle
        .clone()
        .ok_or(MemberError::IncompleteInfo { content: content_name.clone(), field: "volumeHandle" })?;
    if info.snapshot_handle.is_none() {
        return Err(MemberError::IncompleteInfo { content: content_name, field: "snapshotHandle" });
    }
    let group_uid = group.metadata.uid.as_deref().unwrap_or_default();
    let namespace = group.metadata.namespace.clone();
    let snapshot_name = member_snapshot_name(group_uid, &volume_handle);
    let member_content_name = member_content_name(group_uid, &volume_handle);

    let mut annotations = BTreeMap::from([(ANN_VOLUME_GROUP_SNAPSHOT_HANDLE.to_string(), group_handle.clone())]);
    // Members are deleted with the group's Secret (upstream #1297).
    let secret = secret_from_annotations(
        content.metadata.annotations.as_ref(),
        ANN_GROUP_DELETION_SECRET_NAME,
        ANN_GROUP_DELETION_SECRET_NAMESPACE,
    );
    if let Some(secret) = secret {
        annotations.insert(ANN_DELETION_SECRET_NAME.into(), secret.name);
        annotations.insert(ANN_DELETION_SECRET_NAMESPACE.into(), secret.namespace);
    }
    let member_content = VolumeSnapshotContent {
        metadata: ObjectMeta {
            name: Some(member_content_name.clone()),
            annotations: Some(annotations),
            // Protected from its creation, as a single dynamic content is (upstream adds the finalizer on the
            // content's first sync): that later write raced csi-snapshotter's status writes on the new member
            // (`make chaos` saw dozens of Conflicts per group phase, each retried with backoff).
            finalizers: Some(vec![FINALIZER_VOLUME_SNAPSHOT_CONTENT_BOUND.into()]),
            ..Default::default()
        },
        spec: VolumeSnapshotContentSpec {
            volume_snapshot_ref: member_snapshot_reference(group, &volume_handle, None),
            deletion_policy: content.spec.deletion_policy,
            driver: content.spec.driver.clone(),
            // Members need no class (upstream #1204): the group's class made them.
            volume_snapshot_class_name: None,
            source: VolumeSnapshotContentSource { volume_handle: Some(volume_handle), snapshot_handle: None },
            source_volume_mode: volume.and_then(|pv| pv.spec.as_ref()?.volume_mode.clone()),
        },
        status: None,
    };
    let claim_name = volume.and_then(|pv| pv.spec.as_ref()?.claim_ref.as_ref()?.name.clone()).unwrap_or_default();
    let snapshot = VolumeSnapshot {
        metadata: ObjectMeta {
            name: Some(snapshot_name),
            namespace,
            owner_references: Some(vec![OwnerReference {
                api_version: GROUP_SNAPSHOT_API_VERSION.into(),
                kind: KIND_VOLUME_GROUP_SNAPSHOT.into(),
                name: group.metadata.name.clone().unwrap_or_default(),
                uid: group_uid.into(),
                controller: None,
                block_owner_deletion: None,
            }]),
            finalizers: Some(member_snapshot_finalizers(content.spec.deletion_policy)),
            ..Default::default()
        },
        spec: VolumeSnapshotSpec {
            // Empty when the volume is unknown, as upstream writes it: the source says "a claim", and the member is
            // still restorable by its content.
            source: VolumeSnapshotSource {
                persistent_volume_claim_name: Some(claim_name),
                volume_snapshot_content_name: None,
            },
            volume_snapshot_class_name: None,
        },
        status: None,
    };
    Ok(Member {
        content_status: member_content_status(info, &group_handle),
        content: member_content,
        snapshot_status: VolumeSnapshotStatus {
            bound_volume_snapshot_content_name: Some(member_content_name),
            volume_group_snapshot_name: group.metadata.name.clone(),
            ..Default::default()
        },
        snapshot,
    })
}

/// Whether `snapshot` is a member of `group`: in its namespace, owned by it (an ownerReference with its UID).
pub fn is_member_of(snapshot: &VolumeSnapshot, group: &VolumeGroupSnapshot) -> bool {
    let uid = group.metadata.uid.as_deref().unwrap_or_default();
    let owned = snapshot.metadata.owner_references.iter().flatten().any(|o| o.uid == uid);
    snapshot.metadata.namespace == group.metadata.namespace && owned
}

/// The member content's back-reference: kind, name and namespace at creation; the UID once the snapshot exists.
pub fn member_snapshot_reference(
    group: &VolumeGroupSnapshot,
    volume_handle: &str,
    snapshot_uid: Option<String>,
) -> ObjectReference {
    ObjectReference {
        kind: Some(KIND_VOLUME_SNAPSHOT.into()),
        name: Some(member_snapshot_name(group.metadata.uid.as_deref().unwrap_or_default(), volume_handle)),
        namespace: group.metadata.namespace.clone(),
        uid: snapshot_uid,
        ..Default::default()
    }
}

/// The member content's status from its info entry. Written once the content exists, and again whenever the entry
/// changes (beyond upstream, the entries are refreshed until every member is ready: see [`super::status`]).
pub fn member_content_status(info: &VolumeSnapshotInfo, group_handle: &str) -> VolumeSnapshotContentStatus {
    VolumeSnapshotContentStatus {
        snapshot_handle: info.snapshot_handle.clone(),
        creation_time: info.creation_time,
        restore_size: info.restore_size,
        ready_to_use: info.ready_to_use,
        error: None,
        volume_group_snapshot_handle: Some(group_handle.into()),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use snapshot_api::{
        DeletionPolicy, VolumeGroupSnapshotContentSource, VolumeGroupSnapshotContentSpec,
        VolumeGroupSnapshotContentStatus,
    };

    use super::*;
    use crate::translate::selection::tests::{group, volume};

    #[test]
    fn only_a_dynamic_group_gets_members_from_the_controller() {
        let dynamic = group(None);
        let mut pre_provisioned = group(None);
        pre_provisioned.spec.source.selector = None;
        pre_provisioned.spec.source.volume_group_snapshot_content_name = Some("imported".into());
        let table = [("dynamic", &dynamic, true), ("pre-provisioned", &pre_provisioned, false)];
        for (case, group, makes) in table {
            assert_eq!(controller_makes_members(group), makes, "{case}");
        }
    }

    #[test]
    fn names_are_upstreams_hash() {
        // Known answers: the 64 hex digits of SHA-256 over the UID immediately followed by the handle.
        let table = [
            (
                "3f1c2a9e-7b7d-4d8e-9f30-0c1b2a3d4e5f",
                "vol-0001",
                "2b74f5eda1f9f273fb066752a6a937eb4d951bad2d39187589dea8cec8b04f4d",
            ),
            ("", "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
            // No separator: ("a", "b") and ("ab", "") hash alike, as upstream's do.
            ("a", "b", "fb8e20fc2e4c3f248c60c39bd652f3c1347298bb977b8b4d5903b85055620603"),
            ("ab", "", "fb8e20fc2e4c3f248c60c39bd652f3c1347298bb977b8b4d5903b85055620603"),
        ];
        for (uid, handle, hash) in table {
            assert_eq!(member_hash(uid, handle), hash);
            assert_eq!(member_snapshot_name(uid, handle), format!("snapshot-{hash}"));
            assert_eq!(member_content_name(uid, handle), format!("snapcontent-{hash}"));
        }
        assert_eq!(member_snapshot_name("u", "h").len(), 73);
        assert_eq!(member_content_name("u", "h").len(), 76);
    }

    #[test]
    fn a_handle_names_one_volume_or_none() {
        let a = volume("a", "d");
        let mut twin = volume("twin", "d");
        twin.spec.as_mut().unwrap().csi.as_mut().unwrap().volume_handle = "handle-a".into();
        let other_driver = volume("a", "e");
        assert_eq!(volume_for_handle([&a, &other_driver], "d", "handle-a"), Some(&a));
        assert_eq!(volume_for_handle([&a, &twin], "d", "handle-a"), None);
        assert_eq!(volume_for_handle([&other_driver], "d", "handle-a"), None);
    }

    /// A dynamic group content (policy Retain) with the group handle `handle`, and the deletion Secret or not.
    pub(crate) fn group_content(handle: Option<&str>, secret: bool) -> VolumeGroupSnapshotContent {
        let annotations = secret.then(|| {
            BTreeMap::from([
                (ANN_GROUP_DELETION_SECRET_NAME.to_string(), "creds".to_string()),
                (ANN_GROUP_DELETION_SECRET_NAMESPACE.to_string(), "kube-system".to_string()),
            ])
        });
        VolumeGroupSnapshotContent {
            metadata: ObjectMeta { name: Some("groupsnapcontent-group-uid".into()), annotations, ..Default::default() },
            spec: VolumeGroupSnapshotContentSpec {
                volume_group_snapshot_ref: ObjectReference::default(),
                deletion_policy: DeletionPolicy::Retain,
                driver: "d".into(),
                volume_group_snapshot_class_name: Some("gold".into()),
                source: VolumeGroupSnapshotContentSource {
                    volume_handles: Some(vec!["handle-a".into()]),
                    group_snapshot_handles: None,
                },
            },
            status: Some(VolumeGroupSnapshotContentStatus {
                volume_group_snapshot_handle: handle.map(Into::into),
                ..Default::default()
            }),
        }
    }

    fn info(volume_handle: Option<&str>, snapshot_handle: Option<&str>) -> VolumeSnapshotInfo {
        VolumeSnapshotInfo {
            volume_handle: volume_handle.map(Into::into),
            snapshot_handle: snapshot_handle.map(Into::into),
            creation_time: Some(1_700_000_000_000_000_000),
            ready_to_use: Some(true),
            restore_size: Some(1 << 30),
        }
    }

    #[test]
    fn member_objects_point_at_the_group() {
        let mut pv = volume("a", "d");
        pv.spec.as_mut().unwrap().volume_mode = Some("Block".into());
        let member =
            member(&group(None), &group_content(Some("gs-1"), true), &info(Some("handle-a"), Some("s-a")), Some(&pv))
                .unwrap();
        let hash = member_hash("group-uid", "handle-a");

        let content = &member.content;
        assert_eq!(content.metadata.name, Some(format!("snapcontent-{hash}")));
        let annotations = content.metadata.annotations.clone().unwrap();
        assert_eq!(annotations[ANN_VOLUME_GROUP_SNAPSHOT_HANDLE], "gs-1");
        assert_eq!(annotations[ANN_DELETION_SECRET_NAME], "creds");
        assert_eq!(annotations[ANN_DELETION_SECRET_NAMESPACE], "kube-system");
        assert_eq!(
            content.spec.volume_snapshot_ref,
            ObjectReference {
                kind: Some("VolumeSnapshot".into()),
                name: Some(format!("snapshot-{hash}")),
                namespace: Some("ns".into()),
                ..Default::default()
            }
        );
        assert_eq!(content.spec.deletion_policy, DeletionPolicy::Retain);
        assert_eq!(content.spec.driver, "d");
        assert_eq!(content.spec.volume_snapshot_class_name, None);
        assert_eq!(content.spec.source.volume_handle.as_deref(), Some("handle-a"));
        assert_eq!(content.spec.source_volume_mode.as_deref(), Some("Block"));
        assert_eq!(content.metadata.finalizers, Some(vec![FINALIZER_VOLUME_SNAPSHOT_CONTENT_BOUND.to_string()]));
        assert_eq!(
            member.content_status,
            VolumeSnapshotContentStatus {
                snapshot_handle: Some("s-a".into()),
                creation_time: Some(1_700_000_000_000_000_000),
                restore_size: Some(1 << 30),
                ready_to_use: Some(true),
                error: None,
                volume_group_snapshot_handle: Some("gs-1".into()),
            }
        );

        let snapshot = &member.snapshot;
        assert_eq!(snapshot.metadata.name, Some(format!("snapshot-{hash}")));
        assert_eq!(snapshot.metadata.namespace.as_deref(), Some("ns"));
        let owner = &snapshot.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (
                owner.api_version.as_str(),
                owner.kind.as_str(),
                owner.name.as_str(),
                owner.uid.as_str(),
                owner.controller
            ),
            ("groupsnapshot.storage.k8s.io/v1", "VolumeGroupSnapshot", "group", "group-uid", None)
        );
        let finalizers = [FINALIZER_VOLUME_SNAPSHOT_IN_GROUP, FINALIZER_VOLUME_SNAPSHOT_AS_SOURCE].map(String::from);
        assert_eq!(snapshot.metadata.finalizers, Some(finalizers.to_vec()), "policy Retain: no bound-protection");
        assert_eq!(snapshot.spec.source.persistent_volume_claim_name.as_deref(), Some("a"));
        assert_eq!(snapshot.spec.volume_snapshot_class_name, None);
        assert_eq!(member.snapshot_status.bound_volume_snapshot_content_name, Some(format!("snapcontent-{hash}")));
        assert_eq!(member.snapshot_status.volume_group_snapshot_name.as_deref(), Some("group"));
    }

    #[test]
    fn a_delete_policy_member_is_bound_protected_from_its_creation() {
        let mut content = group_content(Some("gs-1"), false);
        content.spec.deletion_policy = DeletionPolicy::Delete;
        let member = member(&group(None), &content, &info(Some("handle-a"), Some("s-a")), None).unwrap();
        let want =
            [FINALIZER_VOLUME_SNAPSHOT_IN_GROUP, FINALIZER_VOLUME_SNAPSHOT_AS_SOURCE, FINALIZER_VOLUME_SNAPSHOT_BOUND];
        assert_eq!(member.snapshot.metadata.finalizers, Some(want.map(String::from).to_vec()));
        assert_eq!(member.content.spec.deletion_policy, DeletionPolicy::Delete);
    }

    #[test]
    fn an_unknown_volume_leaves_claim_and_mode_empty() {
        let member =
            member(&group(None), &group_content(Some("gs-1"), false), &info(Some("handle-x"), Some("s-x")), None)
                .unwrap();
        assert_eq!(member.snapshot.spec.source.persistent_volume_claim_name.as_deref(), Some(""));
        assert_eq!(member.content.spec.source_volume_mode, None);
        let annotations = member.content.metadata.annotations.unwrap();
        assert_eq!(annotations.keys().collect::<Vec<_>>(), [ANN_VOLUME_GROUP_SNAPSHOT_HANDLE]);
    }

    #[test]
    fn incomplete_answers_make_no_members() {
        let table = [
            (group_content(None, false), info(Some("h"), Some("s")), "has no volumeGroupSnapshotHandle yet"),
            (group_content(Some("gs"), false), info(None, Some("s")), "without volumeHandle"),
            (group_content(Some("gs"), false), info(Some("h"), None), "without snapshotHandle"),
        ];
        for (content, info, text) in table {
            let err = member(&group(None), &content, &info, None).unwrap_err();
            assert!(err.to_string().contains(text), "{err}");
        }
    }

    #[test]
    fn the_reference_gains_the_snapshot_uid() {
        let reference = member_snapshot_reference(&group(None), "handle-a", Some("snap-uid".into()));
        assert_eq!(reference.uid.as_deref(), Some("snap-uid"));
        assert_eq!(reference.name, Some(member_snapshot_name("group-uid", "handle-a")));
    }

    #[test]
    fn members_are_the_snapshots_the_group_owns_in_its_namespace() {
        let group = group(None);
        let content = group_content(Some("group-handle"), false);
        let mut member = member(&group, &content, &info(Some("handle-a"), Some("snap-a")), None).unwrap().snapshot;
        let mut elsewhere = member.clone();
        elsewhere.metadata.namespace = Some("other".into());
        let mut another_group = member.clone();
        another_group.metadata.owner_references.as_mut().unwrap()[0].uid = "other-uid".into();
        let mut unowned = member.clone();
        unowned.metadata.owner_references = None;
        // (rule, snapshot, member)
        let table = [
            ("made for the group", member.clone(), true),
            ("the same owner in another namespace", elsewhere, false),
            ("owned by another group", another_group, false),
            ("owned by nothing", unowned, false),
        ];
        for (rule, snapshot, want) in table {
            assert_eq!(is_member_of(&snapshot, &group), want, "{rule}");
        }
        member.metadata.owner_references.as_mut().unwrap().insert(0, OwnerReference::default());
        assert!(is_member_of(&member, &group), "any of its owners");
    }
}
