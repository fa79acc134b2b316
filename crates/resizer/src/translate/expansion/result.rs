//! What an expansion attempt writes back (external-resizer pkg/controller/expand_and_recover.go, callResizeOnPlugin):
//! the PV's capacity, the claim's status, the annotations, the event, and the controller's memory of the claim.
//!
//! On success the controller writes `volume_patch` first, then `claim_patch`, then records `event`
//! ([`super::steps::outcome_steps`]). If a write fails, it records [`resize_failed_event`] with the write error instead
//! and requeues with backoff.

use csi_client::proto::ControllerExpandVolumeResponse;
use csi_client::{Call, Disposition};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tonic::Code;

use super::decide::{ExpansionConfig, ExpansionMemoryChange};
use crate::translate::call_failure::{CallFailure, resize_failed_event, resize_failed_message};
use crate::translate::claim::{annotation, conditions, resize_status, status_capacity, volume_annotation, volume_name};
use crate::translate::conditions::{merge_resize_conditions, remove_conditions, resize_condition};
use crate::translate::memory::SetChange;
use crate::translate::names::{
    ANN_NODE_EXPANSION_NOT_REQUIRED, ANN_PRE_RESIZE_CAPACITY, CONDITION_CONTROLLER_RESIZE_ERROR,
    CONDITION_FILE_SYSTEM_RESIZE_PENDING, CONTROLLER_RESIZE_INFEASIBLE, EVENT_FILE_SYSTEM_RESIZE_REQUIRED,
    EVENT_VOLUME_RESIZE_SUCCESSFUL, NODE_RESIZE_PENDING, RESIZE_CONDITIONS,
};
use crate::translate::patch::{ClaimStatusPatch, StorageStatusChange, VolumePatch};
use crate::translate::quantity::Size;
use sidecar_runtime::PlannedEvent;

/// The volume after a successful controller step.
#[derive(Clone, Debug, PartialEq)]
pub struct ExpandedVolume {
    /// Written to the PV's `spec.capacity.storage` (and to the claim's capacity when no node step remains).
    pub capacity: Size,
    pub node_expansion_required: bool,
}

impl ExpandedVolume {
    /// What ControllerExpandVolume answered. A driver that answers `capacity_bytes` 0 (or less) gets the requested
    /// size instead: the CSI spec makes the field required and the volume at least that large, and upstream would
    /// write 0, which the API server refuses forever (issues #225, #226). A deliberate difference.
    pub fn from_response(response: &ControllerExpandVolumeResponse, target: &Size) -> ExpandedVolume {
        let capacity =
            if response.capacity_bytes > 0 { Size::from_bytes(response.capacity_bytes) } else { target.clone() };
        ExpandedVolume { capacity, node_expansion_required: response.node_expansion_required }
    }

    /// A node-only driver: the PV takes the target size and kubelet expands (external-resizer
    /// pkg/resizer/trivial_resizer.go).
    pub fn node_only(target: &Size) -> ExpandedVolume {
        ExpandedVolume { capacity: target.clone(), node_expansion_required: true }
    }
}

/// What to write after an attempt.
#[derive(Clone, Debug, PartialEq)]
pub struct ExpansionOutcome {
    /// Written first (success only).
    pub volume_patch: Option<VolumePatch>,
    pub claim_patch: Option<ClaimStatusPatch>,
    /// Recorded once the writes succeeded.
    pub event: PlannedEvent,
    /// Applied at once.
    pub memory: ExpansionMemoryChange,
    /// The attempt failed: requeue with backoff (1 s → `--retry-interval-max`).
    pub failed: bool,
}

/// The outcome of an attempt of an [`super::decide::ExpandPlan`]. `claim` is the claim as the plan's `mark` write
/// returned it; `result` is the answer ([`ExpandedVolume::from_response`] or [`ExpandedVolume::node_only`]) or why
/// there is none.
pub fn expansion_outcome(
    claim: &PersistentVolumeClaim,
    volume: &PersistentVolume,
    config: &ExpansionConfig,
    result: Result<ExpandedVolume, CallFailure<'_>>,
    now: &Time,
) -> ExpansionOutcome {
    match result {
        Ok(expanded) => expansion_succeeded(claim, volume, config, expanded, now),
        Err(failure) => expansion_failed(claim, volume, config, failure, now),
    }
}

