//! One expansion sync of a claim: decide ([`crate::translate::expansion::decide`]), carry out the steps before the
//! call, call ControllerExpandVolume, carry out the steps its answer asks for
//! ([`crate::translate::expansion::steps`]).

use csi_client::CallError;
use csi_client::proto::{ControllerExpandVolumeRequest, ControllerExpandVolumeResponse};
use k8s_openapi::api::core::v1::PersistentVolume;
use sidecar_runtime::Outcome;
use sidecar_runtime::time::now;

use super::steps::{Objects, carry_out};
use super::{ClaimKey, Shared};
use crate::translate::call_failure::CallFailure;
use crate::translate::capabilities::Expander;
use crate::translate::claim::volume_name;
use crate::translate::expansion::decide::{ExpansionConfig, ExpansionMemory, decide_expansion};
use crate::translate::expansion::migration::{VolumeOrigin, csi_form};
use crate::translate::expansion::request::{controller_expand_volume_request, expand_secret_reference};
use crate::translate::expansion::result::{ExpandedVolume, expansion_outcome};
use crate::translate::expansion::steps::{ExpandCall, decision_steps, outcome_steps};
use crate::translate::steps::Then;

/// Returns the queue verdict, and the claim and PV as this sync left them.
pub(super) async fn expand(
    shared: &Shared,
    key: &ClaimKey,
    config: &ExpansionConfig,
    mut objects: Objects,
) -> (Outcome, Objects) {
    let facts = shared.memory.facts(key);
    let memory = ExpansionMemory {
        slow_retry: facts.expand_slow_retry,
        final_error: facts.final_error,
        in_use_error: facts.in_use_error,
        used_by_pod: facts.in_use_error && shared.stores.used_by_pod(key),
    };
    let decision = decide_expansion(&objects.claim, &objects.volume, config, &memory, &now());
    let remember = |change| shared.memory.apply_expansion(key, change);
    let call = match carry_out(shared, key, &mut objects, decision_steps(decision), remember).await {
        Then::Finish(outcome) => return (outcome, objects),
        Then::Call(call) => call,
    };

    let answer =
        if call.call_driver { Some(expand_volume(shared, config, &objects.volume, &call).await) } else { None };
    let result = match &answer {
        None => Ok(ExpandedVolume::node_only(&call.target)),
        Some(Ok(Ok(response))) => Ok(ExpandedVolume::from_response(response, &call.target)),
        Some(Ok(Err(error))) => Err(CallFailure::Driver(error)),
        Some(Err(text)) => Err(CallFailure::NotCalled(text.clone())),
    };
    if answer.is_some() {
        shared.metrics.expand_attempt(result.is_err());
    }
    let outcome = expansion_outcome(&objects.claim, &objects.volume, config, result, &now());
    let steps = outcome_steps(outcome, volume_name(&objects.volume), &config.driver_name);
    let Then::Finish(outcome) = carry_out(shared, key, &mut objects, steps, remember).await;
    (outcome, objects)
}

/// ControllerExpandVolume for the PV in its CSI form: the driver's answer, or why it was not called.
async fn expand_volume(
    shared: &Shared,
    config: &ExpansionConfig,
    volume: &PersistentVolume,
    call: &ExpandCall,
) -> Result<Result<ControllerExpandVolumeResponse, CallError>, String> {
    let single_node_multi_writer = match config.expander {
        Expander::Controller { single_node_multi_writer } => single_node_multi_writer,
        Expander::NodeOnly => false,
    };
    let request = expand_request(shared, volume, call, single_node_multi_writer).await?;
    let csi = match call.origin {
        VolumeOrigin::Csi => shared.csi.with_timeout(shared.options.expand_timeout),
        VolumeOrigin::Migrated => shared.csi.with_timeout(shared.options.expand_timeout).for_migrated_volume(),
    };
    Ok(csi.controller_expand_volume(request).await)
}

/// The request for the PV in its CSI form; the error text when it cannot be built.
async fn expand_request(
    shared: &Shared,
    volume: &PersistentVolume,
    call: &ExpandCall,
    single_node_multi_writer: bool,
) -> Result<ControllerExpandVolumeRequest, String> {
    let csi_volume = csi_form(volume, call.origin).map_err(|e| e.to_string())?;
    let secrets = shared.secret_data(expand_secret_reference(&csi_volume)).await?;
    controller_expand_volume_request(&csi_volume, &call.target, single_node_multi_writer, secrets)
        .map_err(|e| e.to_string())
}
