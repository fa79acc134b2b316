//! The claim worker: one claim (by UID) per run — whether to provision, one attempt, and what a refusal means.

use std::time::Instant;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::StorageClass;
use sidecar_runtime::Outcome;

use super::prepare::Prepared;
use super::{ClaimKey, Shared};
use crate::translate::claim_filter::{ClaimDecision, claim_class_name, claim_decision, library_volume_name};
use crate::translate::clone_source::{clone_protection_releasable, has_clone_protection};
use crate::translate::create_volume::volume_name;
use crate::translate::in_flight::{InFlight, driver_is_done, in_flight};
use crate::translate::in_flight_entry::in_flight_entry;
use crate::translate::names::FINALIZER_CLONE_PROTECTION;
use crate::translate::node_deployment::{NodeCheck, node_check, tends_in_flight_volume};
use crate::translate::persistent_volume::persistent_volume;
use crate::translate::refusal::{
    ProvisioningState, Refusal, RefusalKind, create_volume_failure, provisioning_event, provisioning_succeeded_event,
};

pub(super) use sidecar_runtime::api_error::api_error_text;

pub(super) fn namespace_of(claim: &PersistentVolumeClaim) -> &str {
    claim.metadata.namespace.as_deref().unwrap_or_default()
}

pub(super) fn name_of(claim: &PersistentVolumeClaim) -> &str {
    claim.metadata.name.as_deref().unwrap_or_default()
}

/// `namespace/name`, as logs name a claim.
pub(super) fn claim_path(claim: &PersistentVolumeClaim) -> String {
    format!("{}/{}", namespace_of(claim), name_of(claim))
}

impl Shared {
    pub(super) async fn sync_claim(&self, key: &ClaimKey) -> Outcome {
        let p = &self.provisioner;
        let own_volume = volume_name(&p.volume_name_prefix, &key.uid, p.volume_name_uuid_length).ok();
        let volume_exists = own_volume.as_deref().is_some_and(|name| self.stores.volume(name).is_some());
        let Some(claim) = self.stores.claim(key) else {
            if let Some(outcome) = self.sync_journal_entry(key, None, volume_exists).await {
                return outcome;
            }
            self.forget_pin(&key.uid);
            return Outcome::Done;
        };
        if has_clone_protection(&claim) {
            let claims = self.stores.claims.state();
            if clone_protection_releasable(&claim, claims.iter().map(|c| &**c))
                && let Err(err) = self.remove_finalizer(&claim, FINALIZER_CLONE_PROTECTION).await
            {
                tracing::warn!(claim = %claim_path(&claim), error = %err, "cannot remove the clone protection");
                return Outcome::Retry;
            }
        }
        if let Some(outcome) = self.sync_journal_entry(key, Some(&claim), volume_exists).await {
            return outcome;
        }
        let in_flight_here = tends_in_flight_volume(&claim, p);
        match in_flight(&claim, p, volume_exists) {
            InFlight::Release if in_flight_here => return self.release_claim(&claim).await,
            InFlight::Recover if in_flight_here => {
                // Protected by the finalizer, not the journal: the entry is the claim itself, every annotation kept.
                let mut entry = in_flight_entry(&claim, &StorageClass::default());
                entry.annotations = claim.metadata.annotations.clone().unwrap_or_default();
                return self.recover(entry, Some(&claim)).await;
            }
            _ => {}
        }
        if claim.metadata.deletion_timestamp.is_some() {
            return Outcome::Done;
        }
        let class = self.stores.class(&claim_class_name(&claim));
        let library_volume_exists = self.stores.volume(&library_volume_name(&claim)).is_some();
        match claim_decision(&claim, class.as_deref(), p, library_volume_exists) {
            ClaimDecision::Skip(reason) => {
                tracing::trace!(claim = %claim_path(&claim), ?reason, "not provisioning");
                Outcome::Done
            }
            ClaimDecision::Retry(message) => {
                tracing::info!(claim = %claim_path(&claim), %message, "cannot provision yet");
                Outcome::Retry
            }
            ClaimDecision::Provision { selected_node } => {
                let Some(class) = class else { return Outcome::Retry };
                if let Some(local) = &p.node_deployment {
                    match node_check(selected_node.as_deref(), &class, p) {
                        NodeCheck::Provision => {}
                        NodeCheck::Compete => return self.become_owner(key, &class, local).await,
                        NodeCheck::NotOurs(reason) => {
                            tracing::trace!(claim = %claim_path(&claim), %reason, "not this node's claim");
                            return Outcome::Done;
                        }
                    }
                }
                self.provision(&claim, &class, selected_node.as_deref()).await
            }
        }
    }

