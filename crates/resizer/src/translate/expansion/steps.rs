//! What one expansion sync writes, records and logs, in order, as [`Plan`]s: the steps a decision asks for up to the
//! ControllerExpandVolume call ([`decision_steps`]), and the steps the answer asks for ([`outcome_steps`]).

use std::convert::Infallible;

use sidecar_runtime::Outcome;

use super::decide::{ExpansionAction, ExpansionDecision, ExpansionMemoryChange, Skip};
use super::migration::VolumeOrigin;
use super::result::ExpansionOutcome;
use crate::translate::quantity::Size;
use crate::translate::steps::{Log, Plan, Step, Then, WriteFailure, remember};

/// The ControllerExpandVolume to make once the steps before it are done.
#[derive(Clone, Debug, PartialEq)]
pub struct ExpandCall {
    /// `capacity_range.required_bytes`.
    pub target: Size,
    /// False for a node-only driver: no call, the PV takes the target size and kubelet expands.
    pub call_driver: bool,
    pub origin: VolumeOrigin,
}

/// The steps of [`ExpansionDecision`]: the pre-resize-capacity cleanup, the memory change, then the action. An
/// expansion writes its mark (the claim as written is what the call and its rules see), records the offline-only
/// warning and stops while a pod uses the claim, or else records `Resizing` and calls the driver.
pub fn decision_steps(decision: ExpansionDecision) -> Plan<ExpansionMemoryChange, ExpandCall> {
    let mut steps = Vec::new();
    if let Some(patch) = decision.volume_cleanup {
        let failure = WriteFailure::Warn("removing the pre-resize-capacity annotation failed");
        steps.push(Step::PatchVolume { patch, failure });
    }
    remember(&mut steps, decision.memory);
    if let Some(warning) = decision.warning {
        steps.push(Step::Log(Log::warn(warning)));
    }
    let finish = |mut steps: Vec<_>, log, outcome| {
        steps.push(Step::Log(log));
        Plan { steps, then: Then::Finish(outcome) }
    };
    let plan = match decision.action {
        ExpansionAction::Skip(Skip::InvalidSize { field, value }) => {
            let log = Log::warn(format!("cannot read a size; not expanding: {field} is {value:?}"));
            return finish(steps, log, Outcome::Done);
        }
        ExpansionAction::Skip(skip) => {
            return finish(steps, Log::trace(format!("no expansion: {skip:?}")), Outcome::Done);
        }
        ExpansionAction::DelayRetry { after, message } => {
            return finish(steps, Log::info(message), Outcome::RetryAfter(after));
        }
        ExpansionAction::Expand(plan) => *plan,
    };
    let failure = WriteFailure::WarnUnlessConflict("marking the expansion failed");
    steps.push(Step::PatchClaim { patch: plan.mark, adopt: true, failure });
    if let Some(in_use) = plan.in_use {
        steps.push(Step::Log(Log::info("offline-only expansion waits until no pod uses the claim")));
        steps.push(Step::Event(in_use));
        return Plan { steps, then: Then::Finish(Outcome::Retry) };
    }
    remember(&mut steps, plan.before_call);
    steps.push(Step::Event(plan.resizing));
    steps.push(Step::Log(Log::info(format!("expanding volume to {}", plan.target.quantity.0))));
    let call = ExpandCall { target: plan.target, call_driver: plan.call_driver, origin: plan.origin };
    Plan { steps, then: Then::Call(call) }
}

/// The steps of an attempt's [`ExpansionOutcome`] for PV `volume` and driver `driver`: the memory change, the PV,
/// then the claim (the claim as written is what the sync goes on with), the event, and the verdict. A failed write
/// is itself a failed resize.
pub fn outcome_steps(outcome: ExpansionOutcome, volume: &str, driver: &str) -> Plan<ExpansionMemoryChange, Infallible> {
    let mut steps = Vec::new();
    remember(&mut steps, outcome.memory);
    let failure = WriteFailure::ResizeFailed { volume: volume.to_string(), driver: driver.to_string() };
    if let Some(patch) = outcome.volume_patch {
        steps.push(Step::PatchVolume { patch, failure: failure.clone() });
    }
    if let Some(patch) = outcome.claim_patch {
        steps.push(Step::PatchClaim { patch, adopt: true, failure });
    }
    let (log, verdict) = if outcome.failed {
        (Log::warn(format!("expansion failed: {}", outcome.event.message)), Outcome::Retry)
    } else {
        (Log::info(format!("expansion done: {}", outcome.event.message)), Outcome::Done)
    };
    steps.push(Step::Event(outcome.event));
    steps.push(Step::Log(log));
    Plan { steps, then: Then::Finish(verdict) }
}
