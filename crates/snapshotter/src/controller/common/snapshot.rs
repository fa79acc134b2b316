//! The snapshot worker: one VolumeSnapshot (`namespace/name`) per run, in the order
//! [`crate::translate::common`] documents. Every decision is a translate call; this file reads, writes and records.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, ResourceExt};
use sidecar_runtime::Outcome;
use sidecar_runtime::api_error::{is_conflict, is_not_found};
use snapshot_api::{VolumeGroupSnapshot, VolumeSnapshot, VolumeSnapshotClass, VolumeSnapshotContent};

use super::Shared;
use super::metrics::{CREATE_SNAPSHOT, CREATE_SNAPSHOT_AND_READY, DELETE_SNAPSHOT, DYNAMIC, PRE_PROVISIONED};
use super::writes::{Retry, api_error_text};
use crate::translate::common::binding::{
    accepted_content, bind_patch, content_missing, content_to_read, ready_snapshot_check,
};
use crate::translate::common::default_class::{
    ClassLookup, class_lookup, class_missing, default_class, default_class_failed, sync_continues_without_class,
};
use crate::translate::common::deletion::{content_delete_failed, deletion_content_name, snapshot_deletion};
use crate::translate::common::dynamic_content::{create_failed, creating_event, creation_failed, managing_node};
use crate::translate::common::finalizers::{
    claim_finalizer_before_create, claim_finalizer_removal, claim_finalizer_removal_failed, snapshot_finalizer_failed,
    snapshot_finalizers,
};
use crate::translate::common::names::{
    bound_content_name, is_created, is_ready, not_found_text, parent_group_snapshot, snapshot_key,
};
use crate::translate::common::source_volume::{
    SourceVolumeError, csi_source, source_claim_name, verify_binding, volume_to_read,
};
use crate::translate::common::status::snapshot_status;
use crate::translate::common::validation::{SnapshotSource, snapshot_source};

/// The `snapshot_type` label: dynamic (of a claim) or pre-provisioned (of a content).
fn snapshot_type(snapshot: &VolumeSnapshot) -> &'static str {
    if snapshot.spec.source.persistent_volume_claim_name.is_some() { DYNAMIC } else { PRE_PROVISIONED }
}

/// One run of a snapshot key.
pub(super) async fn sync_snapshot(shared: Arc<Shared>, key: String) -> Outcome {
    let Some(snapshot) = shared.stores.snapshot(&key) else { return Outcome::Done };
    match sync(&shared, (*snapshot).clone()).await {
        Ok(()) => Outcome::Done,
        Err(Retry(error)) => {
            tracing::info!(snapshot = %key, %error, "snapshot sync failed, retrying");
            Outcome::Retry
        }
    }
}

