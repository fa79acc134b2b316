//! Which claims need expanding, and to what size (external-resizer pkg/controller/controller.go, syncPVC, and
//! pkg/controller/expand_and_recover.go, expandAndRecover). Recovery from a failed expansion is always on: external-resizer
//! v2.3.0 removed the RecoverVolumeExpansionFailure gate and the rules it switched off.
//!
//! One call of [`decide_expansion`] per sync of a claim; [`super::steps::decision_steps`] turns the decision into the
//! steps the controller carries out, in order:
//! 1. writes [`ExpansionDecision::volume_cleanup`] if any (a failure requeues the claim with backoff);
//! 2. applies [`ExpansionDecision::memory`];
//! 3. follows [`ExpansionDecision::action`]: for [`ExpansionAction::Expand`], writes the plan's `mark` (a Conflict
//!    requeues with backoff), then either records the plan's `in_use` warning and requeues with backoff, or applies
//!    `before_call`, records the `Resizing` event and calls the driver (unless `call_driver` is false), and hands the
//!    answer to [`super::result::expansion_outcome`] with the claim as the `mark` write returned it.

use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::migration::{VolumeOrigin, volume_origin};
use crate::translate::capabilities::Expander;
use crate::translate::claim::{
    allocated_size, annotation, bound_volume_name, claim_key, conditions, has_true_condition, is_bound, requested_size,
    resize_status, status_capacity, volume_annotation, volume_capacity, volume_name,
};
use crate::translate::conditions::{merge_resize_conditions, resize_condition};
use crate::translate::memory::SetChange;
use crate::translate::names::{
    ANN_NODE_EXPANSION_NOT_REQUIRED, ANN_PRE_RESIZE_CAPACITY, CONDITION_FILE_SYSTEM_RESIZE_PENDING, CONDITION_RESIZING,
    CONTROLLER_RESIZE_IN_PROGRESS, CONTROLLER_RESIZE_INFEASIBLE, EVENT_RESIZING, EVENT_VOLUME_RESIZE_FAILED,
    NODE_RESIZE_IN_PROGRESS, NODE_RESIZE_INFEASIBLE, NODE_RESIZE_PENDING,
};
use crate::translate::patch::{ClaimStatusPatch, StorageStatusChange, VolumePatch};
use crate::translate::quantity::{QuantityError, Size};
use sidecar_runtime::PlannedEvent;

/// The expansion settings: the driver, how it expands, and the flags and gates that change the rules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpansionConfig {
    pub driver_name: String,
    pub expander: Expander,
    /// Feature gate AnnotateFsResize (default on).
    pub annotate_fs_resize: bool,
    /// `--handle-volume-inuse-error` (default true).
    pub handle_volume_inuse_error: bool,
}

/// What the controller remembers about the claim. Upstream keys the slow set and the final errors by
/// `namespace/name` and the in-use errors by claim UID.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExpansionMemory {
    /// Time left while the claim is in the slow set (an infeasible expansion less than `--retry-interval-max` ago).
    pub slow_retry: Option<Duration>,
    /// The last ControllerExpandVolume failed with a final error (the user may shrink the request).
    pub final_error: bool,
    /// The last ControllerExpandVolume failed with FailedPrecondition (the driver expands only offline).
    pub in_use_error: bool,
    /// A pod that has not terminated uses the claim (always false without `--handle-volume-inuse-error`).
    pub used_by_pod: bool,
}

/// How the controller's memory of the claim changes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExpansionMemoryChange {
    pub slow_set: SetChange,
    pub final_errors: SetChange,
    pub in_use_errors: SetChange,
}

/// The result of one sync of a claim.
#[derive(Clone, Debug, PartialEq)]
pub struct ExpansionDecision {
    /// Remove `pre-resize-capacity` from the PV: kubelet finished (the claim's capacity reached the PV's). Done before
    /// anything else, for any PV.
    pub volume_cleanup: Option<VolumePatch>,
    /// Apply at once.
    pub memory: ExpansionMemoryChange,
    /// To log as a warning.
    pub warning: Option<String>,
    pub action: ExpansionAction,
}

