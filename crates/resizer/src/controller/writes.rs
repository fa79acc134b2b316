//! The resizer's writes and reads beyond the caches: claim status and PV patches (remembered until the caches catch
//! up), events, and Secrets read live.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::Api;
use kube::api::{Patch, PatchParams};
use sidecar_runtime::PlannedEvent;

use super::Shared;
use crate::translate::patch::{ClaimStatusPatch, VolumePatch};
use crate::translate::secret_ref::SecretRef;

impl Shared {
    pub(super) async fn publish(&self, claim: &PersistentVolumeClaim, event: &PlannedEvent) {
        self.events.record(claim, event).await;
    }

    /// Writes `patch` through the claim's `status` subresource; returns the claim as stored.
    pub(super) async fn patch_claim(
        &self,
        claim: &PersistentVolumeClaim,
        patch: &ClaimStatusPatch,
    ) -> Result<PersistentVolumeClaim, kube::Error> {
        if patch.is_empty() {
            return Ok(claim.clone());
        }
        let namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), namespace);
        let name = crate::translate::claim::claim_name(claim);
        let patched =
            api.patch_status(name, &PatchParams::default(), &Patch::Strategic(patch.strategic_merge_patch())).await?;
        self.written_claims.record(patched.clone());
        Ok(patched)
    }

    pub(super) async fn patch_volume(
        &self,
        volume: &PersistentVolume,
        patch: &VolumePatch,
    ) -> Result<PersistentVolume, kube::Error> {
        if patch.is_empty() {
            return Ok(volume.clone());
        }
        let api: Api<PersistentVolume> = Api::all(self.client.clone());
        let name = crate::translate::claim::volume_name(volume);
        let patched =
            api.patch(name, &PatchParams::default(), &Patch::Strategic(patch.strategic_merge_patch())).await?;
        self.written_volumes.record(patched.clone());
        Ok(patched)
    }

    /// A live GET of the Secret (as upstream, no cache). Values are never logged. The error names the Secret in
    /// client-go's words (`secrets "x" not found`), never the Debug form of the API's answer.
    pub(super) async fn secret_data(&self, reference: Option<SecretRef>) -> Result<HashMap<String, String>, String> {
        let Some(reference) = reference else { return Ok(HashMap::new()) };
        sidecar_runtime::secrets::secret_data(&self.client, &reference.namespace, &reference.name)
            .await
            .map_err(|e| reference.read_error(sidecar_runtime::api_error::api_error_text(&e)))
    }
}