async fn sync(shared: &Shared, mut snapshot: VolumeSnapshot) -> Result<(), Retry> {
    let namespace = snapshot.namespace().unwrap_or_default();
    let uid = snapshot.uid().unwrap_or_default();
    // 1. A claim no snapshot is being cut from any more loses its protection.
    if let Some(claim_name) = &snapshot.spec.source.persistent_volume_claim_name
        && let Some(claim) = shared.stores.claim(&namespace, claim_name)
    {
        release_claim(shared, &snapshot, &claim, None).await;
    }

    // 2. The class.
    let class = match resolve_class(shared, &mut snapshot).await {
        Ok(class) => class,
        Err(failure) if sync_continues_without_class(&snapshot) => {
            shared.fail(&snapshot, failure).await.ok();
            None
        }
        Err(failure) => return shared.fail(&snapshot, failure).await,
    };

    // 3. Being deleted.
    if snapshot.metadata.deletion_timestamp.is_some() {
        let driver = class.as_ref().map(|c| c.spec.driver.clone()).unwrap_or_default();
        shared.metrics.start(DELETE_SNAPSHOT, &uid, &driver, snapshot_type(&snapshot));
        return delete(shared, &snapshot).await;
    }

    // 4, 5. The source, and the content that belongs to it.
    let preprovisioned = match snapshot_source(&snapshot) {
        Ok(source) => matches!(source, SnapshotSource::Content(_)),
        Err(failure) => return shared.fail(&snapshot, failure).await,
    };
    // A snapshot naming its content is pre-provisioned, a group's member or not.
    let group = parent_group_snapshot(&snapshot).filter(|_| !preprovisioned).map(str::to_string);
    let stored = content_to_read(&snapshot).and_then(|name| shared.stores.content(&name));
    let content = match accepted_content(&snapshot, preprovisioned, stored.as_deref()) {
        Ok(content) => content.cloned(),
        Err(failure) => return shared.fail(&snapshot, failure).await,
    };
    if !is_created(&snapshot) || !is_ready(&snapshot) {
        let driver =
            class.as_ref().map(|c| c.spec.driver.as_str()).or(content.as_ref().map(|c| c.spec.driver.as_str()));
        for operation in [CREATE_SNAPSHOT, CREATE_SNAPSHOT_AND_READY] {
            shared.metrics.start(operation, &uid, driver.unwrap_or_default(), snapshot_type(&snapshot));
        }
    }
    if let Some(patch) = snapshot_finalizers(&snapshot, content.as_ref()) {
        match shared.patch_snapshot(&snapshot, &patch).await {
            Ok(stored) => snapshot = stored,
            Err(err) => return shared.fail(&snapshot, snapshot_finalizer_failed(&api_error_text(&err))).await,
        }
    }

    // 6. Ready and bound: only check that it stays so.
    if is_ready(&snapshot)
        && let Some(bound) = bound_content_name(&snapshot)
    {
        let bound = shared.stores.content(bound);
        return match ready_snapshot_check(&snapshot, bound.as_deref()) {
            Ok(()) => Ok(()),
            Err(failure) => shared.fail(&snapshot, failure).await,
        };
    }

    // 7a. A group member: carry its content's status over once the group has bound them.
    if let Some(group) = &group {
        return match content {
            Some(content) => update_status(shared, &snapshot, &content, Some(group)).await,
            None => Ok(()),
        };
    }

    // 7. Pre-provisioned: bind, then carry the status over.
    if preprovisioned {
        let Some(mut content) = content else { return shared.fail(&snapshot, content_missing(&snapshot)).await };
        match bind_patch(&snapshot, &content) {
            Ok(Some(patch)) => content = shared.patch_content(&content, &patch).await?,
            Ok(None) => {}
            Err(failure) => return shared.fail(&snapshot, failure).await,
        }
        return update_status(shared, &snapshot, &content, None).await;
    }

    // 8. Dynamic: the content exists, or is created now.
    let content = match content {
        Some(content) => content,
        None => create_content(shared, &snapshot, class.as_deref()).await?,
    };
    update_status(shared, &snapshot, &content, None).await
}

/// Step 2: the class the snapshot names, or its driver's default written into the snapshot (`snapshot` is then the
/// stored one). `None` when the snapshot needs none.
async fn resolve_class(
    shared: &Shared,
    snapshot: &mut VolumeSnapshot,
) -> Result<Option<Arc<VolumeSnapshotClass>>, crate::translate::common::status_error::SnapshotFailure> {
    match class_lookup(snapshot) {
        ClassLookup::NotNeeded => Ok(None),
        ClassLookup::Named(name) => shared.stores.class(name).map(Some).ok_or_else(|| class_missing(name)),
        ClassLookup::Default => {
            let volume = read_source_volume(shared, snapshot).await.map_err(|e| default_class_failed(e.to_string()))?;
            let driver = csi_source(&volume, snapshot).map_err(|e| default_class_failed(e.to_string()))?.driver.clone();
            let classes = shared.stores.classes.state();
            let chosen = default_class(classes.iter().map(|c| &**c), &driver)?;
            let class = shared.stores.class(&chosen.class.name_any());
            *snapshot = shared
                .patch_snapshot(snapshot, &chosen.patch)
                .await
                .map_err(|e| default_class_failed(api_error_text(&e)))?;
            Ok(class)
        }
    }
}

