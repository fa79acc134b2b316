//! One modification sync of a claim: decide ([`crate::translate::modification::decide`]), carry out the steps
//! before the call, read the Secret and call ControllerModifyVolume, carry out the steps its answer asks for
//! ([`crate::translate::modification::steps`]).

use std::sync::Arc;

use csi_client::CallError;
use k8s_openapi::api::storage::v1::VolumeAttributesClass;
use sidecar_runtime::Outcome;
use sidecar_runtime::time::now;

use super::steps::{Objects, carry_out};
use super::{ClaimKey, Shared};
use crate::translate::call_failure::CallFailure;
use crate::translate::modification::decide::{
    ModificationConfig, ModificationMemory, ModifyPlan, classes_consulted, decide_modification,
};
use crate::translate::modification::request::{controller_modify_volume_request, modify_secret_reference};
use crate::translate::modification::result::modification_outcome;
use crate::translate::modification::steps::{decision_steps, outcome_steps};
use crate::translate::steps::Then;

pub(super) async fn modify(
    shared: &Shared,
    key: &ClaimKey,
    config: &ModificationConfig,
    mut objects: Objects,
) -> Outcome {
    let facts = shared.memory.facts(key);
    let memory = ModificationMemory { slow_retry: facts.modify_slow_retry, uncertain: facts.uncertain };
    // The decision borrows classes from the cache: hold the few it may ask for.
    let classes: Vec<Arc<VolumeAttributesClass>> =
        classes_consulted(&objects.claim).into_iter().filter_map(|name| shared.stores.class(name)).collect();
    let lookup = |name: &str| classes.iter().map(|c| c.as_ref()).find(|c| c.metadata.name.as_deref() == Some(name));
    let decision = decide_modification(&objects.claim, &objects.volume, config, &memory, lookup, &now());
    let remember = |change| shared.memory.apply_modification(key, change);
    let plan = match carry_out(shared, key, &mut objects, decision_steps(decision), remember).await {
        Then::Finish(outcome) => return outcome,
        Then::Call(plan) => plan,
    };

    let answer = modify_volume(shared, config, &objects, &plan).await;
    let result = match &answer {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) => Err(CallFailure::Driver(error)),
        Err(text) => Err(CallFailure::NotCalled(text.clone())),
    };
    if answer.is_ok() {
        shared.metrics.modify_attempt(result.is_err());
    }
    let outcome = modification_outcome(&objects.claim, &plan, result, &now());
    let steps = outcome_steps(outcome, plan.target());
    let Then::Finish(outcome) = carry_out(shared, key, &mut objects, steps, remember).await;
    outcome
}

/// ControllerModifyVolume with the plan's class: the driver's answer, or why it was not called (the Secret could not
/// be read, or the request not built).
async fn modify_volume(
    shared: &Shared,
    config: &ModificationConfig,
    objects: &Objects,
    plan: &ModifyPlan,
) -> Result<Result<(), CallError>, String> {
    let secrets = shared.secret_data(modify_secret_reference(&objects.volume)).await?;
    let request = controller_modify_volume_request(
        &objects.claim,
        &objects.volume,
        &plan.class,
        config.extra_modify_metadata,
        secrets,
    )
    .map_err(|e| e.to_string())?;
    let csi = shared.csi.with_timeout(shared.options.modify_timeout);
    Ok(csi.controller_modify_volume(request).await.map(|_| ()))
}
