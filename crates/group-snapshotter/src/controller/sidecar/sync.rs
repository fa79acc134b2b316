//! The worker entry of csi-snapshotter's group loop: one sync of a group content of this driver. Deletion first
//! ([`content_deletion`]), then the call [`driver_call`] names: for a dynamic content the first
//! CreateVolumeGroupSnapshot, then the same call again while the group or a member is not ready (idempotent by
//! name); for a pre-provisioned one GetVolumeGroupSnapshot until it is ready and its snapshots are listed. Each sync
//! that still waits for readiness ends in a retry, so the driver is asked again with backoff.

use std::sync::Arc;

use kube::ResourceExt;
use sidecar_runtime::Outcome;
use sidecar_runtime::api_error::api_error_text;
use snapshot_api::VolumeGroupSnapshotContent;

use super::Shared;
use crate::translate::create_request::{
    answer_defect, create_group_snapshot_request, creation_failure, creation_refused, request_refused, wrong_answer,
};
use crate::translate::deletion::{
    ContentDeletion, GroupSnapshotToDelete, content_deletion, group_snapshot_delete_failed, status_after_delete,
};
use crate::translate::filter::handled_by;
use crate::translate::get_request::{get_failed, get_group_snapshot_request, get_refused};
use crate::translate::names::{
    ANN_GROUP_DELETION_SECRET_NAME, ANN_GROUP_DELETION_SECRET_NAMESPACE, ANN_VOLUME_GROUP_SNAPSHOT_BEING_CREATED,
};
use crate::translate::patch::{ContentAnnotationPatch, ContentStatusPatch};
use crate::translate::secrets::{get_secret, secret_from_annotations};
use crate::translate::status::{DriverCall, content_status_after_create, driver_call, needs_refresh};

/// The worker entry: one sync of the content named `name`.
pub(super) async fn sync(shared: Arc<Shared>, name: String) -> Outcome {
    let Some(content) = shared.stores.content(&name) else { return Outcome::Done };
    if !handled_by(&content, &shared.options.driver) {
        return Outcome::Done;
    }
    let content = (*content).clone();
    let result = match content_deletion(&content) {
        Err(event) => Err(shared.warn(&content, &event).await),
        Ok(ContentDeletion::NotDeleting) => match driver_call(&content) {
            DriverCall::Create => create(&shared, content).await,
            DriverCall::Get => get(&shared, content).await,
            DriverCall::Nothing => Ok(Outcome::Done),
        },
        Ok(ContentDeletion::Wait) => Ok(Outcome::Done),
        // Deleted while a creation was under way: learn the group's id first; the content's update brings it
        // back here for the deletion.
        Ok(ContentDeletion::FinishCreation) => create(&shared, content).await,
        Ok(ContentDeletion::RemoveFinalizer) => shared.release(&content).await,
        Ok(ContentDeletion::DeleteGroupSnapshot(to_delete)) => delete(&shared, &content, &to_delete).await,
    };
    result.unwrap_or_else(|error| {
        tracing::info!(content = name, %error, "group snapshot content sync failed, retrying");
        Outcome::Retry
    })
}

/// DeleteVolumeGroupSnapshot, then the status cleared ([`status_after_delete`]), then the finalizer released.
async fn delete(
    shared: &Shared,
    content: &VolumeGroupSnapshotContent,
    to_delete: &GroupSnapshotToDelete,
) -> Result<Outcome, String> {
    let name = content.name_any();
    let secrets = match shared.secrets(to_delete.secret.as_ref()).await {
        Ok(secrets) => secrets,
        Err(error) => return Err(shared.warn(content, &group_snapshot_delete_failed(&name, &error)).await),
    };
    if let Err(err) = shared.csi.delete_volume_group_snapshot(to_delete.request(secrets)).await {
        return Err(shared.warn(content, &group_snapshot_delete_failed(&name, &err.to_string())).await);
    }
    let patch = ContentStatusPatch { status: status_after_delete(content) };
    let stored = shared.write_status(&name, &patch).await.map_err(|e| api_error_text(&e))?;
    shared.release(&stored).await
}

