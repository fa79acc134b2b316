//! The KEP-3751 state machine: what one sync of a claim does (external-resizer pkg/modifycontroller/modify_volume.go,
//! modify).
//!
//! Notation: S = `spec.volumeAttributesClassName`, C = `status.currentVolumeAttributesClassName`, M =
//! `status.modifyVolumeStatus` {T = target, X = status}.
//!
//! One call of [`decide_modification`] per sync; [`super::steps::decision_steps`] turns the decision into the steps the
//! controller carries out: [`ModificationDecision::memory`] at once, then the action. For
//! [`ModificationAction::Modify`] it writes the plan's `mark` (a Conflict requeues), records its `event`, reads the
//! Secret ([`super::request::modify_secret_reference`]), calls ControllerModifyVolume
//! ([`super::request::controller_modify_volume_request`]) and hands the answer to
//! [`super::result::modification_outcome`] with the claim as the `mark` write returned it.

use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::VolumeAttributesClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::translate::claim::{
    bound_volume_name, claim_key, claim_name, conditions, current_class, has_condition, is_bound, requested_class,
};
use crate::translate::conditions::{merge_modify_conditions, modify_condition, remove_conditions};
use crate::translate::memory::SetChange;
use crate::translate::names::{
    CONDITION_MODIFY_VOLUME_ERROR, CONDITION_MODIFYING_VOLUME, EVENT_VOLUME_MODIFY, EVENT_VOLUME_MODIFY_CANCELED,
    EVENT_VOLUME_MODIFY_FAILED, MODIFY_IN_PROGRESS, MODIFY_INFEASIBLE, MODIFY_PENDING,
};
use crate::translate::patch::{ClaimStatusPatch, ModifyVolumeStatusChange};
use sidecar_runtime::PlannedEvent;

/// The modification settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModificationConfig {
    pub driver_name: String,
    /// `--extra-modify-metadata` (default false).
    pub extra_modify_metadata: bool,
}

/// What the controller remembers about the claim (keyed by `namespace/name`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModificationMemory {
    /// Time left while the claim is in the slow set (an Infeasible modification less than `--retry-interval-max`
    /// ago).
    pub slow_retry: Option<Duration>,
    /// The last ControllerModifyVolume ended with a non-final error, so the driver may still be applying T. At startup,
    /// every claim with X = InProgress is uncertain.
    pub uncertain: bool,
}

/// How the controller's memory of the claim changes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModificationMemoryChange {
    pub slow_set: SetChange,
    pub uncertain: SetChange,
}

/// The result of one sync of a claim.
#[derive(Clone, Debug, PartialEq)]
pub struct ModificationDecision {
    /// Applied at once.
    pub memory: ModificationMemoryChange,
    pub action: ModificationAction,
}

/// What to do with the claim.
#[derive(Clone, Debug, PartialEq)]
pub enum ModificationAction {
    /// Nothing to do until the claim changes.
    Skip(Skip),
    /// An Infeasible modification to S failed recently: no driver call; requeue (upstream uses the normal per-claim
    /// backoff; `after` is what is left of the slow-set period). A new S is tried at once.
    DelayRetry {
        after: Duration,
        message: String,
    },
    /// S was cleared while nothing is in progress (a rollback, or the user no longer cares): write `patch` without a
    /// resourceVersion and record `event`, when the claim still shows a ModifyingVolume condition.
    /// `status.modifyVolumeStatus` stays.
    Cancel {
        patch: Option<ClaimStatusPatch>,
        event: Option<PlannedEvent>,
    },
    /// The class to modify to does not exist. Record `event`; write `patch` when given (M.status = Pending, T
    /// unchanged, conditions untouched, resourceVersion-checked). The controller queues the claim again when `class`
    /// appears (deliberate difference: upstream retries a Pending claim only on a spec change or a restart); with
    /// `requeue` it also requeues with backoff now (the locked target of an uncertain modification).
    WaitForClass {
        class: String,
        patch: Option<ClaimStatusPatch>,
        event: PlannedEvent,
        requeue: bool,
    },
    /// The class names another driver (deliberate difference: upstream never compares the class's driverName and sends
    /// its parameters to the wrong driver): write `patch` (M = {T, Infeasible} with the error conditions,
    /// resourceVersion-checked), record `event`, requeue with backoff; the slow set delays the next try as for a
    /// driver's InvalidArgument.
    ClassOfAnotherDriver {
        class: String,
        patch: ClaimStatusPatch,
        event: PlannedEvent,
    },
    Modify(Box<ModifyPlan>),
}

