//! The VolumeGroupSnapshotContent the snapshot-controller creates for a dynamic group snapshot, named after the
//! group's UID and created once (upstream: external-snapshotter, pkg/common-controller/
//! groupsnapshot_controller_helper.go, `createGroupSnapshotContent`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use snapshot_api::{
    VolumeGroupSnapshot, VolumeGroupSnapshotClass, VolumeGroupSnapshotContent, VolumeGroupSnapshotContentSource,
    VolumeGroupSnapshotContentSpec,
};

use sidecar_runtime::events::PlannedEvent;
use snapshot_api::names::FINALIZER_VOLUME_GROUP_SNAPSHOT_CONTENT_BOUND;

use super::names::{
    ANN_GROUP_DELETION_SECRET_NAME, ANN_GROUP_DELETION_SECRET_NAMESPACE, DYNAMIC_GROUP_CONTENT_NAME_PREFIX,
    EVENT_CONTENT_CREATION_FAILED, EVENT_CREATING_GROUP_SNAPSHOT, GROUP_SNAPSHOT_API_VERSION,
    KIND_VOLUME_GROUP_SNAPSHOT,
};
use super::secrets::{SecretError, SecretReference};
use super::selection::SelectedVolume;

/// `groupsnapcontent-<group UID>`: one name per group snapshot, so that a content created before a crash is found
/// again instead of created twice.
pub fn dynamic_content_name(group_uid: &str) -> String {
    format!("{DYNAMIC_GROUP_CONTENT_NAME_PREFIX}{group_uid}")
}

/// The content that belongs to the group: the bound one, else the pre-provisioned one it names, else
/// `groupsnapcontent-<uid>`.
pub fn group_content_name(group: &VolumeGroupSnapshot) -> String {
    let bound = group.status.as_ref().and_then(|s| s.bound_volume_group_snapshot_content_name.clone());
    let named = || group.spec.source.volume_group_snapshot_content_name.clone();
    bound.or_else(named).unwrap_or_else(|| dynamic_content_name(group.metadata.uid.as_deref().unwrap_or_default()))
}

/// The full reference to the group snapshot a content is bound to.
pub fn group_reference(group: &VolumeGroupSnapshot) -> ObjectReference {
    ObjectReference {
        api_version: Some(GROUP_SNAPSHOT_API_VERSION.into()),
        kind: Some(KIND_VOLUME_GROUP_SNAPSHOT.into()),
        namespace: group.metadata.namespace.clone(),
        name: group.metadata.name.clone(),
        uid: group.metadata.uid.clone(),
        resource_version: group.metadata.resource_version.clone(),
        field_path: None,
    }
}

/// The content to create: the selected volumes' handles in their order, the class's driver and deletion policy, and
/// the deletion Secret (from [`super::secrets::deletion_secret`]) as annotations. It is created with its
/// bound-protection finalizer, so that no deletion can pass it before the snapshot-controller has seen it.
pub fn dynamic_content(
    group: &VolumeGroupSnapshot,
    class: &VolumeGroupSnapshotClass,
    volumes: &[SelectedVolume],
    deletion_secret: Option<&SecretReference>,
) -> VolumeGroupSnapshotContent {
    let annotations = deletion_secret.map(|secret| {
        BTreeMap::from([
            (ANN_GROUP_DELETION_SECRET_NAME.to_string(), secret.name.clone()),
            (ANN_GROUP_DELETION_SECRET_NAMESPACE.to_string(), secret.namespace.clone()),
        ])
    });
    VolumeGroupSnapshotContent {
        metadata: ObjectMeta {
            name: Some(dynamic_content_name(group.metadata.uid.as_deref().unwrap_or_default())),
            annotations,
            finalizers: Some(vec![FINALIZER_VOLUME_GROUP_SNAPSHOT_CONTENT_BOUND.into()]),
            ..Default::default()
        },
        spec: VolumeGroupSnapshotContentSpec {
            volume_group_snapshot_ref: group_reference(group),
            deletion_policy: class.spec.deletion_policy,
            driver: class.spec.driver.clone(),
            volume_group_snapshot_class_name: class.metadata.name.clone(),
            source: VolumeGroupSnapshotContentSource {
                volume_handles: Some(volumes.iter().map(|v| v.volume_handle.clone()).collect()),
                group_snapshot_handles: None,
            },
        },
        status: None,
    }
}

/// The Normal event once the content exists: the driver cuts the group next.
pub fn creating_group_snapshot(group: &VolumeGroupSnapshot) -> PlannedEvent {
    let namespace = group.metadata.namespace.as_deref().unwrap_or_default();
    let name = group.metadata.name.as_deref().unwrap_or_default();
    let message = format!("Waiting for a group snapshot {namespace}/{name} to be created by the CSI driver.");
    PlannedEvent::normal(EVENT_CREATING_GROUP_SNAPSHOT, message)
}

/// The class's deletion Secret parameters cannot be resolved: no content is created.
pub fn secret_refused(error: &SecretError) -> PlannedEvent {
    PlannedEvent::warning(EVENT_CONTENT_CREATION_FAILED, error.to_string())
}

