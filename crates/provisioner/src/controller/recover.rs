//! Volumes that must go: the volume of a claim deleted mid-flight (its id recorded in the in-flight journal, or
//! learned by repeating CreateVolume, then deleted) and a volume the provisioner created but cannot use.

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
use crate::translate::data_source::DataSource;
use crate::translate::in_flight::cleanup_rules_out_volume;
use crate::translate::in_flight_entry::InFlightEntry;
use crate::translate::names::EVENT_PROVISIONING_CLEANUP_FAILED;
use crate::translate::refusal::{EventType, PlannedEvent, ProvisioningState, create_volume_failure};
use crate::translate::secrets::Credentials;

/// Attempts at deleting a volume the provisioner created but cannot use (items 28, 29).
pub(super) const REJECTED_VOLUME_DELETE_ATTEMPTS: usize = 5;

impl Shared {
    /// The claim was deleted (or is being deleted) before its PV was written: make sure its volume does not outlive
    /// it. `entry` is the journal's record, or one built from `finalizer_claim` (a claim carrying the
    /// provisioning-protection finalizer, released at the end). With the volume id recorded the volume is deleted
    /// at once; otherwise CreateVolume is repeated with the same name and arguments to learn the id, which is
    /// recorded before DeleteVolume so that a crash in between does not create the volume again.
    pub(super) async fn recover(
        &self,
        mut entry: InFlightEntry,
        finalizer_claim: Option<&PersistentVolumeClaim>,
    ) -> Outcome {
        let claim = entry.claim();
        let path = claim_path(&claim);
        let class_name = claim_class_name(&claim);
        let Some(class) = self.stores.class(&class_name) else {
            let message = cleanup_class_missing(namespace_of(&claim), name_of(&claim), &class_name);
            return self.cleanup_failed(&claim, message).await;
        };
        let migrated = self.is_migrated_class(&class);
        let class = match self.csi_class(&class) {
            Ok(class) => class.into_owned(),
            // A class that cannot be translated never made a request: there is no volume.
            Err(_) => return self.recovered(&entry, finalizer_claim, None).await,
        };
        // The cache may lag: a PV written just before a crash makes the volume the PV's business (its reclaim
        // policy decides), so ask the API itself before deleting anything.
        let p = &self.provisioner;
        if let Ok(name) = volume_name(&p.volume_name_prefix, &entry.uid, p.volume_name_uuid_length) {
            match Api::<PersistentVolume>::all(self.client.clone()).get_opt(&name).await {
                Ok(Some(_)) => return self.recovered(&entry, finalizer_claim, None).await,
                Ok(None) => {}
                Err(err) => return self.cleanup_failed(&claim, api_error_text(&err)).await,
            }
        }
        tracing::info!(claim = %path, volume_id = ?entry.volume_id,
            "claim deleted while its volume was being provisioned: deleting the volume");
        let (credentials, snapshot_source) = match self.prepare(&claim, &class, selected_node(&claim).as_deref()).await
        {
            Ok(prepared) => {
                let csi = self.csi_for(migrated);
                if entry.volume_id.is_none() {
                    match csi.create_volume(prepared.request).await {
                        Ok(response) => {
                            entry.volume_id = Some(response.volume.map(|v| v.volume_id).unwrap_or_default());
                            self.record_volume_id(&entry).await;
                        }
                        Err(err) => {
                            let refusal = create_volume_failure(&err, false);
                            if !cleanup_rules_out_volume(&err) {
                                return self.cleanup_failed(&claim, refusal.message).await;
                            }
                            tracing::info!(claim = %path, error = %refusal, "the driver has no volume for the deleted claim");
                        }
                    }
                }
                (prepared.credentials, prepared.snapshot_source)
            }
            // The volume id is known: delete it even though the request cannot be built any more (its secret
            // cannot be resolved then; a driver that needs one refuses, and the cleanup is tried again).
            Err(refusal) if entry.volume_id.is_some() => {
                tracing::warn!(claim = %path, reason = %refusal, "deleting the recorded volume without secrets");
                (Credentials::default(), None)
            }
            // A request that cannot be built was never sent: there is no volume.
            Err(refusal) if refusal.state == ProvisioningState::Finished => {
                tracing::info!(claim = %path, reason = %refusal, "no volume can exist for the deleted claim");
                return self.recovered(&entry, finalizer_claim, None).await;
            }
            Err(refusal) => return self.cleanup_failed(&claim, refusal.message).await,
        };
        if let Some(volume_id) = entry.volume_id.clone() {
            let request = DeleteVolumeRequest { volume_id: volume_id.clone(), secrets: credentials.into_map() };
            if let Err(err) = self.csi_for(migrated).delete_volume(request).await {
                return self.cleanup_failed(&claim, err.go_text()).await;
            }
            tracing::info!(claim = %path, volume = %volume_id, "deleted the volume of the deleted claim");
        }
        self.recovered(&entry, finalizer_claim, snapshot_source.as_ref()).await
    }

    /// Keeps the volume id in the claim's journal entry. Not fatal when the journal refuses (a claim protected by
    /// the finalizer whose journal is not writable): the cleanup goes on as before, only a crash before its end
    /// would repeat CreateVolume.
    async fn record_volume_id(&self, entry: &InFlightEntry) {
        if let Err(refused) = self.journal.put(&entry.uid, entry.to_json()).await {
            tracing::warn!(claim = %format!("{}/{}", entry.namespace, entry.name), reason = %refused,
                "cannot record the volume id in the in-flight journal");
        }
    }

    /// The volume is gone or belongs to its PV: forget the claim's pin, its snapshot protection, its journal entry
    /// and its finalizer.
    async fn recovered(
        &self,
        entry: &InFlightEntry,
        finalizer_claim: Option<&PersistentVolumeClaim>,
        snapshot_source: Option<&DataSource>,
    ) -> Outcome {
        self.forget_pin(&entry.uid);
        if let Some(source) = snapshot_source {
            self.release_snapshot(&entry.claim(), source).await;
        }
        self.journal.remove(&entry.uid);
        match finalizer_claim {
            Some(claim) => self.release_claim(claim).await,
            None => Outcome::Done,
        }
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
