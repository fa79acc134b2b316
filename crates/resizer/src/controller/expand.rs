//! One expansion sync of a claim, in the order [`crate::translate::expansion::decide`] documents: PV cleanup, memory, mark,
//! event, call, PV patch, claim patch, event.

use csi_client::proto::ControllerExpandVolumeRequest;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use sidecar_runtime::Outcome;

use super::{ClaimKey, Shared, is_conflict};
use crate::translate::call_failure::CallFailure;
use crate::translate::expansion::decide::{
    ExpandPlan, ExpansionAction, ExpansionConfig, ExpansionMemory, Skip, decide_expansion,
};
use crate::translate::expansion::migration::{VolumeOrigin, csi_form};
use crate::translate::expansion::request::{controller_expand_volume_request, expand_secret_reference};
use crate::translate::expansion::result::{ExpandedVolume, expansion_outcome, resize_failed_event};

/// Returns the queue verdict and the claim and PV as this sync left them.
pub(super) async fn expand(
    shared: &Shared,
    key: &ClaimKey,
    config: &ExpansionConfig,
    claim: PersistentVolumeClaim,
    mut volume: PersistentVolume,
) -> (Outcome, PersistentVolumeClaim, PersistentVolume) {
    let facts = shared.memory.facts(key);
    let used_by_pod = facts.in_use_error && shared.stores.used_by_pod(key);
    let memory = ExpansionMemory {
        slow_retry: facts.expand_slow_retry,
        final_error: facts.final_error,
        in_use_error: facts.in_use_error,
        used_by_pod,
    };
    let decision = decide_expansion(&claim, &volume, config, &memory, &Shared::now());
    if let Some(cleanup) = &decision.volume_cleanup {
        match shared.patch_volume(&volume, cleanup).await {
            Ok(updated) => volume = updated,
            Err(err) => {
                tracing::warn!(claim = %key, error = %err, "removing the pre-resize-capacity annotation failed");
                return (Outcome::Retry, claim, volume);
            }
        }
    }
    shared.memory.apply_expansion(key, decision.memory);
    if let Some(warning) = &decision.warning {
        tracing::warn!(claim = %key, "{warning}");
    }
    let plan = match decision.action {
        ExpansionAction::Skip(Skip::InvalidSize { field, value }) => {
            tracing::warn!(claim = %key, field, value, "cannot read a size; not expanding");
            return (Outcome::Done, claim, volume);
        }
        ExpansionAction::Skip(skip) => {
            tracing::trace!(claim = %key, ?skip, "no expansion");
            return (Outcome::Done, claim, volume);
        }
        ExpansionAction::DelayRetry { after, message } => {
            tracing::info!(claim = %key, "{message}");
            return (Outcome::RetryAfter(after), claim, volume);
        }
        ExpansionAction::Expand(plan) => plan,
    };

    let marked = match shared.patch_claim(&claim, &plan.mark).await {
        Ok(marked) => marked,
        Err(err) => {
            if !is_conflict(&err) {
                tracing::warn!(claim = %key, error = %err, "marking the expansion failed");
            }
            return (Outcome::Retry, claim, volume);
        }
    };
    if let Some(in_use) = &plan.in_use {
        tracing::info!(claim = %key, "offline-only expansion waits until no pod uses the claim");
        shared.publish(&marked, in_use).await;
        return (Outcome::Retry, marked, volume);
    }
    shared.memory.apply_expansion(key, plan.before_call);
    shared.publish(&marked, &plan.resizing).await;
    tracing::info!(claim = %key, target = %plan.target.quantity.0, "expanding volume");

    let call_error;
    let result = if plan.call_driver {
        let single_node_multi_writer = match config.expander {
            crate::translate::capabilities::Expander::Controller { single_node_multi_writer } => {
                single_node_multi_writer
            }
            crate::translate::capabilities::Expander::NodeOnly => false,
        };
        let request = expand_request(shared, &volume, &plan, single_node_multi_writer).await;
        let csi = match plan.origin {
            VolumeOrigin::Csi => shared.csi.clone(),
            VolumeOrigin::Migrated => shared.csi.for_migrated_volume(),
        };
        match request {
            Err(text) => Err(CallFailure::NotCalled(text)),
            Ok(request) => match csi.controller_expand_volume(request).await {
                Ok(response) => Ok(ExpandedVolume::from_response(&response, &plan.target)),
                Err(err) => {
                    call_error = err;
                    Err(CallFailure::Driver(&call_error))
                }
            },
        }
    } else {
        Ok(ExpandedVolume::node_only(&plan.target))
    };
    if plan.call_driver {
        shared.metrics.expand_attempt(result.is_err());
    }
    let outcome = expansion_outcome(&marked, &volume, config, result, &Shared::now());
    shared.memory.apply_expansion(key, outcome.memory);

    let mut claim = marked;
    if let Some(patch) = &outcome.volume_patch {
        match shared.patch_volume(&volume, patch).await {
            Ok(updated) => volume = updated,
            Err(err) => {
                write_failed(shared, &claim, &volume, config, &err).await;
                return (Outcome::Retry, claim, volume);
            }
        }
    }
    if let Some(patch) = &outcome.claim_patch {
        match shared.patch_claim(&claim, patch).await {
            Ok(updated) => claim = updated,
            Err(err) => {
                write_failed(shared, &claim, &volume, config, &err).await;
                return (Outcome::Retry, claim, volume);
            }
        }
    }
    shared.publish(&claim, &outcome.event).await;
    if outcome.failed {
        tracing::warn!(claim = %key, message = %outcome.event.message, "expansion failed");
        return (Outcome::Retry, claim, volume);
    }
    tracing::info!(claim = %key, "expansion done: {}", outcome.event.message);
    (Outcome::Done, claim, volume)
}

/// The request for the PV in its CSI form; the error text when it cannot be built (the driver is not called).
async fn expand_request(
    shared: &Shared,
    volume: &PersistentVolume,
    plan: &ExpandPlan,
    single_node_multi_writer: bool,
) -> Result<ControllerExpandVolumeRequest, String> {
    let csi_volume = csi_form(volume, plan.origin).map_err(|e| e.to_string())?;
    let secrets = shared.secret_data(expand_secret_reference(&csi_volume)).await?;
    controller_expand_volume_request(&csi_volume, &plan.target, single_node_multi_writer, secrets)
        .map_err(|e| e.to_string())
}

/// §3 item 30: a failed write is reported as a failed resize.
async fn write_failed(
    shared: &Shared,
    claim: &PersistentVolumeClaim,
    volume: &PersistentVolume,
    config: &ExpansionConfig,
    error: &kube::Error,
) {
    let message = format!(
        "resize volume \"{}\" by resizer \"{}\" failed: {error}",
        crate::translate::claim::volume_name(volume),
        config.driver_name
    );
    tracing::warn!(claim = %crate::translate::claim::claim_key(claim), "{message}");
    shared.publish(claim, &resize_failed_event(message)).await;
}
