//! Volumes that must go: the volume of a claim deleted mid-flight (learned by repeating CreateVolume, then
//! deleted) and a volume the provisioner created but cannot use.

use std::time::Instant;

use csi_client::proto::DeleteVolumeRequest;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::Api;
use sidecar_runtime::Outcome;

use super::Shared;
use super::provision::{api_error_text, claim_path, name_of, namespace_of};
use crate::translate::api_errors::cleanup_class_missing;
use crate::translate::claim_filter::{claim_class_name, selected_node};
use crate::translate::create_volume::volume_name;
use crate::translate::in_flight::driver_is_done;
use crate::translate::names::EVENT_PROVISIONING_CLEANUP_FAILED;
use crate::translate::refusal::{EventType, PlannedEvent, ProvisioningState, create_volume_failure};
use crate::translate::secrets::Credentials;

/// Attempts at deleting a volume the provisioner created but cannot use (items 28, 29).
pub(super) const REJECTED_VOLUME_DELETE_ATTEMPTS: usize = 5;

impl Shared {
    /// The claim was deleted before its PV was written: learn the volume id by repeating CreateVolume with the same
    /// name and arguments, delete the volume, then let the claim go.
    pub(super) async fn recover(&self, claim: &PersistentVolumeClaim) -> Outcome {
        let path = claim_path(claim);
        let class_name = claim_class_name(claim);
        let Some(class) = self.stores.class(&class_name) else {
            let message = cleanup_class_missing(namespace_of(claim), name_of(claim), &class_name);
            return self.cleanup_failed(claim, message).await;
        };
        let migrated = self.is_migrated_class(&class);
        let class = match self.csi_class(&class) {
            Ok(class) => class.into_owned(),
            // A class that cannot be translated never made a request: there is no volume.
            Err(_) => return self.release_claim(claim).await,
        };
        // The cache may lag: a PV written just before a crash makes the volume the PV's business (its reclaim
        // policy decides), so ask the API itself before deleting anything.
        let p = &self.provisioner;
        let uid = claim.metadata.uid.as_deref().unwrap_or_default();
        if let Ok(name) = volume_name(&p.volume_name_prefix, uid, p.volume_name_uuid_length) {
            match Api::<PersistentVolume>::all(self.client.clone()).get_opt(&name).await {
                Ok(Some(_)) => return self.release_claim(claim).await,
                Ok(None) => {}
                Err(err) => return self.cleanup_failed(claim, api_error_text(&err)).await,
            }
        }
        tracing::info!(claim = %path, "claim deleted while its volume was being provisioned: deleting the volume");
        let prepared = match self.prepare(claim, &class, selected_node(claim).as_deref()).await {
            Ok(prepared) => prepared,
            // A request that cannot be built was never sent: there is no volume.
            Err(refusal) if refusal.state == ProvisioningState::Finished => {
                tracing::info!(claim = %path, reason = %refusal, "no volume can exist for the deleted claim");
                return self.release_claim(claim).await;
            }
            Err(refusal) => return self.cleanup_failed(claim, refusal.message).await,
        };
        let volume_name = prepared.request.name.clone();
        let snapshot_source = prepared.snapshot_source.clone();
        let csi = self.csi_for(migrated);
        match csi.create_volume(prepared.request).await {
            Ok(response) => {
                let volume_id = response.volume.map(|v| v.volume_id).unwrap_or_default();
                let request = DeleteVolumeRequest { volume_id, secrets: prepared.credentials.into_map() };
                if let Err(err) = csi.delete_volume(request).await {
                    return self.cleanup_failed(claim, err.go_text()).await;
                }
                tracing::info!(claim = %path, volume = %volume_name, "deleted the volume of the deleted claim");
            }
            Err(err) => {
                let refusal = create_volume_failure(&err, false);
                if !driver_is_done(refusal.state) {
                    return self.cleanup_failed(claim, refusal.message).await;
                }
                tracing::info!(claim = %path, error = %refusal, "the driver has no volume for the deleted claim");
            }
        }
        self.forget_pin(claim.metadata.uid.as_deref().unwrap_or_default());
        if let Some(source) = &snapshot_source {
            self.release_snapshot(claim, source).await;
        }
        self.release_claim(claim).await
    }

    pub(super) async fn cleanup_failed(&self, claim: &PersistentVolumeClaim, message: String) -> Outcome {
        tracing::warn!(claim = %claim_path(claim), error = %message, "cleanup of a deleted claim's volume failed");
        let event = PlannedEvent { event_type: EventType::Warning, reason: EVENT_PROVISIONING_CLEANUP_FAILED, message };
        self.publish(claim, &event).await;
        Outcome::Retry
    }

    /// DeleteVolume for a volume that cannot be used, a few times within one timeout.
    pub(super) async fn delete_rejected_volume(
        &self,
        volume_id: &str,
        credentials: Credentials,
        migrated: bool,
    ) -> Result<(), String> {
        let secrets = credentials.into_map();
        let deadline = Instant::now() + self.csi.timeout();
        let mut last = String::new();
        for _ in 0..REJECTED_VOLUME_DELETE_ATTEMPTS {
            let request = DeleteVolumeRequest { volume_id: volume_id.to_string(), secrets: secrets.clone() };
            match self.csi_for(migrated).delete_volume(request).await {
                Ok(_) => return Ok(()),
                Err(err) => last = err.go_text(),
            }
            if Instant::now() >= deadline {
                break;
            }
        }
        Err(last)
    }

    pub(super) async fn release_claim(&self, claim: &PersistentVolumeClaim) -> Outcome {
        match self.remove_claim_finalizer(claim).await {
            Ok(()) => Outcome::Done,
            Err(err) => {
                tracing::warn!(claim = %claim_path(claim), error = %err, "cannot remove the provisioning finalizer");
                Outcome::Retry
            }
        }
    }
}
