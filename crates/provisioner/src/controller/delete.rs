//! The volume worker: one PV (by name) per run. The reclaim-policy finalizer, then DeleteVolume, the PV object and
//! its finalizer (the upstream library's `syncVolume` and `deleteVolumeOperation`,
//! sig-storage-lib-external-provisioner controller/controller.go; external-provisioner `Delete`).

use std::sync::Arc;
use std::time::Instant;

use csi_client::proto::DeleteVolumeRequest;
use k8s_openapi::api::core::v1::PersistentVolume;
use sidecar_runtime::Outcome;

use super::Shared;
use crate::translate::deletion::{
    DeletionSecret, VolumeAction, attached_node, class_deletion_secret, deletion_secret, volume_action,
    volume_finalizer_patch, waiting_for_detach_event,
};
use crate::translate::migration::{csi_class, csi_volume};
use crate::translate::names::EVENT_VOLUME_FAILED_DELETE;
use crate::translate::node_deployment::volume_is_local;
use crate::translate::refusal::{EventType, PlannedEvent};
use crate::translate::secrets::Credentials;

pub(super) async fn sync_volume(shared: Arc<Shared>, name: String) -> Outcome {
    let name = name.as_str();
    let Some(stored) = shared.stores.volume(name) else { return Outcome::Done };
    if stored.metadata.uid.as_ref().is_some_and(|uid| shared.memory.was_deleted(uid)) {
        return Outcome::Done;
    }
    let (volume, migrated) = match csi_volume(&shared.provisioner, &stored) {
        Ok(translated) => translated,
        Err(err) => {
            tracing::warn!(volume = %name, error = %err, "cannot translate the in-tree volume to CSI");
            return Outcome::Retry;
        }
    };
    let result = match volume_action(&volume, &shared.provisioner) {
        VolumeAction::Nothing => return Outcome::Done,
        VolumeAction::AddFinalizer => shared.patch_volume(name, volume_finalizer_patch(true)).await,
        VolumeAction::RemoveFinalizer => shared.patch_volume(name, volume_finalizer_patch(false)).await,
        VolumeAction::Delete { volume_handle } => {
            // Node mode: a volume whose node affinity names another node is that node's instance's to delete.
            if let Some(local) = &shared.provisioner.node_deployment
                && !volume_is_local(&volume, local)
            {
                tracing::trace!(volume = %name, "PV was not provisioned on this node");
                return Outcome::Done;
            }
            return delete(&shared, &volume, &volume_handle, migrated).await;
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

/// DeleteVolume, then the PV object, then its finalizer, in upstream's order (`deleteVolumeOperation`).
async fn delete(shared: &Shared, volume: &PersistentVolume, volume_handle: &str, migrated: bool) -> Outcome {
    let started = Instant::now();
    let name = volume.metadata.name.as_deref().unwrap_or_default();
    let class = volume.spec.as_ref().and_then(|s| s.storage_class_name.clone()).unwrap_or_default();
    if let Some(waiting) = attached_event(shared, name) {
        // Postponed, not failed: no failed-deletion metric, a Normal event, and another try with backoff.
        tracing::info!(volume = %name, reason = %waiting.message, "deletion postponed");
        shared.publish(volume, &waiting).await;
        return Outcome::Retry;
    }
    let secrets = deletion_credentials(shared, volume, migrated).await;
    tracing::info!(volume = %name, %volume_handle, "deleting volume");
    let request = DeleteVolumeRequest { volume_id: volume_handle.to_string(), secrets: secrets.into_map() };
    if let Err(err) = shared.csi_for(migrated).delete_volume(request).await {
        return delete_failed(shared, volume, &class, err.go_text()).await;
    }
    if let Err(err) = shared.delete_volume_object(name).await {
        tracing::warn!(volume = %name, error = %err, "volume deleted, but not the PV object yet");
        return Outcome::Retry;
    }
    if let Err(err) = shared.patch_volume(name, volume_finalizer_patch(false)).await {
        tracing::warn!(volume = %name, error = %err, "cannot remove the PV finalizer yet");
        return Outcome::Retry;
    }
    if let Some(uid) = &volume.metadata.uid {
        shared.memory.volume_deleted(uid);
    }
    tracing::info!(volume = %name, "volume deleted");
    shared.metrics.deleted(&class, started.elapsed());
    shared.capacity_changed();
    Outcome::Done
}

async fn delete_failed(shared: &Shared, volume: &PersistentVolume, class: &str, message: String) -> Outcome {
    let name = volume.metadata.name.as_deref().unwrap_or_default();
    tracing::warn!(volume = %name, error = %message, "deletion failed");
    shared.metrics.delete_failed(class);
    let event = PlannedEvent { event_type: EventType::Warning, reason: EVENT_VOLUME_FAILED_DELETE, message };
    shared.publish(volume, &event).await;
    Outcome::Retry
}

/// With PUBLISH_UNPUBLISH_VOLUME, a VolumeAttachment of the PV blocks deletion (external-provisioner
/// `canDeleteVolume`): the event to record while it does. The attachments are watched (only then), and a detachment
/// queues the PV again.
fn attached_event(shared: &Shared, name: &str) -> Option<PlannedEvent> {
    let attachments = shared.stores.attachments.as_ref()?.state();
    attached_node(attachments.iter().map(|a| &**a), name).map(|node| waiting_for_detach_event(name, node))
}

/// The deletion secret from the PV's annotations, else from its StorageClass. A Secret that cannot be read is
/// logged and the deletion goes on without it (external-provisioner `handleSecretsForDeletion`).
async fn deletion_credentials(shared: &Shared, volume: &PersistentVolume, migrated: bool) -> Credentials {
    let name = volume.metadata.name.as_deref().unwrap_or_default();
    let secret = match deletion_secret(volume) {
        DeletionSecret::None => None,
        DeletionSecret::Named(secret) => Some(secret),
        DeletionSecret::FromClass => {
            let class = volume.spec.as_ref().and_then(|s| s.storage_class_name.as_deref()).unwrap_or_default();
            shared.stores.class(class).and_then(|class| {
                // An in-tree class names its secrets the in-tree way until translated (upstream does too).
                let class = match migrated {
                    true => csi_class(&shared.provisioner, &class)
                        .map(|c| c.into_owned())
                        .unwrap_or_else(|_| (*class).clone()),
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
    match shared.read_secret(&secret).await {
        Ok(credentials) => credentials,
        Err(error) => {
            tracing::warn!(volume = %name, secret = %secret.name, namespace = %secret.namespace, %error,
                "cannot read the deletion secret, deleting without it");
            Credentials::default()
        }
    }
}