/// The API server refused the content.
pub fn content_creation_failed(error: &str) -> PlannedEvent {
    let message = format!("failed to create group snapshot content with error {error}");
    PlannedEvent::warning(EVENT_CONTENT_CREATION_FAILED, message)
}

#[cfg(test)]
mod tests {
    use snapshot_api::{DeletionPolicy, VolumeGroupSnapshotClassFields};

    use super::*;
    use crate::translate::selection::tests::{group, selected};

    fn class(policy: DeletionPolicy) -> VolumeGroupSnapshotClass {
        VolumeGroupSnapshotClass {
            metadata: ObjectMeta { name: Some("gold".into()), ..Default::default() },
            spec: VolumeGroupSnapshotClassFields { driver: "d".into(), parameters: None, deletion_policy: policy },
        }
    }

    #[test]
    fn content_carries_the_group_the_class_and_the_volumes() {
        let secret = SecretReference { name: "creds".into(), namespace: "kube-system".into() };
        // (policy, secret)
        for (policy, secret) in [(DeletionPolicy::Delete, None), (DeletionPolicy::Retain, Some(&secret))] {
            let content =
                dynamic_content(&group(None), &class(policy), &[selected("b", "d"), selected("a", "d")], secret);
            assert_eq!(content.metadata.name.as_deref(), Some("groupsnapcontent-group-uid"));
            let reference = &content.spec.volume_group_snapshot_ref;
            assert_eq!(
                (
                    reference.api_version.as_deref(),
                    reference.kind.as_deref(),
                    reference.namespace.as_deref(),
                    reference.name.as_deref(),
                    reference.uid.as_deref(),
                    reference.resource_version.as_deref()
                ),
                (
                    Some("groupsnapshot.storage.k8s.io/v1"),
                    Some("VolumeGroupSnapshot"),
                    Some("ns"),
                    Some("group"),
                    Some("group-uid"),
                    Some("7")
                )
            );
            assert_eq!(content.spec.deletion_policy, policy);
            assert_eq!(content.spec.driver, "d");
            assert_eq!(content.spec.volume_group_snapshot_class_name.as_deref(), Some("gold"));
            // The selection's order, unchanged.
            assert_eq!(content.spec.source.volume_handles, Some(vec!["handle-b".to_string(), "handle-a".to_string()]));
            assert_eq!(content.spec.source.group_snapshot_handles, None);
            assert_eq!(
                content.metadata.finalizers,
                Some(vec![
                    "groupsnapshot.storage.kubernetes.io/volumegroupsnapshotcontent-bound-protection".to_string()
                ])
            );
            let annotations = content.metadata.annotations.unwrap_or_default();
            match secret {
                None => assert!(annotations.is_empty()),
                Some(_) => {
                    assert_eq!(annotations[ANN_GROUP_DELETION_SECRET_NAME], "creds");
                    assert_eq!(annotations[ANN_GROUP_DELETION_SECRET_NAMESPACE], "kube-system");
                }
            }
        }
    }

    #[test]
    fn the_content_of_a_group_is_the_bound_one_else_the_named_one_else_its_own() {
        let with = |bound: Option<&str>, named: Option<&str>| {
            let mut group = group(None);
            group.spec.source.volume_group_snapshot_content_name = named.map(str::to_string);
            group.status = bound.map(|b| snapshot_api::VolumeGroupSnapshotStatus {
                bound_volume_group_snapshot_content_name: Some(b.into()),
                ..Default::default()
            });
            group
        };
        // (rule, group, content name)
        let table = [
            ("dynamic, not bound yet: named after the UID", with(None, None), "groupsnapcontent-group-uid"),
            ("dynamic, bound", with(Some("groupsnapcontent-group-uid"), None), "groupsnapcontent-group-uid"),
            ("pre-provisioned, not bound yet: the one it names", with(None, Some("imported")), "imported"),
            ("the bound name wins", with(Some("bound"), Some("imported")), "bound"),
        ];
        for (rule, group, want) in table {
            assert_eq!(group_content_name(&group), want, "{rule}");
        }
    }

    #[test]
    fn creation_events_name_the_group_or_the_error() {
        // (event, want)
        let table = [
            (
                creating_group_snapshot(&group(None)),
                PlannedEvent::normal(
                    "CreatingGroupSnapshot",
                    "Waiting for a group snapshot ns/group to be created by the CSI driver.",
                ),
            ),
            (
                content_creation_failed("forbidden"),
                PlannedEvent::warning(
                    "GroupSnapshotContentCreationFailed",
                    "failed to create group snapshot content with error forbidden",
                ),
            ),
            (
                secret_refused(&SecretError::Incomplete),
                PlannedEvent::warning(
                    "GroupSnapshotContentCreationFailed",
                    "either name and namespace for group snapshotter secrets specified, both must be specified",
                ),
            ),
        ];
        for (event, want) in table {
            assert_eq!(event, want);
        }
    }
}