/// What to do with the claim.
#[derive(Clone, Debug, PartialEq)]
pub enum ExpansionAction {
    /// Nothing to do until the claim changes.
    Skip(Skip),
    /// An infeasible expansion to this size failed recently: requeue after `after`, without a status write or a driver
    /// call. A different size is tried at once.
    DelayRetry {
        after: Duration,
        message: String,
    },
    Expand(Box<ExpandPlan>),
}

/// Why a claim is left alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Skip {
    /// Not Bound, or no `spec.volumeName`.
    NotBound,
    /// The request does not exceed `status.capacity`.
    NoExpansionRequested,
    /// The PV is neither a CSI volume of this driver nor an in-tree one handed over to it.
    OtherDriver,
    /// The PV's claimRef does not name this claim (namespace and UID).
    ClaimRefMismatch,
    /// The controller step is done; kubelet finishes.
    NodeExpansionPending,
    /// The PV is already large enough and FileSystemResizePending is set (a claim written by an API server without
    /// resize statuses).
    AlreadyExpanded,
    /// A size that does not parse.
    InvalidSize { field: &'static str, value: String },
}

/// A ControllerExpandVolume to make.
#[derive(Clone, Debug, PartialEq)]
pub struct ExpandPlan {
    /// The size to ask for (`capacity_range.required_bytes`).
    pub target: Size,
    /// Written first: Resizing, `allocatedResources` and ControllerResizeInProgress, and the
    /// node-expansion-not-required annotation removed. Carries the resourceVersion.
    pub mark: ClaimStatusPatch,
    /// The driver expands only offline and a pod uses the claim: record this warning and requeue with backoff, without
    /// calling the driver.
    pub in_use: Option<PlannedEvent>,
    /// Applied just before the call: the in-use error is forgotten; a new FailedPrecondition brings it back.
    pub before_call: ExpansionMemoryChange,
    /// The Normal `Resizing` event recorded before each call.
    pub resizing: PlannedEvent,
    /// False for a node-only driver: no call, the answer is [`super::result::ExpandedVolume::node_only`].
    pub call_driver: bool,
    /// How the driver comes to expand the PV: a migrated in-tree PV is translated for the request
    /// ([`super::migration::csi_form`]) and the call is counted with `migrated="true"`.
    pub origin: VolumeOrigin,
}

/// The sizes the rules look at (a missing size reads as zero, as in Go).
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimSizes {
    /// S: `spec.resources.requests.storage`.
    pub requested: Size,
    /// `status.capacity.storage`.
    pub capacity: Size,
    /// A: `status.allocatedResources.storage`.
    pub allocated: Option<Size>,
    /// P: the PV's `spec.capacity.storage`.
    pub volume: Size,
}

impl ClaimSizes {
    pub fn read(claim: &PersistentVolumeClaim, volume: &PersistentVolume) -> Result<ClaimSizes, Skip> {
        let parse = |field: &'static str, quantity: Option<&_>| match quantity {
            None => Ok(Size::zero()),
            Some(q) => Size::parse(q).map_err(|QuantityError| Skip::InvalidSize { field, value: q.0.clone() }),
        };
        Ok(ClaimSizes {
            requested: parse("spec.resources.requests.storage", requested_size(claim))?,
            capacity: parse("status.capacity.storage", status_capacity(claim))?,
            allocated: match allocated_size(claim) {
                None => None,
                some => Some(parse("status.allocatedResources.storage", some)?),
            },
            volume: parse("spec.capacity.storage (PersistentVolume)", volume_capacity(volume))?,
        })
    }
}

/// What the target-size rules give.
#[derive(Clone, Debug, PartialEq)]
pub enum Target {
    Expand(Size),
    /// Let kubelet finish the node step.
    NodeExpansionPending,
    /// Older API server: nothing to do while FileSystemResizePending is set.
    AlreadyExpanded,
}

/// Logged when a claim looks written by an API server without allocatedResourceStatuses.
pub const OLD_API_SERVER_WARNING: &str =
    "external-resizer may be running with older version of kubernetes api-server, please upgrade to k8s version 1.32";