fn expansion_succeeded(
    claim: &PersistentVolumeClaim,
    volume: &PersistentVolume,
    config: &ExpansionConfig,
    expanded: ExpandedVolume,
    now: &Time,
) -> ExpansionOutcome {
    let mut volume_patch = VolumePatch { capacity: Some(expanded.capacity.quantity.clone()), ..Default::default() };
    if expanded.node_expansion_required
        && config.annotate_fs_resize
        && volume_annotation(volume, ANN_PRE_RESIZE_CAPACITY).is_none()
    {
        let before = status_capacity(claim).map(|q| q.0.clone()).unwrap_or_else(|| Size::zero().quantity.0);
        volume_patch.annotations.insert(ANN_PRE_RESIZE_CAPACITY.to_string(), Some(before));
    }
    let mut claim_patch =
        ClaimStatusPatch { resource_version: claim.metadata.resource_version.clone(), ..Default::default() };
    let event = if expanded.node_expansion_required {
        // The node step remains: FileSystemResizePending, capacity untouched (kubelet updates it). The other resize
        // conditions are kept.
        let pending = resize_condition(
            CONDITION_FILE_SYSTEM_RESIZE_PENDING,
            Some("Waiting for user to (re-)start a pod to finish file system resize of volume on node.".to_string()),
            now,
        );
        claim_patch.conditions = merge_resize_conditions(conditions(claim), vec![pending], true);
        claim_patch.allocated_resource_status = Some(StorageStatusChange::Set(NODE_RESIZE_PENDING));
        if annotation(claim, ANN_NODE_EXPANSION_NOT_REQUIRED).is_some() {
            claim_patch.annotations.insert(ANN_NODE_EXPANSION_NOT_REQUIRED.to_string(), None);
        }
        PlannedEvent::normal(EVENT_FILE_SYSTEM_RESIZE_REQUIRED, "Require file system resize of volume on node")
    } else {
        // Done in the controller: the capacity, no resize condition, no resize status, and kubelet told to skip the
        // node step.
        claim_patch.capacity = Some(expanded.capacity.quantity.clone());
        claim_patch.conditions = remove_conditions(conditions(claim), &RESIZE_CONDITIONS);
        if !resize_status(claim).is_empty() {
            claim_patch.allocated_resource_status = Some(StorageStatusChange::Remove);
        }
        if annotation(claim, ANN_NODE_EXPANSION_NOT_REQUIRED).is_none() {
            claim_patch.annotations.insert(ANN_NODE_EXPANSION_NOT_REQUIRED.to_string(), Some("true".to_string()));
        }
        PlannedEvent::normal(EVENT_VOLUME_RESIZE_SUCCESSFUL, "Resize volume succeeded")
    };
    let memory =
        ExpansionMemoryChange { slow_set: SetChange::Remove, final_errors: SetChange::Remove, ..Default::default() };
    ExpansionOutcome { volume_patch: Some(volume_patch), claim_patch: Some(claim_patch), event, memory, failed: false }
}

fn expansion_failed(
    claim: &PersistentVolumeClaim,
    volume: &PersistentVolume,
    config: &ExpansionConfig,
    failure: CallFailure<'_>,
    now: &Time,
) -> ExpansionOutcome {
    let text = failure.text();
    let mut memory = ExpansionMemoryChange::default();
    if failure.code() == Some(Code::FailedPrecondition) {
        // FailedPrecondition: the driver may expand only offline.
        memory.in_use_errors = SetChange::Insert;
    }
    let mut claim_patch = None;
    if failure.is_final(Call::ControllerExpandVolume) {
        // A final error (remembered, so the user may shrink the request): ControllerResizeError, and
        // ControllerResizeInfeasible when infeasible; written without a resourceVersion, so a slightly stale claim
        // still records the failure.
        memory.final_errors = SetChange::Insert;
        let error =
            resize_condition(CONDITION_CONTROLLER_RESIZE_ERROR, Some(format!("failed to expand pvc with {text}")), now);
        let mut patch = ClaimStatusPatch {
            conditions: merge_resize_conditions(conditions(claim), vec![error], true),
            ..Default::default()
        };
        if failure.disposition(Call::ControllerExpandVolume) == Some(Disposition::Infeasible) {
            patch.allocated_resource_status = Some(StorageStatusChange::Set(CONTROLLER_RESIZE_INFEASIBLE));
        } else {
            memory.slow_set = SetChange::Remove;
        }
        claim_patch = Some(patch);
    } else {
        // Not final: the driver may still be working, so the same size is retried.
        memory.slow_set = SetChange::Remove;
        memory.final_errors = SetChange::Remove;
    }
    let message = resize_failed_message(volume_name(volume), &config.driver_name, &text);
    ExpansionOutcome { volume_patch: None, claim_patch, event: resize_failed_event(message), memory, failed: true }
}
