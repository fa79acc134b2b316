//! The group worker: one VolumeGroupSnapshot (`namespace/name`) per run. Every decision is a translate call; this
//! file reads, writes and records.
//!
//! A dynamic group snapshot goes: selection and class → its content `groupsnapcontent-<uid>` (created once) →
//! the bound-protection finalizers → the members, once csi-snapshotter has filled the content's status → the
//! content's status carried to the group. A pre-provisioned one binds to the content it names instead of creating
//! one, and goes on the same way, except that its members are its administrator's to create
//! ([`crate::translate::members::controller_makes_members`]). Deletion follows
//! [`crate::translate::deletion::group_deletion`].

use std::sync::Arc;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use sidecar_runtime::Outcome;
use snapshot_api::names::{FINALIZER_VOLUME_GROUP_SNAPSHOT_BOUND, FINALIZER_VOLUME_GROUP_SNAPSHOT_CONTENT_BOUND};
use snapshot_api::{VolumeGroupSnapshot, VolumeGroupSnapshotClass, VolumeGroupSnapshotContent, VolumeSnapshot};

use super::Shared;
use super::members::ensure_members;
use super::writes::{Retry, api_error_text, create_or_get, delete_by_name};
use crate::translate::binding::{bind_failed, bind_pre_provisioned, check_bound};
use crate::translate::content::{
    content_creation_failed, creating_group_snapshot, dynamic_content, dynamic_content_name, group_content_name,
    secret_refused,
};
use crate::translate::default_class::{class_not_found, default_group_class, group_driver};
use crate::translate::deletion::{
    content_delete_failed, group_deletion, member_delete_failed, orphan_content_deletion,
};
use crate::translate::members::controller_makes_members;
use crate::translate::patch::{ContentAnnotationPatch, GroupClassPatch};
use crate::translate::secrets::{TemplateValues, deletion_secret};
use crate::translate::selection::{check_driver, select_volumes};
use crate::translate::status::{group_status, status_after_content_created};

/// The worker entry: one run of a group snapshot key.
pub(super) async fn sync_group(shared: Arc<Shared>, key: String) -> Outcome {
    let result = match shared.stores.group(&key) {
        Some(group) => sync(&shared, (*group).clone()).await,
        None => delete_orphans(&shared, &key).await,
    };
    match result {
        Ok(()) => Outcome::Done,
        Err(Retry(error)) => {
            tracing::info!(group = %key, %error, "group snapshot sync failed, retrying");
            Outcome::Retry
        }
    }
}

async fn sync(shared: &Shared, group: VolumeGroupSnapshot) -> Result<(), Retry> {
    if group.metadata.deletion_timestamp.is_some() {
        return delete(shared, &group).await;
    }
    let (group, content) = match (
        &group.spec.source.volume_group_snapshot_content_name,
        shared.stores.group_content(&group_content_name(&group)),
    ) {
        (Some(_), content) => {
            let content = bind(shared, &group, content.as_deref()).await?;
            (group, content)
        }
        (None, Some(content)) => (group, (*content).clone()),
        (None, None) => create_content(shared, group).await?,
    };
    if let Err(event) = check_bound(&group, &content) {
        return Err(shared.refuse(&group, &[event]).await);
    }

    shared.start_operations(&group, &content.spec.driver);

    // Bound: both get their protection, whatever the deletion policy (upstream since v8.2).
    shared.set_finalizer(&shared.groups_api(&group), &group, FINALIZER_VOLUME_GROUP_SNAPSHOT_BOUND, true).await?;
    let contents: Api<VolumeGroupSnapshotContent> = Api::all(shared.client.clone());
    shared.set_finalizer(&contents, &content, FINALIZER_VOLUME_GROUP_SNAPSHOT_CONTENT_BOUND, true).await?;

    if controller_makes_members(&group) {
        ensure_members(shared, &group, &content).await?;
    }

    let (status, events) = group_status(&group, &content);
    if group.status.as_ref() != Some(&status) {
        let stored = shared.write_group_status(&group, &status).await?;
        shared.operations_done(&stored);
        for event in &events {
            shared.record(&stored, event).await;
        }
    }
    Ok(())
}