/// The size to expand to (external-resizer pkg/controller/expand_and_recover.go,
/// expandAndRecover). `status` is R, "" when unset.
pub fn expansion_target(
    sizes: &ClaimSizes,
    status: &str,
    final_error: bool,
    expands_in_controller: bool,
    file_system_resize_pending: bool,
) -> Target {
    let requested = &sizes.requested;
    let allocated_or = |fallback: &Size| sizes.allocated.clone().unwrap_or_else(|| fallback.clone());
    if sizes.volume.bytes < requested.bytes {
        match status {
            NODE_RESIZE_INFEASIBLE => Target::Expand(allocated_or(requested)),
            NODE_RESIZE_PENDING | NODE_RESIZE_IN_PROGRESS => {
                let target = allocated_or(requested);
                if sizes.volume.bytes >= target.bytes { Target::NodeExpansionPending } else { Target::Expand(target) }
            }
            CONTROLLER_RESIZE_IN_PROGRESS if final_error => Target::Expand(requested.clone()),
            CONTROLLER_RESIZE_IN_PROGRESS => Target::Expand(allocated_or(requested)),
            _ => Target::Expand(requested.clone()),
        }
    } else {
        match status {
            NODE_RESIZE_PENDING | NODE_RESIZE_IN_PROGRESS => Target::NodeExpansionPending,
            NODE_RESIZE_INFEASIBLE if expands_in_controller => Target::Expand(allocated_or(requested)),
            NODE_RESIZE_INFEASIBLE => Target::Expand(requested.clone()),
            CONTROLLER_RESIZE_IN_PROGRESS | CONTROLLER_RESIZE_INFEASIBLE => Target::Expand(allocated_or(requested)),
            "" if sizes.allocated.is_some() => Target::Expand(allocated_or(requested)),
            _ if file_system_resize_pending => Target::AlreadyExpanded,
            _ => Target::Expand(requested.clone()),
        }
    }
}

/// Decides what one sync of `claim` does. `volume` is the PV named by `spec.volumeName` (the controller requeues the
/// claim with backoff while that PV is not in its store).
pub fn decide_expansion(
    claim: &PersistentVolumeClaim,
    volume: &PersistentVolume,
    config: &ExpansionConfig,
    memory: &ExpansionMemory,
    now: &Time,
) -> ExpansionDecision {
    let mut decision = ExpansionDecision {
        volume_cleanup: None,
        memory: ExpansionMemoryChange::default(),
        warning: None,
        action: ExpansionAction::Skip(Skip::NotBound),
    };
    let sizes = match ClaimSizes::read(claim, volume) {
        Ok(sizes) => sizes,
        Err(skip) => {
            decision.action = ExpansionAction::Skip(skip);
            return decision;
        }
    };
    if config.annotate_fs_resize
        && sizes.capacity.bytes >= sizes.volume.bytes
        && volume_annotation(volume, ANN_PRE_RESIZE_CAPACITY).is_some()
    {
        let annotations = [(ANN_PRE_RESIZE_CAPACITY.to_string(), None)].into();
        decision.volume_cleanup = Some(VolumePatch { annotations, ..Default::default() });
    }
    decision.action = match expansion_action(claim, volume, config, memory, &sizes, &mut decision, now) {
        Ok(plan) => ExpansionAction::Expand(Box::new(plan)),
        Err(other) => other,
    };
    decision
}

