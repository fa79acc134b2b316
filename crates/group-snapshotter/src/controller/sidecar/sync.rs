//! One sync of a group content of this driver: deletion first ([`content_deletion`]), then the call
//! [`driver_call`] names: for a dynamic content the first CreateVolumeGroupSnapshot, then the same call again while
//! the group or a member is not ready (idempotent by name); for a pre-provisioned one GetVolumeGroupSnapshot until
//! it is ready and its snapshots are listed. Each sync that still waits for readiness ends in a retry,
//! so the driver is asked again with backoff.

use std::collections::HashMap;

use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use sidecar_runtime::api_error::api_error_text;
use sidecar_runtime::secrets::secret_data;
use sidecar_runtime::update::set_finalizer;
use sidecar_runtime::{Outcome, PlannedEvent};
use snapshot_api::names::FINALIZER_VOLUME_GROUP_SNAPSHOT_CONTENT_BOUND;
use snapshot_api::{SnapshotError, VolumeGroupSnapshotContent};

use super::Shared;
use crate::translate::create_request::{
    CreationFailure, create_group_snapshot_request, creation_failure, request_refused,
};
use crate::translate::deletion::{ContentDeletion, content_deletion, status_after_delete};
use crate::translate::get_request::get_group_snapshot_request;
use crate::translate::names::EVENT_CONTENT_CHECK_FAILED;
use crate::translate::names::{
    ANN_GROUP_DELETION_SECRET_NAME, ANN_GROUP_DELETION_SECRET_NAMESPACE, ANN_VOLUME_GROUP_SNAPSHOT_BEING_CREATED,
    EVENT_GROUP_SNAPSHOT_DELETE_ERROR,
};
use crate::translate::patch::{ContentAnnotationPatch, ContentStatusPatch};
use crate::translate::secrets::get_secret;
use crate::translate::secrets::{SecretReference, secret_from_annotations};
use crate::translate::status::{DriverCall, content_status_after_create, driver_call, needs_refresh};

impl Shared {
    fn api(&self) -> Api<VolumeGroupSnapshotContent> {
        Api::all(self.client.clone())
    }

    /// One sync of the content named `name`.
    pub(super) async fn sync(&self, name: &str) -> Outcome {
        let Some(content) = self.content(name) else { return Outcome::Done };
        if content.spec.driver != self.options.driver {
            return Outcome::Done;
        }
        let content = (*content).clone();
        let result = match content_deletion(&content) {
            Err(event) => Err(self.warn(&content, &event).await),
            Ok(ContentDeletion::NotDeleting) => match driver_call(&content) {
                DriverCall::Create => self.create(content).await,
                DriverCall::Get => self.get(content).await,
                DriverCall::Nothing => Ok(Outcome::Done),
            },
            Ok(ContentDeletion::Wait) => Ok(Outcome::Done),
            // Deleted while a creation was under way: learn the group's id first; the content's update brings it
            // back here for the deletion.
            Ok(ContentDeletion::FinishCreation) => self.create(content).await,
            Ok(ContentDeletion::RemoveFinalizer) => self.release(&content).await,
            Ok(ContentDeletion::DeleteGroupSnapshot(to_delete)) => {
                let secrets = self.secrets(to_delete.secret.as_ref()).await;
                match secrets {
                    Err(error) => Err(self.warn(&content, &delete_error(&content, &error)).await),
                    Ok(secrets) => match self.csi.delete_volume_group_snapshot(to_delete.request(secrets)).await {
                        Err(err) => Err(self.warn(&content, &delete_error(&content, &err.to_string())).await),
                        Ok(_) => {
                            let patch = Patch::Merge(
                                ContentStatusPatch { status: status_after_delete(&content) }.merge_patch(),
                            );
                            match self.api().patch_status(name, &PatchParams::default(), &patch).await {
                                Ok(stored) => self.release(&stored).await,
                                Err(err) => Err(api_error_text(&err)),
                            }
                        }
                    },
                }
            }
        };
        result.unwrap_or_else(|error| {
            tracing::info!(content = name, %error, "group snapshot content sync failed, retrying");
            Outcome::Retry
        })
    }

    /// Nothing is left on the storage side: the content's finalizer goes.
    async fn release(&self, content: &VolumeGroupSnapshotContent) -> Result<Outcome, String> {
        set_finalizer(&self.api(), content, FINALIZER_VOLUME_GROUP_SNAPSHOT_CONTENT_BOUND, false)
            .await
            .map_err(|e| api_error_text(&e))?;
        Ok(Outcome::Done)
    }