/// A pre-provisioned group snapshot binds to the content it names ([`bind_pre_provisioned`]); returns the content as
/// bound.
async fn bind(
    shared: &Shared,
    group: &VolumeGroupSnapshot,
    content: Option<&VolumeGroupSnapshotContent>,
) -> Result<VolumeGroupSnapshotContent, Retry> {
    let name = group_content_name(group);
    let patch = match bind_pre_provisioned(group, &name, content) {
        Ok(patch) => patch,
        Err(event) => return Err(shared.refuse(group, &[event]).await),
    };
    match content {
        Some(content) if patch.is_empty() => return Ok(content.clone()),
        _ => {}
    }
    let contents: Api<VolumeGroupSnapshotContent> = Api::all(shared.client.clone());
    match contents.patch(&name, &PatchParams::default(), &Patch::Merge(patch.merge_patch())).await {
        Ok(content) => Ok(content),
        Err(err) => Err(shared.refuse(group, &[bind_failed(&name, &api_error_text(&err))]).await),
    }
}

/// The claims' volumes, the class (the driver's default written into the group when it names none), then the
/// content. Returns the group as stored and the content.
async fn create_content(
    shared: &Shared,
    mut group: VolumeGroupSnapshot,
) -> Result<(VolumeGroupSnapshot, VolumeGroupSnapshotContent), Retry> {
    let namespace = group.namespace().unwrap_or_default();
    // A fresh list, not the watch cache: the members are fixed once the content is written, and a claim the cache
    // has not seen yet (created just before the group) would be left out of the group for good.
    let claims = Api::<PersistentVolumeClaim>::namespaced(shared.client.clone(), &namespace)
        .list(&ListParams::default())
        .await?
        .items;
    let selected = {
        // Only the claims' volumes are rebuilt from the cache.
        let names = claims.iter().filter_map(|c| c.spec.as_ref()?.volume_name.as_deref());
        let volumes: Vec<_> = names.filter_map(|name| shared.stores.volumes.get(name)).collect();
        select_volumes(&group, &claims, |name| volumes.iter().find(|v| v.name_any() == name).map(|v| &**v))
    };
    let selected = match selected {
        Ok(selected) => selected,
        Err(refusal) => return Err(shared.refuse(&group, &refusal.events).await),
    };

    let class = match group.spec.volume_group_snapshot_class_name.clone() {
        Some(name) => match shared.stores.class(&name) {
            Some(class) => (*class).clone(),
            None => return Err(shared.refuse(&group, &[class_not_found(&name)]).await),
        },
        None => {
            let driver = match group_driver(&selected) {
                Ok(driver) => driver,
                Err(refusal) => return Err(shared.refuse(&group, &refusal.events).await),
            };
            let classes: Vec<VolumeGroupSnapshotClass> =
                shared.stores.classes.state().iter().map(|c| (**c).clone()).collect();
            let class = match default_group_class(&classes, driver) {
                Ok(class) => class.clone(),
                Err(event) => return Err(shared.refuse(&group, &[event]).await),
            };
            let patch = GroupClassPatch { class_name: class.name_any() };
            group = shared
                .groups_api(&group)
                .patch(&group.name_any(), &PatchParams::default(), &Patch::Merge(patch.merge_patch()))
                .await?;
            class
        }
    };
    if let Err(refusal) = check_driver(&selected, &class.name_any(), &class.spec.driver) {
        return Err(shared.refuse(&group, &refusal.events).await);
    }

    let name = dynamic_content_name(&group.uid().unwrap_or_default());
    let values = TemplateValues { group_name: &group.name_any(), group_namespace: &namespace, content_name: &name };
    let secret = match deletion_secret(class.spec.parameters.as_ref(), values) {
        Ok(secret) => secret,
        Err(err) => return Err(shared.refuse(&group, &[secret_refused(&err)]).await),
    };
    let content = dynamic_content(&group, &class, &selected, secret.as_ref());
    let contents: Api<VolumeGroupSnapshotContent> = Api::all(shared.client.clone());
    let content = match create_or_get(&contents, &content).await {
        Ok(content) => content,
        Err(err) => return Err(shared.refuse(&group, &[content_creation_failed(&api_error_text(&err))]).await),
    };
    shared.record(&group, &creating_group_snapshot(&group)).await;
    let status = status_after_content_created(&group, &content.name_any());
    let group = shared.write_group_status(&group, &status).await?;
    Ok((group, content))
}