fn expansion_action(
    claim: &PersistentVolumeClaim,
    volume: &PersistentVolume,
    config: &ExpansionConfig,
    memory: &ExpansionMemory,
    sizes: &ClaimSizes,
    decision: &mut ExpansionDecision,
    now: &Time,
) -> Result<ExpandPlan, ExpansionAction> {
    let skip = |why| Err(ExpansionAction::Skip(why));
    if !is_bound(claim) || bound_volume_name(claim).is_empty() {
        return skip(Skip::NotBound);
    }
    if sizes.requested.bytes <= sizes.capacity.bytes {
        return skip(Skip::NoExpansionRequested);
    }
    let Some(origin) = volume_origin(claim, volume, &config.driver_name) else {
        return skip(Skip::OtherDriver);
    };
    if !claim_ref_matches(claim, volume) {
        return skip(Skip::ClaimRefMismatch);
    }
    let resizing =
        PlannedEvent::normal(EVENT_RESIZING, format!("External resizer is resizing volume {}", volume_name(volume)));
    let in_use = (config.handle_volume_inuse_error && memory.in_use_error && memory.used_by_pod).then(|| {
        PlannedEvent::warning(
            EVENT_VOLUME_RESIZE_FAILED,
            format!(
                "Unable to expand {} because CSI driver {} only supports offline expansion and volume is currently in-use",
                claim_key(claim),
                config.driver_name
            ),
        )
    });
    let before_call = match in_use {
        Some(_) => ExpansionMemoryChange::default(),
        None => ExpansionMemoryChange { in_use_errors: SetChange::Remove, ..Default::default() },
    };
    let call_driver = config.expander.expands_in_controller();
    let file_system_resize_pending = has_true_condition(claim, CONDITION_FILE_SYSTEM_RESIZE_PENDING);
    let version = claim.metadata.resource_version.clone();

    let status = resize_status(claim);
    if status == CONTROLLER_RESIZE_INFEASIBLE {
        decision.memory.slow_set = SetChange::Insert;
    }
    if written_by_old_api_server(sizes, status) {
        decision.warning = Some(OLD_API_SERVER_WARNING.to_string());
    }
    let target = match expansion_target(
        sizes,
        status,
        memory.final_error,
        config.expander.expands_in_controller(),
        file_system_resize_pending,
    ) {
        Target::Expand(target) => target,
        Target::NodeExpansionPending => return skip(Skip::NodeExpansionPending),
        Target::AlreadyExpanded => return skip(Skip::AlreadyExpanded),
    };
    let same_target = sizes.allocated.as_ref().is_some_and(|a| a.bytes == target.bytes);
    if same_target && let Some(after) = memory.slow_retry {
        let message = format!(
            "skipping volume expansion for pvc {}, because expansion previously failed with infeasible error",
            claim_key(claim)
        );
        return Err(ExpansionAction::DelayRetry { after, message });
    }
    // Expanding again to the size already recorded: keep the status and conditions as they are.
    let rewrite_status = !same_target;
    let resizing_condition = resize_condition(CONDITION_RESIZING, None, now);
    let mut mark = ClaimStatusPatch {
        resource_version: version,
        conditions: merge_resize_conditions(conditions(claim), vec![resizing_condition], !rewrite_status),
        allocated_resources: Some(target.quantity.clone()),
        allocated_resource_status: rewrite_status.then_some(StorageStatusChange::Set(CONTROLLER_RESIZE_IN_PROGRESS)),
        ..Default::default()
    };
    if annotation(claim, ANN_NODE_EXPANSION_NOT_REQUIRED).is_some() {
        mark.annotations.insert(ANN_NODE_EXPANSION_NOT_REQUIRED.to_string(), None);
    }
    Ok(ExpandPlan { target, mark, in_use, before_call, resizing, call_driver, origin })
}

/// The PV is already as large as the request, yet the claim has no resize status that explains it: the API server does
/// not know `allocatedResourceStatuses`.
fn written_by_old_api_server(sizes: &ClaimSizes, status: &str) -> bool {
    let known = [
        NODE_RESIZE_PENDING,
        NODE_RESIZE_IN_PROGRESS,
        NODE_RESIZE_INFEASIBLE,
        CONTROLLER_RESIZE_IN_PROGRESS,
        CONTROLLER_RESIZE_INFEASIBLE,
    ];
    sizes.volume.bytes >= sizes.requested.bytes
        && !known.contains(&status)
        && !(status.is_empty() && sizes.allocated.is_some())
}

/// The PV's claimRef names this claim: same namespace and UID.
fn claim_ref_matches(claim: &PersistentVolumeClaim, volume: &PersistentVolume) -> bool {
    let Some(reference) = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else { return false };
    reference.namespace.as_deref().unwrap_or_default() == claim.metadata.namespace.as_deref().unwrap_or_default()
        && reference.uid.as_deref().unwrap_or_default() == claim.metadata.uid.as_deref().unwrap_or_default()
}