/// Why a claim is left alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Skip {
    /// No `spec.volumeName`, or not Bound.
    NotBound,
    /// The PV is not a CSI volume of this driver (modification has no CSI migration).
    OtherDriver,
    /// M is unset and S = C: the steady state.
    UpToDate,
}

/// A ControllerModifyVolume to make.
#[derive(Clone, Debug, PartialEq)]
pub struct ModifyPlan {
    /// The class whose parameters are applied; its name is T from now on.
    pub class: VolumeAttributesClass,
    /// M = {T, InProgress} and the ModifyingVolume condition, resourceVersion-checked. `None` when continuing the
    /// locked target of an uncertain modification: it is marked already.
    pub mark: Option<ClaimStatusPatch>,
    /// The Normal `VolumeModify` event, recorded once `mark` is written.
    pub event: Option<PlannedEvent>,
}

impl ModifyPlan {
    /// T, the class being applied.
    pub fn target(&self) -> &str {
        self.class.metadata.name.as_deref().unwrap_or_default()
    }
}

/// The classes [`decide_modification`] may look up for `claim`: the requested one (S) and the target being applied
/// (T); "" for either when unset.
pub fn classes_consulted(claim: &PersistentVolumeClaim) -> [&str; 2] {
    let status = claim.status.as_ref().and_then(|s| s.modify_volume_status.as_ref());
    [requested_class(claim), status.and_then(|m| m.target_volume_attributes_class_name.as_deref()).unwrap_or_default()]
}

/// Decides what one sync of `claim` does. `volume` is the PV named by `spec.volumeName` (the controller requeues the
/// claim while that PV is not in its store); `class` looks VolumeAttributesClasses up by name.
pub fn decide_modification<'a>(
    claim: &PersistentVolumeClaim,
    volume: &PersistentVolume,
    config: &ModificationConfig,
    memory: &ModificationMemory,
    class: impl Fn(&str) -> Option<&'a VolumeAttributesClass>,
    now: &Time,
) -> ModificationDecision {
    let mut decision = ModificationDecision {
        memory: ModificationMemoryChange::default(),
        action: ModificationAction::Skip(Skip::NotBound),
    };
    if bound_volume_name(claim).is_empty() {
        return decision;
    }
    if volume.spec.as_ref().and_then(|s| s.csi.as_ref()).map(|csi| csi.driver.as_str()) != Some(&config.driver_name) {
        decision.action = ModificationAction::Skip(Skip::OtherDriver);
        return decision;
    }
    if !is_bound(claim) {
        return decision;
    }

    let spec_class = claim.spec.as_ref().and_then(|s| s.volume_attributes_class_name.as_deref());
    let status = claim.status.as_ref().and_then(|s| s.modify_volume_status.as_ref());
    let target = status.and_then(|m| m.target_volume_attributes_class_name.as_deref()).unwrap_or_default();
    let requested = spec_class.unwrap_or_default();

    // An Infeasible modification to S is tried again only after the slow-set period; a new S at once.
    match (status, spec_class) {
        (Some(m), Some(s)) if target == s => {
            if m.status == MODIFY_INFEASIBLE {
                decision.memory.slow_set = SetChange::Insert;
            }
            if let Some(after) = memory.slow_retry {
                let message = format!(
                    "skipping volume modification for pvc {}, because modification previously failed with infeasible error",
                    claim_key(claim)
                );
                decision.action = ModificationAction::DelayRetry { after, message };
                return decision;
            }
        }
        _ => decision.memory.slow_set = SetChange::Remove,
    }

    if status.is_none() && requested == current_class(claim) {
        decision.action = ModificationAction::Skip(Skip::UpToDate);
        return decision;
    }
    let in_progress = status.is_some_and(|m| m.status == MODIFY_IN_PROGRESS);
    if requested.is_empty() && !in_progress {
        decision.action = cancel(claim);
        return decision;
    }

    // After an uncertain error (or with S cleared), keep working toward T whatever S says: the driver may still be
    // applying T.
    if in_progress && (memory.uncertain || requested.is_empty()) {
        decision.action = match class(target) {
            None => ModificationAction::WaitForClass {
                class: target.to_string(),
                patch: None,
                event: class_missing_event(target),
                requeue: true,
            },
            Some(vac) if vac.driver_name != config.driver_name => {
                decision.memory.slow_set = SetChange::Insert;
                decision.memory.uncertain = SetChange::Remove;
                class_of_another_driver(claim, vac, target, config, now)
            }
            Some(vac) => {
                ModificationAction::Modify(Box::new(ModifyPlan { class: vac.clone(), mark: None, event: None }))
            }
        };
        return decision;
    }

    // Otherwise (M unset with S ≠ C, X Pending or Infeasible, or InProgress after a final error): validate S, mark
    // InProgress, call. Setting S back to C after a failure (a rollback) takes this path too.
    decision.action = match class(requested) {
        None => {
            let patch = ClaimStatusPatch {
                resource_version: claim.metadata.resource_version.clone(),
                modify_volume_status: Some(ModifyVolumeStatusChange::Set { status: MODIFY_PENDING, target: None }),
                ..Default::default()
            };
            ModificationAction::WaitForClass {
                class: requested.to_string(),
                patch: Some(patch),
                event: class_missing_event(requested),
                requeue: false,
            }
        }
        Some(vac) if vac.driver_name != config.driver_name => {
            decision.memory.slow_set = SetChange::Insert;
            decision.memory.uncertain = SetChange::Remove;
            class_of_another_driver(claim, vac, requested, config, now)
        }
        Some(vac) => {
            let modifying = modify_condition(
                CONDITION_MODIFYING_VOLUME,
                None,
                format!("Modifying volume to \"{requested}\" is in progress."),
                now,
            );
            let mark = ClaimStatusPatch {
                resource_version: claim.metadata.resource_version.clone(),
                conditions: merge_modify_conditions(conditions(claim), vec![modifying]),
                modify_volume_status: Some(ModifyVolumeStatusChange::Set {
                    status: MODIFY_IN_PROGRESS,
                    target: Some(requested.to_string()),
                }),
                ..Default::default()
            };
            let event = PlannedEvent::normal(
                EVENT_VOLUME_MODIFY,
                format!("external resizer is modifying volume {} with vac {requested}", claim_name(claim)),
            );
            ModificationAction::Modify(Box::new(ModifyPlan {
                class: vac.clone(),
                mark: Some(mark),
                event: Some(event),
            }))
        }
    };
    decision
}

