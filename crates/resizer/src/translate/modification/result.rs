//! What a ControllerModifyVolume answer writes back (external-resizer pkg/modifycontroller/modify_volume.go,
//! controllerModifyVolumeWithTarget).
//!
//! On success the controller writes `volume_patch` first (so the PV never lags behind the claim), then
//! `claim_patch`, then records `event`. A failed write requeues the claim with backoff, without an event.

use csi_client::{Call, Disposition};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::decide::{ModificationMemoryChange, ModifyPlan};
use crate::translate::call_failure::CallFailure;
use crate::translate::claim::{claim_name, conditions};
use crate::translate::conditions::{merge_modify_conditions, modify_condition, remove_conditions};
use crate::translate::memory::SetChange;
use crate::translate::names::{
    CONDITION_MODIFY_VOLUME_ERROR, CONDITION_MODIFYING_VOLUME, EVENT_VOLUME_MODIFY_FAILED,
    EVENT_VOLUME_MODIFY_SUCCESSFUL, MODIFY_IN_PROGRESS, MODIFY_INFEASIBLE,
};
use crate::translate::patch::{ClaimStatusPatch, ModifyVolumeStatusChange, VolumePatch};
use sidecar_runtime::PlannedEvent;

/// What to write after ControllerModifyVolume.
#[derive(Clone, Debug, PartialEq)]
pub struct ModificationOutcome {
    /// Written first (success only): the PV's `spec.volumeAttributesClassName` = T.
    pub volume_patch: Option<VolumePatch>,
    pub claim_patch: Option<ClaimStatusPatch>,
    /// Recorded once the writes succeeded.
    pub event: Option<PlannedEvent>,
    /// Applied at once.
    pub memory: ModificationMemoryChange,
    /// The attempt failed: log this and requeue with backoff.
    pub error: Option<String>,
}

/// The outcome of `plan`'s ControllerModifyVolume. `claim` is the claim as the plan's `mark` write returned it (or
/// as read, when the plan had no mark).
pub fn modification_outcome(
    claim: &PersistentVolumeClaim,
    plan: &ModifyPlan,
    result: Result<(), CallFailure<'_>>,
    now: &Time,
) -> ModificationOutcome {
    let target = plan.target();
    let error = match result {
        Ok(()) => return modification_succeeded(claim, target),
        Err(CallFailure::NotCalled(text)) => {
            // The driver was not called (a non-gRPC error): no status change, no event.
            return ModificationOutcome {
                volume_patch: None,
                claim_patch: None,
                event: None,
                memory: ModificationMemoryChange::default(),
                error: Some(format!("cannot get error status from modify volume err: {text}")),
            };
        }
        Err(CallFailure::Driver(error)) => error,
    };
    let failure = CallFailure::Driver(error);
    let text = failure.text();
    let mut memory = ModificationMemoryChange::default();
    let disposition = failure.disposition(Call::ControllerModifyVolume);
    let (status, modifying_message, event_message) = if disposition.is_some_and(Disposition::is_final) {
        // A final error: only InvalidArgument is Infeasible; other final errors stay InProgress, no longer uncertain.
        memory.uncertain = SetChange::Remove;
        let infeasible = disposition == Some(Disposition::Infeasible);
        if infeasible {
            memory.slow_set = SetChange::Insert;
        }
        let status = if infeasible { MODIFY_INFEASIBLE } else { MODIFY_IN_PROGRESS };
        (status, format!("Modifying volume to \"{target}\" failed. Waiting for retry."), text.clone())
    } else {
        // Not final: the driver may still be applying T, so T stays locked.
        memory.uncertain = SetChange::Insert;
        (
            MODIFY_IN_PROGRESS,
            format!("Modifying volume to \"{target}\" is still in progress."),
            format!("{text}. Still modifying to VAC {target}"),
        )
    };
    let modifying = modify_condition(CONDITION_MODIFYING_VOLUME, None, modifying_message, now);
    let reason = csi_client::error::go_code_name(error.code()).to_string();
    let error_condition = modify_condition(CONDITION_MODIFY_VOLUME_ERROR, Some(reason), error.go_message(), now);
    let patch = ClaimStatusPatch {
        resource_version: claim.metadata.resource_version.clone(),
        conditions: merge_modify_conditions(conditions(claim), vec![modifying, error_condition]),
        modify_volume_status: Some(ModifyVolumeStatusChange::Set { status, target: None }),
        ..Default::default()
    };
    ModificationOutcome {
        volume_patch: None,
        claim_patch: Some(patch),
        event: Some(PlannedEvent::warning(EVENT_VOLUME_MODIFY_FAILED, event_message)),
        memory,
        error: Some(text),
    }
}

/// Success: PV first, then the claim without a resourceVersion: M cleared, C = T, both modify conditions removed. The
/// uncertain mark is dropped too (upstream leaves it, with no effect until the next InProgress).
fn modification_succeeded(claim: &PersistentVolumeClaim, target: &str) -> ModificationOutcome {
    let volume_patch = VolumePatch { volume_attributes_class_name: Some(target.to_string()), ..Default::default() };
    let claim_patch = ClaimStatusPatch {
        conditions: remove_conditions(conditions(claim), &[CONDITION_MODIFYING_VOLUME, CONDITION_MODIFY_VOLUME_ERROR]),
        modify_volume_status: Some(ModifyVolumeStatusChange::Clear),
        current_volume_attributes_class_name: Some(target.to_string()),
        ..Default::default()
    };
    let event = PlannedEvent::normal(
        EVENT_VOLUME_MODIFY_SUCCESSFUL,
        format!("external resizer modified volume {} with vac {target} successfully", claim_name(claim)),
    );
    ModificationOutcome {
        volume_patch: Some(volume_patch),
        claim_patch: Some(claim_patch),
        event: Some(event),
        memory: ModificationMemoryChange { uncertain: SetChange::Remove, ..Default::default() },
        error: None,
    }
}
