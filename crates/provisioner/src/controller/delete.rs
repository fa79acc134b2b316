//! The volume worker: one PV (by name) per run.

use std::time::Instant;

use csi_client::proto::DeleteVolumeRequest;
use k8s_openapi::api::core::v1::PersistentVolume;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use sidecar_runtime::Outcome;

use super::Shared;
use crate::translate::deletion::{
    DeletionSecret, VolumeAction, attached_node, class_deletion_secret, deletion_secret, still_attached_message,
    volume_action, volume_finalizer_patch,
};
use crate::translate::names::EVENT_VOLUME_FAILED_DELETE;
use crate::translate::node_deployment::volume_is_local;
use crate::translate::refusal::{EventType, PlannedEvent};
use crate::translate::secrets::Credentials;

impl Shared {
    pub(super) async fn sync_volume(&self, name: &str) -> Outcome {
        let Some(stored) = self.stores.volume(name) else { return Outcome::Done };
        if stored.metadata.uid.as_ref().is_some_and(|uid| self.deleted_volumes().contains(uid)) {
            return Outcome::Done;
        }
        let (volume, migrated) = match self.csi_volume(&stored) {
            Ok(translated) => translated,
            Err(err) => {
                tracing::warn!(volume = %name, error = %err, "cannot translate the in-tree volume to CSI");
                return Outcome::Retry;
            }
        };
        let result = match volume_action(&volume, &self.provisioner) {
            VolumeAction::Nothing => return Outcome::Done,
            VolumeAction::AddFinalizer => self.patch_volume(name, volume_finalizer_patch(true)).await,
            VolumeAction::RemoveFinalizer => self.patch_volume(name, volume_finalizer_patch(false)).await,
            VolumeAction::Delete { volume_handle } => {
                // Node mode: the volume lives on another node, whose instance deletes it (item 63).
                if let Some(local) = &self.provisioner.node_deployment
                    && !volume_is_local(&volume, local)
                {
                    tracing::trace!(volume = %name, "PV was not provisioned on this node");
                    return Outcome::Done;
                }
                return self.delete(&volume, &volume_handle, migrated).await;
            }
        };
        match result {
            Ok(()) => Outcome::Done,
            Err(err) => {
                tracing::warn!(volume = %name, error = %err, "cannot update the volume's finalizers");
                Outcome::Retry
            }
        }
    }

    /// DeleteVolume, then the PV object, then its finalizer (item 63).
    async fn delete(&self, volume: &PersistentVolume, volume_handle: &str, migrated: bool) -> Outcome {
        let started = Instant::now();
        let name = volume.metadata.name.as_deref().unwrap_or_default();
        let class = volume.spec.as_ref().and_then(|s| s.storage_class_name.clone()).unwrap_or_default();
        if let Err(message) = self.check_detached(name) {
            return self.delete_failed(volume, &class, message).await;
        }
        let secrets = self.deletion_credentials(volume, migrated).await;
        tracing::info!(volume = %name, %volume_handle, "deleting volume");
        let request = DeleteVolumeRequest { volume_id: volume_handle.to_string(), secrets: secrets.into_map() };
        if let Err(err) = self.csi_for(migrated).delete_volume(request).await {
            return self.delete_failed(volume, &class, err.go_text()).await;
        }
        let api: Api<PersistentVolume> = Api::all(self.client.clone());
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(err) => {
                tracing::warn!(volume = %name, error = %err, "volume deleted, but not the PV object yet");
                return Outcome::Retry;
            }
        }
        if let Err(err) = self.patch_volume(name, volume_finalizer_patch(false)).await {
            tracing::warn!(volume = %name, error = %err, "cannot remove the PV finalizer yet");
            return Outcome::Retry;
        }
        if let Some(uid) = &volume.metadata.uid {
            self.deleted_volumes().insert(uid.clone());
        }
        tracing::info!(volume = %name, "volume deleted");
        self.metrics.deleted(&class, started.elapsed());
        self.capacity_changed();
        Outcome::Done
    }

    async fn delete_failed(&self, volume: &PersistentVolume, class: &str, message: String) -> Outcome {
        let name = volume.metadata.name.as_deref().unwrap_or_default();
        tracing::warn!(volume = %name, error = %message, "deletion failed");
        self.metrics.delete_failed(class);
        let event = PlannedEvent { event_type: EventType::Warning, reason: EVENT_VOLUME_FAILED_DELETE, message };
        self.publish(volume, &event).await;
        Outcome::Retry
    }

    /// With PUBLISH_UNPUBLISH_VOLUME, a VolumeAttachment of the PV blocks deletion (item 62). The attachments are
    /// watched (only then), and a detachment queues the PV again.
    fn check_detached(&self, name: &str) -> Result<(), String> {
        let Some(attachments) = &self.stores.attachments else { return Ok(()) };
        let attachments = attachments.state();
        match attached_node(attachments.iter().map(|a| &**a), name) {
            Some(node) => Err(still_attached_message(name, node)),
            None => Ok(()),
        }
    }

    /// The deletion secret from the PV's annotations, else from its StorageClass. A Secret that cannot be read is
    /// logged and the deletion goes on without it (item 61).
    async fn deletion_credentials(&self, volume: &PersistentVolume, migrated: bool) -> Credentials {
        let name = volume.metadata.name.as_deref().unwrap_or_default();
        let secret = match deletion_secret(volume) {
            DeletionSecret::None => None,
            DeletionSecret::Named(secret) => Some(secret),
            DeletionSecret::FromClass => {
                let class = volume.spec.as_ref().and_then(|s| s.storage_class_name.as_deref()).unwrap_or_default();
                self.stores.class(class).and_then(|class| {
                    // An in-tree class names its secrets the in-tree way until translated (upstream does too).
                    let class = match migrated {
                        true => self.csi_class(&class).map(|c| c.into_owned()).unwrap_or_else(|_| (*class).clone()),
                        false => (*class).clone(),
                    };
                    class_deletion_secret(volume, &class).unwrap_or_else(|error| {
                        tracing::warn!(volume = %name, %error, "no deletion secret");
                        None
                    })
                })
            }
        };
        let Some(secret) = secret else { return Credentials::default() };
        match self.read_secret(&secret).await {
            Ok(credentials) => credentials,
            Err(error) => {
                tracing::warn!(volume = %name, secret = %secret.name, namespace = %secret.namespace, %error,
                    "cannot read the deletion secret, deleting without it");
                Credentials::default()
            }
        }
    }

    async fn patch_volume(&self, name: &str, patch: serde_json::Value) -> Result<(), kube::Error> {
        let api: Api<PersistentVolume> = Api::all(self.client.clone());
        match api.patch(name, &PatchParams::default(), &Patch::Strategic(patch)).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(err) => Err(err),
        }
    }
}