/// The group snapshot of `key` is gone: the contents still bound to it go by their policy
/// ([`orphan_content_deletion`]), the same way as when the group is deleted with its finalizer.
async fn delete_orphans(shared: &Shared, key: &str) -> Result<(), Retry> {
    let orphans = shared.stores.contents_of(key);
    if orphans.is_empty() {
        return Ok(());
    }
    // The cache may lag behind a group just created: ask the API server before deleting anything.
    let (namespace, name) = key.split_once('/').unwrap_or_default();
    let groups: Api<VolumeGroupSnapshot> = Api::namespaced(shared.client.clone(), namespace);
    let uid_now = groups.get_opt(name).await?.and_then(|g| g.metadata.uid);
    let contents: Api<VolumeGroupSnapshotContent> = Api::all(shared.client.clone());
    for content in orphans.iter().filter(|c| orphan_content_deletion(c, uid_now.as_deref())) {
        tracing::info!(group = key, content = %content.name_any(), "deleting the content of a group snapshot that is gone");
        let patch = Patch::Merge(ContentAnnotationPatch::being_deleted().merge_patch());
        contents.patch(&content.name_any(), &PatchParams::default(), &patch).await?;
        delete_by_name(&contents, &content.name_any()).await?;
    }
    Ok(())
}

/// The group snapshot is being deleted: its content is told (and deleted with policy Delete), its members are
/// deleted, and its finalizer goes once nothing of the group's is left on the storage side to wait for.
async fn delete(shared: &Shared, group: &VolumeGroupSnapshot) -> Result<(), Retry> {
    if !group.finalizers().iter().any(|f| f == FINALIZER_VOLUME_GROUP_SNAPSHOT_BOUND) {
        return Ok(());
    }
    let content = shared.stores.group_content(&group_content_name(group));
    shared.start_operations(group, content.as_ref().map(|c| c.spec.driver.as_str()).unwrap_or_default());
    let members: Vec<VolumeSnapshot> = shared.stores.members_of(group);
    let claims = shared.stores.claims_in(&group.namespace().unwrap_or_default());
    let deletion = match group_deletion(group, content.as_deref(), &members, &claims) {
        Ok(deletion) => deletion.left_to_do(content.as_deref(), &members),
        Err(event) => {
            shared.record(group, &event).await;
            return Err(Retry(event.message));
        }
    };
    let contents: Api<VolumeGroupSnapshotContent> = Api::all(shared.client.clone());
    if let Some(content) = content.as_deref() {
        if deletion.mark_content_being_deleted {
            let patch = Patch::Merge(ContentAnnotationPatch::being_deleted().merge_patch());
            contents.patch(&content.name_any(), &PatchParams::default(), &patch).await?;
        }
        if deletion.delete_content
            && let Err(err) = delete_by_name(&contents, &content.name_any()).await
        {
            let event = content_delete_failed(&api_error_text(&err));
            shared.record(group, &event).await;
            return Err(Retry(event.message));
        }
    }
    let snapshots: Api<VolumeSnapshot> = Api::namespaced(shared.client.clone(), &group.namespace().unwrap_or_default());
    for member in &deletion.delete_members {
        if let Err(err) = delete_by_name(&snapshots, member).await {
            let event = member_delete_failed(member, &api_error_text(&err));
            shared.record(group, &event).await;
            return Err(Retry(event.message));
        }
    }
    if deletion.remove_finalizer {
        shared.set_finalizer(&shared.groups_api(group), group, FINALIZER_VOLUME_GROUP_SNAPSHOT_BOUND, false).await?;
    }
    Ok(())
}