/// CreateVolumeGroupSnapshot for a dynamic content not cut yet, or not ready yet.
async fn create(shared: &Shared, content: VolumeGroupSnapshotContent) -> Result<Outcome, String> {
    let first = content.status.as_ref().and_then(|s| s.volume_group_snapshot_handle.as_ref()).is_none();
    let name = content.name_any();
    let class = content.spec.volume_group_snapshot_class_name.as_deref().and_then(|c| shared.stores.class(c));
    let secret = secret_from_annotations(
        content.metadata.annotations.as_ref(),
        ANN_GROUP_DELETION_SECRET_NAME,
        ANN_GROUP_DELETION_SECRET_NAMESPACE,
    );
    let request = match shared.secrets(secret.as_ref()).await {
        Err(message) => Err(creation_refused(message)),
        Ok(secrets) => create_group_snapshot_request(&content, class.as_deref(), secrets, &shared.options.request)
            .map_err(|e| request_refused(&name, &e)),
    };
    let request = match request {
        Ok(request) => request,
        Err(failure) => return Err(shared.creation_failed(&content, failure).await),
    };
    // Stored before the call: a crash after the driver cut the group leaves it, and deletion waits.
    let content = if first {
        shared
            .write_annotation(&name, &ContentAnnotationPatch::being_created(true))
            .await
            .map_err(|e| api_error_text(&e))?
    } else {
        content
    };
    let answer = match shared.csi.create_volume_group_snapshot(request).await {
        Ok(response) => response.group_snapshot.unwrap_or_default(),
        Err(err) => return Err(shared.creation_failed(&content, creation_failure(&name, &err)).await),
    };
    if let Some(defect) = answer_defect(&answer) {
        return Err(shared.creation_failed(&content, wrong_answer(&name, &defect)).await);
    }
    let stored = write_answer(shared, &content, &answer).await?;
    if stored.annotations().contains_key(ANN_VOLUME_GROUP_SNAPSHOT_BEING_CREATED) {
        let patch = ContentAnnotationPatch::being_created(false);
        shared.write_annotation(&name, &patch).await.map_err(|e| api_error_text(&e))?;
    }
    // Not ready yet: ask again, with backoff.
    Ok(if needs_refresh(&stored) { Outcome::Retry } else { Outcome::Done })
}

/// GetVolumeGroupSnapshot for a pre-provisioned content, until it and its members are ready and listed. Nothing
/// is cut, so no annotation guards the call.
async fn get(shared: &Shared, content: VolumeGroupSnapshotContent) -> Result<Outcome, String> {
    let name = content.name_any();
    let class = content.spec.volume_group_snapshot_class_name.as_deref().and_then(|c| shared.stores.class(c));
    let secret = get_secret(class.as_ref().and_then(|c| c.spec.parameters.as_ref()), &name);
    let secrets = match secret {
        Ok(secret) => shared.secrets(secret.as_ref()).await,
        Err(err) => Err(err.to_string()),
    };
    let request = match secrets.map(|secrets| get_group_snapshot_request(&content, secrets)) {
        Ok(Some(request)) => request,
        Ok(None) => return Ok(Outcome::Done),
        Err(message) => return Err(shared.creation_failed(&content, get_refused(message)).await),
    };
    let answer = match shared.csi.get_volume_group_snapshot(request).await {
        Ok(response) => response.group_snapshot.unwrap_or_default(),
        Err(err) => return Err(shared.creation_failed(&content, get_failed(&name, &err)).await),
    };
    if let Some(defect) = answer_defect(&answer) {
        let message = format!("failed to get group snapshot {name} from the CSI driver: {defect}");
        return Err(shared.creation_failed(&content, get_refused(message)).await);
    }
    let stored = write_answer(shared, &content, &answer).await?;
    Ok(if needs_refresh(&stored) { Outcome::Retry } else { Outcome::Done })
}

/// The driver's answer about the group, written into the content's status; returns the content as stored.
async fn write_answer(
    shared: &Shared,
    content: &VolumeGroupSnapshotContent,
    answer: &csi_client::proto::VolumeGroupSnapshot,
) -> Result<VolumeGroupSnapshotContent, String> {
    let status = content_status_after_create(content.status.as_ref(), answer, k8s_openapi::jiff::Timestamp::now());
    shared.write_status(&content.name_any(), &ContentStatusPatch { status }).await.map_err(|e| api_error_text(&e))
}
