//! Which group snapshot a watched change concerns: the keys (`namespace/name`) the snapshot-controller's group loop
//! queues. A watch handler only routes what these say; a change a rule here does not name wakes nothing.
//!
//! - A group content's news (its handle, its members, its being gone) is its group's to act on.
//! - A new class, or a claim bound later, lets the groups still waiting for their content go on at once.
//! - A member's change (made ready, deleted) goes to the group that owns it.

use std::sync::Arc;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use snapshot_api::names::KIND_VOLUME_GROUP_SNAPSHOT;
use snapshot_api::{VolumeGroupSnapshot, VolumeGroupSnapshotContent, VolumeSnapshot};

/// `namespace/name` of a group snapshot.
pub fn group_key(group: &VolumeGroupSnapshot) -> String {
    let namespace = group.metadata.namespace.as_deref().unwrap_or_default();
    format!("{namespace}/{}", group.metadata.name.as_deref().unwrap_or_default())
}

/// `namespace/name` of the group snapshot a group content points at.
pub fn referenced_group_key(content: &VolumeGroupSnapshotContent) -> String {
    let reference = &content.spec.volume_group_snapshot_ref;
    format!("{}/{}", reference.namespace.as_deref().unwrap_or_default(), reference.name.as_deref().unwrap_or_default())
}

/// A group snapshot not bound to a content yet: its selection or its class was refused, or it is new.
fn waits_for_content(group: &VolumeGroupSnapshot) -> bool {
    group.status.as_ref().and_then(|s| s.bound_volume_group_snapshot_content_name.as_ref()).is_none()
}

/// The groups a new class may let go on: every group without a content.
pub fn woken_by_class(groups: &[Arc<VolumeGroupSnapshot>]) -> Vec<String> {
    groups.iter().filter(|g| waits_for_content(g)).map(|g| group_key(g)).collect()
}

/// The groups a changed claim may let go on: those of its namespace without a content.
pub fn woken_by_claim(groups: &[Arc<VolumeGroupSnapshot>], claim: &PersistentVolumeClaim) -> Vec<String> {
    let namespace = &claim.metadata.namespace;
    let waiting = groups.iter().filter(|g| waits_for_content(g) && &g.metadata.namespace == namespace);
    waiting.map(|g| group_key(g)).collect()
}

/// The groups that own a member snapshot (by an ownerReference of kind VolumeGroupSnapshot, in its namespace).
pub fn owner_group_keys(snapshot: &VolumeSnapshot) -> Vec<String> {
    let namespace = snapshot.metadata.namespace.as_deref().unwrap_or_default();
    let owners = snapshot.metadata.owner_references.iter().flatten();
    owners.filter(|o| o.kind == KIND_VOLUME_GROUP_SNAPSHOT).map(|o| format!("{namespace}/{}", o.name)).collect()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ObjectReference;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
    use snapshot_api::{
        DeletionPolicy, VolumeGroupSnapshotContentSource, VolumeGroupSnapshotContentSpec, VolumeGroupSnapshotStatus,
    };

    use super::*;
    use crate::translate::selection::tests::{claim, group};

    /// A group named `name` in `namespace`, bound to a content or not.
    fn group_in(namespace: &str, name: &str, bound: bool) -> Arc<VolumeGroupSnapshot> {
        let mut group = group(None);
        group.metadata.namespace = Some(namespace.into());
        group.metadata.name = Some(name.into());
        group.status = Some(VolumeGroupSnapshotStatus {
            bound_volume_group_snapshot_content_name: bound.then(|| format!("groupsnapcontent-{name}")),
            ready_to_use: Some(false),
            ..Default::default()
        });
        Arc::new(group)
    }

    #[test]
    fn keys_are_namespace_and_name() {
        assert_eq!(group_key(&group(None)), "ns/group");
        let content = VolumeGroupSnapshotContent {
            metadata: ObjectMeta { name: Some("groupsnapcontent-u".into()), ..Default::default() },
            spec: VolumeGroupSnapshotContentSpec {
                volume_group_snapshot_ref: ObjectReference {
                    namespace: Some("ns".into()),
                    name: Some("group".into()),
                    ..Default::default()
                },
                deletion_policy: DeletionPolicy::Delete,
                driver: "d".into(),
                volume_group_snapshot_class_name: None,
                source: VolumeGroupSnapshotContentSource::default(),
            },
            status: None,
        };
        assert_eq!(referenced_group_key(&content), "ns/group");
    }

    #[test]
    fn classes_and_claims_wake_the_groups_still_waiting_for_their_content() {
        let groups = [
            group_in("ns", "waiting", false),
            group_in("ns", "bound", true),
            group_in("other", "waiting-elsewhere", false),
            Arc::new(group(None)),
        ];
        assert_eq!(woken_by_class(&groups), ["ns/waiting", "other/waiting-elsewhere", "ns/group"]);
        // The claim fixture lives in `ns`.
        assert_eq!(woken_by_claim(&groups, &claim("a", "app", true)), ["ns/waiting", "ns/group"]);
        assert_eq!(woken_by_class(&[]), Vec::<String>::new());
    }

    #[test]
    fn a_member_wakes_the_groups_that_own_it() {
        let owner = |kind: &str, name: &str| OwnerReference {
            api_version: "groupsnapshot.storage.k8s.io/v1".into(),
            kind: kind.into(),
            name: name.into(),
            uid: format!("{name}-uid"),
            ..Default::default()
        };
        let snapshot = |owners: Vec<OwnerReference>| VolumeSnapshot {
            metadata: ObjectMeta {
                name: Some("snapshot-h".into()),
                namespace: Some("ns".into()),
                owner_references: Some(owners),
                ..Default::default()
            },
            spec: Default::default(),
            status: None,
        };
        // (rule, owners, keys)
        let table = [
            ("owned by a group", vec![owner("VolumeGroupSnapshot", "group")], vec!["ns/group"]),
            ("owned by something else", vec![owner("Deployment", "app")], vec![]),
            (
                "owned by two groups",
                vec![owner("VolumeGroupSnapshot", "a"), owner("VolumeGroupSnapshot", "b")],
                vec!["ns/a", "ns/b"],
            ),
            ("owned by nothing", vec![], vec![]),
        ];
        for (rule, owners, want) in table {
            assert_eq!(owner_group_keys(&snapshot(owners)), want, "{rule}");
        }
    }
}
