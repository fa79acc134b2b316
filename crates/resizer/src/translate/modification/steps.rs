//! What one modification sync writes, records and logs, in order, as [`Plan`]s: the steps a decision asks for up to
//! the ControllerModifyVolume call ([`decision_steps`]), and the steps the answer asks for ([`outcome_steps`]).
//!
//! Events name the claim as the sync read it, or as the InProgress mark returned it: the other writes of a
//! modification do not change which claim the events after them are about.

use std::convert::Infallible;

use sidecar_runtime::Outcome;

use super::decide::{ModificationAction, ModificationDecision, ModificationMemoryChange, ModifyPlan};
use super::result::ModificationOutcome;
use crate::translate::steps::{Log, Plan, Step, Then, WriteFailure, remember};

/// The steps of a [`ModificationDecision`]: the memory change, then the action's writes, event and log. A
/// modification ends in the call of its [`ModifyPlan`].
pub fn decision_steps(decision: ModificationDecision) -> Plan<ModificationMemoryChange, Box<ModifyPlan>> {
    let mut steps = Vec::new();
    remember(&mut steps, decision.memory);
    let (log, outcome) = match decision.action {
        ModificationAction::Skip(skip) => (Log::trace(format!("no modification: {skip:?}")), Outcome::Done),
        ModificationAction::DelayRetry { after, message } => (Log::info(message), Outcome::RetryAfter(after)),
        ModificationAction::Cancel { patch, event } => {
            if let Some(patch) = patch {
                let failure = WriteFailure::Warn("writing the cancellation failed");
                steps.push(Step::PatchClaim { patch, adopt: false, failure });
            }
            steps.extend(event.map(Step::Event));
            return Plan { steps, then: Then::Finish(Outcome::Done) };
        }
        ModificationAction::WaitForClass { class, patch, event, requeue } => {
            if let Some(patch) = patch {
                let failure = WriteFailure::WarnUnlessConflict("marking the modification Pending failed");
                steps.push(Step::PatchClaim { patch, adopt: false, failure });
            }
            steps.push(Step::Event(event));
            let log = Log::info(format!("VolumeAttributesClass {class:?} not found; waiting for it"));
            (log, if requeue { Outcome::Retry } else { Outcome::Done })
        }
        ModificationAction::ClassOfAnotherDriver { class, patch, event } => {
            let failure = WriteFailure::Warn("marking the modification Infeasible failed");
            steps.push(Step::PatchClaim { patch, adopt: false, failure });
            steps.push(Step::Event(event));
            (Log::warn(format!("VolumeAttributesClass {class:?} names another driver")), Outcome::Retry)
        }
        ModificationAction::Modify(plan) => {
            if let Some(patch) = plan.mark.clone() {
                let failure = WriteFailure::WarnUnlessConflict("marking the modification InProgress failed");
                steps.push(Step::PatchClaim { patch, adopt: true, failure });
            }
            steps.extend(plan.event.clone().map(Step::Event));
            steps.push(Step::Log(Log::info(format!("modifying volume to class {:?}", plan.target()))));
            return Plan { steps, then: Then::Call(plan) };
        }
    };
    steps.push(Step::Log(log));
    Plan { steps, then: Then::Finish(outcome) }
}

/// The steps of a [`ModificationOutcome`] of the modification to class `target`: the memory change, the PV before
/// the claim (so the PV never lags behind it), the event, and the verdict.
pub fn outcome_steps(outcome: ModificationOutcome, target: &str) -> Plan<ModificationMemoryChange, Infallible> {
    let mut steps = Vec::new();
    remember(&mut steps, outcome.memory);
    if let Some(patch) = outcome.volume_patch {
        steps.push(Step::PatchVolume { patch, failure: WriteFailure::Warn("updating the volume's class failed") });
    }
    if let Some(patch) = outcome.claim_patch {
        let failure = WriteFailure::Warn("updating the claim's modification status failed");
        steps.push(Step::PatchClaim { patch, adopt: false, failure });
    }
    steps.extend(outcome.event.map(Step::Event));
    let (log, verdict) = match outcome.error {
        Some(error) => (Log::warn(format!("modification to class {target:?} failed: {error}")), Outcome::Retry),
        None => (Log::info(format!("modification to class {target:?} done")), Outcome::Done),
    };
    steps.push(Step::Log(log));
    Plan { steps, then: Then::Finish(verdict) }
}