/// The claim from the cache and its volume with a GET (upstream reads the volume fresh too), checked in
/// [`crate::translate::common::source_volume`]'s order.
async fn read_source_volume(shared: &Shared, snapshot: &VolumeSnapshot) -> Result<PersistentVolume, SourceVolumeError> {
    let claim_name = source_claim_name(snapshot)?;
    let namespace = snapshot.namespace().unwrap_or_default();
    let claim = shared.stores.claim(&namespace, claim_name).ok_or_else(|| SourceVolumeError::ClaimNotRead {
        name: claim_name.to_string(),
        error: not_found_text("persistentvolumeclaim", claim_name),
    })?;
    let volume_name = volume_to_read(&claim)?;
    let volumes: Api<PersistentVolume> = Api::all(shared.client.clone());
    let volume = volumes
        .get(volume_name)
        .await
        .map_err(|e| SourceVolumeError::VolumeNotRead { name: volume_name.to_string(), error: api_error_text(&e) })?;
    verify_binding(&volume, &claim)?;
    Ok(volume)
}

/// Step 8: the claim's protection, then the content `snapcontent-<uid>` (an existing one is reused).
async fn create_content(
    shared: &Shared,
    snapshot: &VolumeSnapshot,
    class: Option<&VolumeSnapshotClass>,
) -> Result<VolumeSnapshotContent, Retry> {
    let namespace = snapshot.namespace().unwrap_or_default();
    let claim_name = snapshot.spec.source.persistent_volume_claim_name.clone().unwrap_or_default();
    let claim = shared.stores.claim(&namespace, &claim_name);
    match claim_finalizer_before_create(snapshot, claim.as_deref()) {
        Ok(Some(_)) => {
            let claim = claim.expect("a finalizer is only asked for a claim that exists");
            if let Err(err) = shared.set_claim_finalizer(&claim, true).await {
                let failure = crate::translate::common::dynamic_content::claim_finalizer_failed(
                    &claim.name_any(),
                    &api_error_text(&err),
                );
                shared.fail(snapshot, failure).await?;
            }
        }
        Ok(None) => {}
        Err(failure) => {
            shared.fail(snapshot, failure).await?;
        }
    }
    let volume = match read_source_volume(shared, snapshot).await {
        Ok(volume) => volume,
        Err(err) => {
            shared.fail(snapshot, creation_failed(&err.to_string())).await?;
            return Err(Retry(err.to_string()));
        }
    };
    let mut options = shared.options.content.clone();
    if shared.options.distributed_snapshotting {
        let nodes = shared.stores.nodes();
        options.managed_by_node = managing_node(&volume, nodes.iter().map(|n| &**n));
        if options.managed_by_node.is_none() {
            tracing::warn!(snapshot = %snapshot_key(snapshot), volume = %volume.name_any(),
                "no node matches the volume's node affinity: the content gets no managed-by label");
        }
    }
    let content = match crate::translate::common::dynamic_content::dynamic_content(snapshot, class, &volume, &options) {
        Ok(content) => content,
        Err(failure) => {
            let error = failure.error.clone().unwrap_or_default();
            shared.fail(snapshot, failure).await?;
            return Err(Retry(error));
        }
    };
    let contents: Api<VolumeSnapshotContent> = Api::all(shared.client.clone());
    let created = match contents.create(&PostParams::default(), &content).await {
        Ok(created) => created,
        Err(err) if is_conflict(&err) => contents.get(&content.name_any()).await?,
        Err(err) => {
            let (event, failure) = create_failed(snapshot, &api_error_text(&err));
            shared.record(snapshot, &event).await;
            shared.fail(snapshot, failure).await?;
            return Err(Retry(api_error_text(&err)));
        }
    };
    shared.record(snapshot, &creating_event(snapshot)).await;
    Ok(created)
}