fn cancel(claim: &PersistentVolumeClaim) -> ModificationAction {
    if !has_condition(claim, CONDITION_MODIFYING_VOLUME) {
        return ModificationAction::Cancel { patch: None, event: None };
    }
    let patch = ClaimStatusPatch {
        conditions: remove_conditions(conditions(claim), &[CONDITION_MODIFYING_VOLUME]),
        ..Default::default()
    };
    let event = PlannedEvent::normal(EVENT_VOLUME_MODIFY_CANCELED, "Cancelled modify.");
    ModificationAction::Cancel { patch: Some(patch), event: Some(event) }
}

fn class_missing_event(class: &str) -> PlannedEvent {
    PlannedEvent::warning(EVENT_VOLUME_MODIFY_FAILED, format!("VAC \"{class}\" does not exist."))
}

/// The deliberate check upstream lacks: a class for another driver is Infeasible, as an InvalidArgument would be.
fn class_of_another_driver(
    claim: &PersistentVolumeClaim,
    vac: &VolumeAttributesClass,
    class: &str,
    config: &ModificationConfig,
    now: &Time,
) -> ModificationAction {
    let message =
        format!("VAC \"{class}\" is for driver \"{}\", not for driver \"{}\"", vac.driver_name, config.driver_name);
    let modifying = modify_condition(
        CONDITION_MODIFYING_VOLUME,
        None,
        format!("Modifying volume to \"{class}\" failed. Waiting for retry."),
        now,
    );
    let error = modify_condition(CONDITION_MODIFY_VOLUME_ERROR, Some("InvalidArgument".into()), message.clone(), now);
    let patch = ClaimStatusPatch {
        resource_version: claim.metadata.resource_version.clone(),
        conditions: merge_modify_conditions(conditions(claim), vec![modifying, error]),
        modify_volume_status: Some(ModifyVolumeStatusChange::Set {
            status: MODIFY_INFEASIBLE,
            target: Some(class.to_string()),
        }),
        ..Default::default()
    };
    ModificationAction::ClassOfAnotherDriver {
        class: class.to_string(),
        patch,
        event: PlannedEvent::warning(EVENT_VOLUME_MODIFY_FAILED, message),
    }
}

/// Whether the claim starts out uncertain when the controller starts: M.status = InProgress (Infeasible is not loaded,
/// as upstream: external-resizer pkg/modifycontroller/controller.go, initUncertainPVCs).
pub fn uncertain_at_startup(claim: &PersistentVolumeClaim) -> bool {
    claim.status.as_ref().and_then(|s| s.modify_volume_status.as_ref()).is_some_and(|m| m.status == MODIFY_IN_PROGRESS)
}