    pub(super) async fn provision(
        &self,
        claim: &PersistentVolumeClaim,
        class: &StorageClass,
        node: Option<&str>,
    ) -> Outcome {
        let started = Instant::now();
        let namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
        let name = claim.metadata.name.as_deref().unwrap_or_default();
        tracing::info!(claim = %claim_path(claim), "provisioning");
        self.publish(claim, &provisioning_event(namespace, name)).await;

        let class_name = class.metadata.name.as_deref().unwrap_or_default();
        let source = claim.spec.as_ref().and_then(|s| s.data_source.as_ref()).map(|d| d.kind.as_str()).unwrap_or("");
        let attempt = async {
            let migrated = self.is_migrated_class(class);
            let csi_class = self.csi_class(class)?;
            self.try_provision(claim, &csi_class, node, migrated).await
        };
        match attempt.await {
            Ok(volume) => {
                tracing::info!(claim = %claim_path(claim), %volume, "provisioned");
                self.metrics.provisioned(class_name, source, started.elapsed());
                self.capacity_changed();
                self.forget_pin(claim.metadata.uid.as_deref().unwrap_or_default());
                self.publish(claim, &provisioning_succeeded_event(&volume)).await;
                Outcome::Done
            }
            Err(refusal) => {
                if refusal.retried() {
                    self.metrics.provision_failed(class_name, source);
                }
                // A driver out of space may say so; the published capacity should show it (item 67).
                self.capacity_changed();
                self.refused(claim, refusal).await
            }
        }
    }

    /// One attempt: the request, the in-flight record, CreateVolume, the PV. Returns the PV name. `class` is in its CSI
    /// form; `migrated` says whether it was an in-tree class (then the PV is written in the in-tree form).
    pub(super) async fn try_provision(
        &self,
        claim: &PersistentVolumeClaim,
        class: &StorageClass,
        node: Option<&str>,
        migrated: bool,
    ) -> Result<String, Refusal> {
        let Prepared { plan, request, credentials, references, clone_source, snapshot_source } =
            self.prepare(claim, class, node).await?;

        // Beyond upstream: recorded in the API before the call, so a crash cannot lose the volume.
        let protection = self.protect(claim, class).await?;
        if let Some(source) = &clone_source {
            self.protect_clone_source(source).await?;
        }
        if let Some(source) = &snapshot_source {
            self.protect_snapshot(source).await?;
        }
        let may_reschedule = self.provisioner.supports_topology() && node.is_some();
        let response = match self.csi_for(migrated).create_volume(request).await {
            Ok(response) => response,
            Err(err) => {
                let refusal = create_volume_failure(&err, may_reschedule);
                if driver_is_done(refusal.state) {
                    self.unprotect(&protection).await;
                }
                return Err(refusal);
            }
        };
        let volume = response.volume.unwrap_or_default();
        let pv = match persistent_volume(&volume, &plan, &references, claim, class, &self.provisioner) {
            Ok(pv) => pv,
            Err(rejection) => {
                let cleanup = self.delete_rejected_volume(&volume.volume_id, credentials, migrated).await;
                return Err(rejection.refusal(&plan.volume_name, cleanup.err().as_deref()));
            }
        };
        let pv = match self.api_volume(pv, migrated) {
            Ok(pv) => pv,
            Err(message) => {
                // As upstream: the volume cannot be recorded, so it goes; if that fails, try again later.
                let state = match self.delete_rejected_volume(&volume.volume_id, credentials, migrated).await {
                    Ok(()) => ProvisioningState::Finished,
                    Err(_) => ProvisioningState::InBackground,
                };
                return Err(Refusal::failed(state, message));
            }
        };
        self.save_volume(&pv).await?;
        self.volume_saved(&protection);
        if let Some(source) = &snapshot_source {
            self.release_snapshot(claim, source).await;
        }
        Ok(plan.volume_name)
    }

    /// What follows a failed attempt: the event, the topology pin, a reschedule, and when to try again.
    pub(super) async fn refused(&self, claim: &PersistentVolumeClaim, refusal: Refusal) -> Outcome {
        let uid = claim.metadata.uid.as_deref().unwrap_or_default();
        match refusal.kind {
            RefusalKind::Ignored { .. } => {
                tracing::info!(claim = %claim_path(claim), reason = %refusal, "not provisioning")
            }
            _ => {
                tracing::warn!(claim = %claim_path(claim), error = %refusal, state = ?refusal.state, "provisioning failed")
            }
        }
        if let Some(event) = refusal.event() {
            self.publish(claim, &event).await;
        }
        match refusal.state {
            ProvisioningState::Finished => self.forget_pin(uid),
            ProvisioningState::Reschedule => {
                self.forget_pin(uid);
                return match self.remove_selected_node(claim).await {
                    Ok(()) => Outcome::Done,
                    Err(err) => {
                        tracing::warn!(claim = %claim_path(claim), error = %err, "cannot give the claim back to the scheduler");
                        Outcome::Retry
                    }
                };
            }
            ProvisioningState::InBackground | ProvisioningState::NoChange => {}
        }
        match refusal.kind {
            RefusalKind::Ignored { .. } => Outcome::Done,
            RefusalKind::Infeasible => Outcome::RetryAfter(self.slow_retry()),
            RefusalKind::Failed => Outcome::Retry,
        }
    }
}
