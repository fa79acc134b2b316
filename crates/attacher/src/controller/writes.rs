//! The attacher's writes and reads beyond the caches: the VolumeAttachment's metadata and status (merge patches, as
//! upstream sends them; each answer kept until the cache catches up), the PV's finalizer (a JSON patch), the publish
//! Secret read live, and the shared context's bookkeeping.

use std::collections::HashMap;

use csi_client::CsiClient;
use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::Api;
use kube::api::{Patch, PatchParams};
use sidecar_runtime::WorkQueue;

use super::Shared;
use crate::translate::capabilities::Handling;
use crate::translate::filter::{self, Direction};
use crate::translate::patch::{StatusPatch, VolumeAttachmentPatch, VolumeFinalizerPatch};
use crate::translate::request::{publish_secret, secret_error};
use crate::translate::volume::CsiVolume;

impl Shared {
    /// Finalizers and annotations; returns the VolumeAttachment as stored.
    pub(super) async fn patch_metadata(
        &self,
        attachment: &VolumeAttachment,
        patch: &VolumeAttachmentPatch,
    ) -> Result<VolumeAttachment, kube::Error> {
        self.merge_patch(attachment, patch.merge_patch(), false).await
    }

    /// Through the `status` subresource; returns the VolumeAttachment as stored.
    pub(super) async fn patch_status(
        &self,
        attachment: &VolumeAttachment,
        patch: &StatusPatch,
    ) -> Result<VolumeAttachment, kube::Error> {
        self.merge_patch(attachment, patch.merge_patch(), true).await
    }

    async fn merge_patch(
        &self,
        attachment: &VolumeAttachment,
        body: serde_json::Value,
        status: bool,
    ) -> Result<VolumeAttachment, kube::Error> {
        let api: Api<VolumeAttachment> = Api::all(self.client.clone());
        let name = attachment.metadata.name.as_deref().unwrap_or_default();
        let (params, patch) = (PatchParams::default(), Patch::Merge(body));
        let stored = match status {
            true => api.patch_status(name, &params, &patch).await?,
            false => api.patch(name, &params, &patch).await?,
        };
        self.written.record(stored.clone());
        Ok(stored)
    }

    pub(super) async fn patch_volume_finalizer(
        &self,
        volume: &PersistentVolume,
        patch: &VolumeFinalizerPatch,
    ) -> Result<PersistentVolume, kube::Error> {
        let api: Api<PersistentVolume> = Api::all(self.client.clone());
        let name = volume.metadata.name.as_deref().unwrap_or_default();
        let operations: json_patch::Patch =
            serde_json::from_value(patch.json_patch()).map_err(kube::Error::SerdeError)?;
        api.patch(name, &PatchParams::default(), &Patch::<()>::Json(operations)).await
    }

    /// The volume's publish Secret, read live (values never logged); the error in upstream's words.
    pub(super) async fn publish_secrets(&self, volume: &CsiVolume) -> Result<HashMap<String, String>, String> {
        let Some((namespace, name)) = publish_secret(volume) else { return Ok(HashMap::new()) };
        sidecar_runtime::secrets::secret_data(&self.client, &namespace, &name)
            .await
            .map_err(|e| secret_error(&namespace, &name, &sidecar_runtime::api_error::api_error_text(&e)))
    }

    /// The driver connection, its calls labelled `migrated` for an in-tree PV.
    pub(super) fn csi_for(&self, volume: &CsiVolume) -> CsiClient {
        match volume.migrated {
            true => self.csi.for_migrated_volume(),
            false => self.csi.clone(),
        }
    }

    /// The newest a sync can know of a VolumeAttachment: the cache's, or our last write's.
    pub(super) fn attachment(&self, name: &str) -> Option<std::sync::Arc<VolumeAttachment>> {
        self.stores.attachment(name).map(|cached| self.written.newest(cached))
    }

    /// Queues a VolumeAttachment of this driver where it belongs: the one queue of a driver that attaches nothing,
    /// else attach or detach by whether it is being deleted.
    pub(super) fn route(&self, attachment: &VolumeAttachment) {
        let name = attachment.metadata.name.clone().unwrap_or_default();
        match self.options.handling {
            Handling::MarkAttached => self.attach.add(name),
            Handling::Publish { .. } => self.queue(filter::direction(attachment)).add(name),
        }
    }

    pub(super) fn queue(&self, direction: Direction) -> &WorkQueue<String> {
        match direction {
            Direction::Attach => &self.attach,
            Direction::Detach => &self.detach,
        }
    }

    /// Whether the reconciler asked for this VolumeAttachment; the ask is used up.
    pub(super) fn take_forced(&self, name: &str) -> bool {
        self.forced.lock().unwrap_or_else(|p| p.into_inner()).remove(name)
    }

    pub(super) fn force(&self, name: &str) {
        self.forced.lock().unwrap_or_else(|p| p.into_inner()).insert(name.to_string());
    }
}
