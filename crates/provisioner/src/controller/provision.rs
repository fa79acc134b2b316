//! The claim worker: one claim (by UID) per run. Its in-flight record first, then whether to provision, one
//! attempt, and what a refusal means (the upstream library's `syncClaim` and `provisionClaimOperation`,
//! sig-storage-lib-external-provisioner controller/controller.go).

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::StorageClass;
use sidecar_runtime::Outcome;

use super::{ClaimKey, Shared, attempt, claim_path, in_flight, ownership};
use crate::translate::claim_filter::{ClaimDecision, claim_class_name, claim_decision, library_volume_name};
use crate::translate::clone_source::{clone_protection_releasable, has_clone_protection};
use crate::translate::create_volume::volume_name;
use crate::translate::names::FINALIZER_CLONE_PROTECTION;
use crate::translate::node_deployment::{NodeCheck, node_check};
use crate::translate::pv_in_the_way::holds_claim;
use crate::translate::refusal::{
    ProvisioningState, Refusal, RefusalKind, provisioning_event, provisioning_succeeded_event,
};

pub(super) async fn sync_claim(shared: Arc<Shared>, key: ClaimKey) -> Outcome {
    let p = &shared.provisioner;
    let own_volume = volume_name(&p.volume_name_prefix, &key.uid, p.volume_name_uuid_length).ok();
    // Only the claim's live PV holds its volume: a PV of its name being deleted may have deleted it already.
    let volume_exists =
        own_volume.as_deref().and_then(|name| shared.stores.volume(name)).is_some_and(|pv| holds_claim(&pv, &key.uid));
    let Some(claim) = shared.stores.claim(&key) else {
        if let Some(outcome) = in_flight::sync_in_flight(&shared, &key, None, volume_exists).await {
            return outcome;
        }
        shared.memory.forget_pin(&key.uid);
        return Outcome::Done;
    };
    if has_clone_protection(&claim) {
        let claims = shared.stores.claims_with_data_source();
        if clone_protection_releasable(&claim, claims.iter().map(|c| &**c))
            && let Err(err) = shared.remove_finalizer(&claim, FINALIZER_CLONE_PROTECTION).await
        {
            tracing::warn!(claim = %claim_path(&claim), error = %err, "cannot remove the clone protection");
            return Outcome::Retry;
        }
    }
    if let Some(outcome) = in_flight::sync_in_flight(&shared, &key, Some(&claim), volume_exists).await {
        return outcome;
    }
    if claim.metadata.deletion_timestamp.is_some() {
        return Outcome::Done;
    }
    let class = shared.stores.class(&claim_class_name(&claim));
    let library_volume_exists = shared.stores.volume(&library_volume_name(&claim)).is_some();
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
                    NodeCheck::Compete => return ownership::become_owner(&shared, &key, &class, local).await,
                    NodeCheck::NotOurs(reason) => {
                        tracing::trace!(claim = %claim_path(&claim), %reason, "not this node's claim");
                        return Outcome::Done;
                    }
                }
            }
            provision(&shared, &claim, &class, selected_node.as_deref()).await
        }
    }
}

/// One attempt with its events and metrics, and what its outcome means for the claim.
async fn provision(
    shared: &Shared,
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    node: Option<&str>,
) -> Outcome {
    let started = Instant::now();
    let namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
    let name = claim.metadata.name.as_deref().unwrap_or_default();
    tracing::info!(claim = %claim_path(claim), "provisioning");
    shared.publish(claim, &provisioning_event(namespace, name)).await;

    let class_name = class.metadata.name.as_deref().unwrap_or_default();
    let source = claim.spec.as_ref().and_then(|s| s.data_source.as_ref()).map(|d| d.kind.as_str()).unwrap_or("");
    match attempt::try_provision(shared, claim, class, node).await {
        Ok(volume) => {
            tracing::info!(claim = %claim_path(claim), %volume, "provisioned");
            shared.metrics.provisioned(class_name, source, started.elapsed());
            shared.capacity_changed();
            shared.memory.forget_pin(claim.metadata.uid.as_deref().unwrap_or_default());
            shared.publish(claim, &provisioning_succeeded_event(&volume)).await;
            Outcome::Done
        }
        Err(refusal) => {
            if refusal.retried() {
                shared.metrics.provision_failed(class_name, source);
            }
            // A driver out of space may say so; the published capacity should show it (as upstream's
            // `provisionWrapper` refreshes after a failed attempt, external-provisioner pkg/capacity/provision.go).
            shared.capacity_changed();
            refused(shared, claim, refusal).await
        }
    }
}

/// What follows a failed attempt: the event, the topology pin, a reschedule, and when to try again.
async fn refused(shared: &Shared, claim: &PersistentVolumeClaim, refusal: Refusal) -> Outcome {
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
        shared.publish(claim, &event).await;
    }
    match refusal.state {
        ProvisioningState::Finished => shared.memory.forget_pin(uid),
        ProvisioningState::Reschedule => {
            shared.memory.forget_pin(uid);
            return match shared.remove_selected_node(claim).await {
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
        RefusalKind::Infeasible => Outcome::RetryAfter(shared.slow_retry()),
        RefusalKind::Failed => Outcome::Retry,
    }
}