/// Carries the content's status over to the snapshot, with the first-creation and first-ready events.
async fn update_status(
    shared: &Shared,
    snapshot: &VolumeSnapshot,
    content: &VolumeSnapshotContent,
    group: Option<&str>,
) -> Result<(), Retry> {
    let update = snapshot_status(snapshot, content, group);
    if let Some(write) = &update.write {
        let stored = shared.write_status(snapshot, write).await?;
        let uid = stored.uid().unwrap_or_default();
        if is_created(&stored) {
            shared.metrics.succeeded(CREATE_SNAPSHOT, &uid);
        }
        if is_ready(&stored) {
            shared.metrics.succeeded(CREATE_SNAPSHOT_AND_READY, &uid);
        }
        for event in &update.events {
            shared.record(&stored, event).await;
        }
    }
    Ok(())
}

/// Step 3: the snapshot is being deleted.
async fn delete(shared: &Shared, snapshot: &VolumeSnapshot) -> Result<(), Retry> {
    let namespace = snapshot.namespace().unwrap_or_default();
    let content = deletion_content_name(snapshot).and_then(|name| shared.stores.content(&name));
    let claims = shared.stores.claims_in(&namespace);
    let in_live_group = group_is_live(shared, snapshot).await?;
    let deletion = match snapshot_deletion(snapshot, content.as_deref(), claims.iter().map(|c| &**c), in_live_group) {
        Ok(Some(deletion)) => deletion,
        Ok(None) => return Ok(()),
        Err(failure) => return shared.fail(snapshot, failure).await,
    };
    if let (Some(patch), Some(content)) = (&deletion.content_annotation, &content) {
        shared.patch_content(content, patch).await?;
    }
    if let Some(name) = &deletion.delete_content {
        let contents: Api<VolumeSnapshotContent> = Api::all(shared.client.clone());
        match contents.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(err) if is_not_found(&err) => {}
            Err(err) => {
                let (event, error) = content_delete_failed(name, &api_error_text(&err));
                shared.record(snapshot, &event).await;
                return Err(Retry(error));
            }
        }
    }
    if let Some(claim_name) = &snapshot.spec.source.persistent_volume_claim_name
        && let Some(claim) = shared.stores.claim(&namespace, claim_name)
        && !release_claim(shared, snapshot, &claim, Some(snapshot)).await
    {
        return Err(Retry(format!("cannot release claim {namespace}/{claim_name}")));
    }
    if let Some(patch) = &deletion.finalizers {
        shared.patch_snapshot(snapshot, patch).await?;
    }
    Ok(())
}

/// Whether the VolumeGroupSnapshot named in the snapshot's `status.volumeGroupSnapshotName` exists and is not being
/// deleted, read fresh. Beyond upstream, a group being deleted no longer holds its members: it deletes them itself
/// (after checking no restore reads them), and they go at once instead of at their next retry after the group.
async fn group_is_live(shared: &Shared, snapshot: &VolumeSnapshot) -> Result<bool, Retry> {
    let Some(group) = snapshot.status.as_ref().and_then(|s| s.volume_group_snapshot_name.as_deref()) else {
        return Ok(false);
    };
    let groups: Api<VolumeGroupSnapshot> =
        Api::namespaced(shared.client.clone(), &snapshot.namespace().unwrap_or_default());
    let found = groups.get_opt(group).await?;
    Ok(found.is_some_and(|g| g.metadata.deletion_timestamp.is_none()))
}

/// Takes `pvc-as-source-protection` off the claim when no snapshot (but `skip`) is being cut from it any more.
/// False when the write failed (recorded as an event).
async fn release_claim(
    shared: &Shared,
    snapshot: &VolumeSnapshot,
    claim: &PersistentVolumeClaim,
    skip: Option<&VolumeSnapshot>,
) -> bool {
    let snapshots = shared.stores.snapshots_in(&snapshot.namespace().unwrap_or_default());
    if claim_finalizer_removal(claim, snapshots.iter().map(|s| &**s), skip).is_none() {
        return true;
    }
    match shared.set_claim_finalizer(claim, false).await {
        Ok(()) => true,
        Err(err) => {
            let failure = claim_finalizer_removal_failed(&api_error_text(&err));
            tracing::warn!(snapshot = %snapshot_key(snapshot), error = %failure.error.clone().unwrap_or_default(),
                "cannot remove the claim's source protection");
            shared.record(snapshot, &failure.event()).await;
            false
        }
    }
}