    /// CreateVolumeGroupSnapshot for a dynamic content not cut yet, or not ready yet.
    async fn create(&self, content: VolumeGroupSnapshotContent) -> Result<Outcome, String> {
        let first = content.status.as_ref().and_then(|s| s.volume_group_snapshot_handle.as_ref()).is_none();
        let name = content.name_any();
        let class = content.spec.volume_group_snapshot_class_name.as_deref().and_then(|c| self.class(c));
        let secret = secret_from_annotations(
            content.metadata.annotations.as_ref(),
            ANN_GROUP_DELETION_SECRET_NAME,
            ANN_GROUP_DELETION_SECRET_NAMESPACE,
        );
        let secrets = self.secrets(secret.as_ref()).await;
        let request = secrets.and_then(|secrets| {
            create_group_snapshot_request(&content, class.as_deref(), secrets, &self.options.request)
                .map_err(|e| request_refused(&name, &e).event.message)
        });
        let request = match request {
            Ok(request) => request,
            Err(message) => {
                let failure = CreationFailure {
                    release_being_created: true,
                    event: PlannedEvent::warning(
                        crate::translate::names::EVENT_GROUP_SNAPSHOT_CREATION_FAILED,
                        message,
                    ),
                };
                return Err(self.creation_failed(&content, failure).await);
            }
        };
        // Stored before the call: a crash after the driver cut the group leaves it, and deletion waits.
        let content = if first {
            self.api()
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(ContentAnnotationPatch::being_created(true).merge_patch()),
                )
                .await
                .map_err(|e| api_error_text(&e))?
        } else {
            content
        };
        let answer = match self.csi.create_volume_group_snapshot(request).await {
            Ok(response) => response.group_snapshot.unwrap_or_default(),
            Err(err) => return Err(self.creation_failed(&content, creation_failure(&name, &err)).await),
        };
        let stored = self.write_answer(&content, &answer).await?;
        let params = PatchParams::default();
        if stored.annotations().contains_key(ANN_VOLUME_GROUP_SNAPSHOT_BEING_CREATED) {
            self.api()
                .patch(&name, &params, &Patch::Merge(ContentAnnotationPatch::being_created(false).merge_patch()))
                .await
                .map_err(|e| api_error_text(&e))?;
        }
        // Not ready yet: ask again, with backoff.
        Ok(if needs_refresh(&stored) { Outcome::Retry } else { Outcome::Done })
    }

    /// GetVolumeGroupSnapshot for a pre-provisioned content, until it and its members are ready and listed. Nothing
    /// is cut, so no annotation guards the call.
    async fn get(&self, content: VolumeGroupSnapshotContent) -> Result<Outcome, String> {
        let name = content.name_any();
        let class = content.spec.volume_group_snapshot_class_name.as_deref().and_then(|c| self.class(c));
        let secret = get_secret(class.as_ref().and_then(|c| c.spec.parameters.as_ref()), &name);
        let secrets = match secret {
            Ok(secret) => self.secrets(secret.as_ref()).await,
            Err(err) => Err(err.to_string()),
        };
        let check_failed = |message: String| CreationFailure {
            release_being_created: false,
            event: PlannedEvent::warning(EVENT_CONTENT_CHECK_FAILED, message),
        };
        let request = match secrets.map(|secrets| get_group_snapshot_request(&content, secrets)) {
            Ok(Some(request)) => request,
            Ok(None) => return Ok(Outcome::Done),
            Err(message) => return Err(self.creation_failed(&content, check_failed(message)).await),
        };
        let answer = match self.csi.get_volume_group_snapshot(request).await {
            Ok(response) => response.group_snapshot.unwrap_or_default(),
            Err(err) => {
                let message = format!("failed to get group snapshot {name} from the CSI driver: {err}");
                return Err(self.creation_failed(&content, check_failed(message)).await);
            }
        };
        let stored = self.write_answer(&content, &answer).await?;
        Ok(if needs_refresh(&stored) { Outcome::Retry } else { Outcome::Done })
    }

    /// The driver's answer about the group, written into the content's status; returns the content as stored.
    async fn write_answer(
        &self,
        content: &VolumeGroupSnapshotContent,
        answer: &csi_client::proto::VolumeGroupSnapshot,
    ) -> Result<VolumeGroupSnapshotContent, String> {
        let status = content_status_after_create(content.status.as_ref(), answer, k8s_openapi::jiff::Timestamp::now());
        let patch = Patch::Merge(ContentStatusPatch { status }.merge_patch());
        self.api()
            .patch_status(&content.name_any(), &PatchParams::default(), &patch)
            .await
            .map_err(|e| api_error_text(&e))
    }

    /// Records a failed or refused CreateVolumeGroupSnapshot: the Warning, the error in the status, and the
    /// being-created annotation removed when nothing is in flight. Returns the error for the retry.
    async fn creation_failed(&self, content: &VolumeGroupSnapshotContent, failure: CreationFailure) -> String {
        let message = self.warn(content, &failure.event).await;
        let name = content.name_any();
        let params = PatchParams::default();
        let mut status = content.status.clone().unwrap_or_default();
        status.error =
            Some(SnapshotError { time: Some(crate::controller::common::now()), message: Some(message.clone()) });
        if let Err(err) =
            self.api().patch_status(&name, &params, &Patch::Merge(ContentStatusPatch { status }.merge_patch())).await
        {
            tracing::warn!(content = %name, error = %err, "cannot record the group snapshot content's error");
        }
        if failure.release_being_created
            && content.annotations().contains_key(ANN_VOLUME_GROUP_SNAPSHOT_BEING_CREATED)
            && let Err(err) = self
                .api()
                .patch(&name, &params, &Patch::Merge(ContentAnnotationPatch::being_created(false).merge_patch()))
                .await
        {
            tracing::warn!(content = %name, error = %err, "cannot remove the being-created annotation");
        }
        message
    }

    /// Records `event` on the content; returns its message.
    async fn warn(&self, content: &VolumeGroupSnapshotContent, event: &PlannedEvent) -> String {
        self.events.record(content, event).await;
        event.message.clone()
    }

    async fn secrets(&self, secret: Option<&SecretReference>) -> Result<HashMap<String, String>, String> {
        let Some(secret) = secret else { return Ok(HashMap::new()) };
        secret_data(&self.client, &secret.namespace, &secret.name).await.map_err(|e| {
            format!("error getting secret {} in namespace {}: {}", secret.name, secret.namespace, api_error_text(&e))
        })
    }
}

fn delete_error(content: &VolumeGroupSnapshotContent, error: &str) -> PlannedEvent {
    let message = format!("failed to delete group snapshot content {}: {error}", content.name_any());
    PlannedEvent::warning(EVENT_GROUP_SNAPSHOT_DELETE_ERROR, message)
}
