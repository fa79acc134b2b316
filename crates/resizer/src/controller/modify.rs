//! One modification sync of a claim, in the order [`crate::translate::modification::decide`] documents: memory, mark, event,
//! Secret, call, PV patch, claim patch, event.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::VolumeAttributesClass;
use sidecar_runtime::Outcome;

use super::{ClaimKey, Shared, is_conflict};
use crate::translate::call_failure::CallFailure;
use crate::translate::modification::decide::{
    ModificationAction, ModificationConfig, ModificationMemory, decide_modification,
};
use crate::translate::modification::request::{controller_modify_volume_request, modify_secret_reference};
use crate::translate::modification::result::modification_outcome;

pub(super) async fn modify(
    shared: &Shared,
    key: &ClaimKey,
    config: &ModificationConfig,
    claim: PersistentVolumeClaim,
    volume: PersistentVolume,
) -> Outcome {
    let facts = shared.memory.facts(key);
    let memory = ModificationMemory { slow_retry: facts.modify_slow_retry, uncertain: facts.uncertain };
    // The decision borrows classes from the cache: hold the few it may ask for.
    let classes: Vec<Arc<VolumeAttributesClass>> = [
        crate::translate::claim::requested_class(&claim),
        claim
            .status
            .as_ref()
            .and_then(|s| s.modify_volume_status.as_ref())
            .and_then(|m| m.target_volume_attributes_class_name.as_deref())
            .unwrap_or_default(),
    ]
    .iter()
    .filter_map(|name| shared.stores.class(name))
    .collect();
    let lookup = |name: &str| classes.iter().map(|c| c.as_ref()).find(|c| c.metadata.name.as_deref() == Some(name));
    let decision = decide_modification(&claim, &volume, config, &memory, lookup, &Shared::now());
    shared.memory.apply_modification(key, decision.memory);

    let plan = match decision.action {
        ModificationAction::Skip(skip) => {
            tracing::trace!(claim = %key, ?skip, "no modification");
            return Outcome::Done;
        }
        ModificationAction::DelayRetry { after, message } => {
            tracing::info!(claim = %key, "{message}");
            return Outcome::RetryAfter(after);
        }
        ModificationAction::Cancel { patch, event } => {
            if let Some(patch) = &patch
                && let Err(err) = shared.patch_claim(&claim, patch).await
            {
                tracing::warn!(claim = %key, error = %err, "writing the cancellation failed");
                return Outcome::Retry;
            }
            if let Some(event) = &event {
                shared.publish(&claim, event).await;
            }
            return Outcome::Done;
        }
        ModificationAction::WaitForClass { class, patch, event, requeue } => {
            if let Some(patch) = &patch
                && let Err(err) = shared.patch_claim(&claim, patch).await
            {
                if !is_conflict(&err) {
                    tracing::warn!(claim = %key, error = %err, "marking the modification Pending failed");
                }
                return Outcome::Retry;
            }
            shared.publish(&claim, &event).await;
            tracing::info!(claim = %key, %class, "VolumeAttributesClass not found; waiting for it");
            return if requeue { Outcome::Retry } else { Outcome::Done };
        }
        ModificationAction::ClassOfAnotherDriver { class, patch, event } => {
            if let Err(err) = shared.patch_claim(&claim, &patch).await {
                tracing::warn!(claim = %key, error = %err, "marking the modification Infeasible failed");
                return Outcome::Retry;
            }
            shared.publish(&claim, &event).await;
            tracing::warn!(claim = %key, %class, "VolumeAttributesClass names another driver");
            return Outcome::Retry;
        }
        ModificationAction::Modify(plan) => plan,
    };

    let marked = match &plan.mark {
        None => claim,
        Some(mark) => match shared.patch_claim(&claim, mark).await {
            Ok(marked) => marked,
            Err(err) => {
                if !is_conflict(&err) {
                    tracing::warn!(claim = %key, error = %err, "marking the modification InProgress failed");
                }
                return Outcome::Retry;
            }
        },
    };
    if let Some(event) = &plan.event {
        shared.publish(&marked, event).await;
    }
    tracing::info!(claim = %key, class = %plan.target(), "modifying volume");

    let call_error;
    let request = match shared.secret_data(modify_secret_reference(&volume)).await {
        Err(text) => Err(text),
        Ok(secrets) => {
            controller_modify_volume_request(&marked, &volume, &plan.class, config.extra_modify_metadata, secrets)
                .map_err(|e| e.to_string())
        }
    };
    let result = match request {
        Err(text) => Err(CallFailure::NotCalled(text)),
        Ok(request) => match shared.csi.controller_modify_volume(request).await {
            Ok(_) => Ok(()),
            Err(err) => {
                call_error = err;
                Err(CallFailure::Driver(&call_error))
            }
        },
    };
    if matches!(result, Ok(()) | Err(CallFailure::Driver(_))) {
        shared.metrics.modify_attempt(result.is_err());
    }
    let outcome = modification_outcome(&marked, &plan, result, &Shared::now());
    shared.memory.apply_modification(key, outcome.memory);

    if let Some(patch) = &outcome.volume_patch
        && let Err(err) = shared.patch_volume(&volume, patch).await
    {
        tracing::warn!(claim = %key, error = %err, "updating the volume's class failed");
        return Outcome::Retry;
    }
    if let Some(patch) = &outcome.claim_patch
        && let Err(err) = shared.patch_claim(&marked, patch).await
    {
        tracing::warn!(claim = %key, error = %err, "updating the claim's modification status failed");
        return Outcome::Retry;
    }
    if let Some(event) = &outcome.event {
        shared.publish(&marked, event).await;
    }
    match &outcome.error {
        Some(error) => {
            tracing::warn!(claim = %key, class = %plan.target(), %error, "modification failed");
            Outcome::Retry
        }
        None => {
            tracing::info!(claim = %key, class = %plan.target(), "modification done");
            Outcome::Done
        }
    }
}
