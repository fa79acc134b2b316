//! The shared context's own helpers for csi-snapshotter's group loop: how the content's writes, its events and the
//! Secret reads reach the API server. Every text and status they write comes from [`crate::translate`].

use std::collections::HashMap;

use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use sidecar_runtime::Outcome;
use sidecar_runtime::PlannedEvent;
use sidecar_runtime::api_error::api_error_text;
use sidecar_runtime::secrets::secret_data;
use sidecar_runtime::time::now;
use sidecar_runtime::update::set_finalizer;
use snapshot_api::VolumeGroupSnapshotContent;
use snapshot_api::names::FINALIZER_VOLUME_GROUP_SNAPSHOT_CONTENT_BOUND;

use super::Shared;
use crate::translate::create_request::CreationFailure;
use crate::translate::names::ANN_VOLUME_GROUP_SNAPSHOT_BEING_CREATED;
use crate::translate::patch::{ContentAnnotationPatch, ContentStatusPatch};
use crate::translate::secrets::{SecretReference, secret_read_error};
use crate::translate::status::content_status_with_error;

impl Shared {
    fn api(&self) -> Api<VolumeGroupSnapshotContent> {
        Api::all(self.client.clone())
    }

    /// Writes the content's status; returns the content as stored.
    pub(super) async fn write_status(
        &self,
        name: &str,
        patch: &ContentStatusPatch,
    ) -> Result<VolumeGroupSnapshotContent, kube::Error> {
        self.api().patch_status(name, &PatchParams::default(), &Patch::Merge(patch.merge_patch())).await
    }

    /// Sets or removes an annotation of the content; returns the content as stored.
    pub(super) async fn write_annotation(
        &self,
        name: &str,
        patch: &ContentAnnotationPatch,
    ) -> Result<VolumeGroupSnapshotContent, kube::Error> {
        self.api().patch(name, &PatchParams::default(), &Patch::Merge(patch.merge_patch())).await
    }

    /// Nothing is left on the storage side: the content's finalizer goes.
    pub(super) async fn release(&self, content: &VolumeGroupSnapshotContent) -> Result<Outcome, String> {
        set_finalizer(&self.api(), content, FINALIZER_VOLUME_GROUP_SNAPSHOT_CONTENT_BOUND, false)
            .await
            .map_err(|e| api_error_text(&e))?;
        Ok(Outcome::Done)
    }

    /// Records a failed or refused CreateVolumeGroupSnapshot (or GetVolumeGroupSnapshot): the Warning, the error in
    /// the status, and the being-created annotation removed when nothing is in flight. Returns the error for the
    /// retry.
    pub(super) async fn creation_failed(
        &self,
        content: &VolumeGroupSnapshotContent,
        failure: CreationFailure,
    ) -> String {
        let message = self.warn(content, &failure.event).await;
        let name = content.name_any();
        let status = content_status_with_error(content, &message, now());
        if let Err(err) = self.write_status(&name, &ContentStatusPatch { status }).await {
            tracing::warn!(content = %name, error = %err, "cannot record the group snapshot content's error");
        }
        if failure.release_being_created
            && content.annotations().contains_key(ANN_VOLUME_GROUP_SNAPSHOT_BEING_CREATED)
            && let Err(err) = self.write_annotation(&name, &ContentAnnotationPatch::being_created(false)).await
        {
            tracing::warn!(content = %name, error = %err, "cannot remove the being-created annotation");
        }
        message
    }

    /// Records `event` on the content; returns its message.
    pub(super) async fn warn(&self, content: &VolumeGroupSnapshotContent, event: &PlannedEvent) -> String {
        self.events.record(content, event).await;
        event.message.clone()
    }

    /// The data of `secret` (none: empty), or the text of the error reading it.
    pub(super) async fn secrets(&self, secret: Option<&SecretReference>) -> Result<HashMap<String, String>, String> {
        let Some(secret) = secret else { return Ok(HashMap::new()) };
        secret_data(&self.client, &secret.namespace, &secret.name)
            .await
            .map_err(|e| secret_read_error(secret, &api_error_text(&e)))
    }
}
