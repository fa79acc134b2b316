//! The modification rules (external-resizer pkg/modifycontroller), one row per rule or transition, named after it.
//! Notation as in [`super::decide`]: S = the requested class, C = the current one, M = `status.modifyVolumeStatus` {T =
//! target, X = status}.

use std::collections::BTreeMap;
use std::time::Duration;

use csi_client::CallError;
use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, ModifyVolumeStatus, PersistentVolume, PersistentVolumeClaim,
    PersistentVolumeClaimCondition, PersistentVolumeClaimSpec, PersistentVolumeClaimStatus, PersistentVolumeSpec,
};
use k8s_openapi::api::storage::v1::VolumeAttributesClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::json;
use tonic::Code;

use super::decide::*;
use super::filter::awaited_class;
use super::result::*;
use super::steps::{decision_steps, outcome_steps};
use crate::translate::call_failure::CallFailure;
use crate::translate::claim::{conditions, current_class};
use crate::translate::memory::SetChange;
use crate::translate::patch::{ClaimStatusPatch, ConditionChange, ModifyVolumeStatusChange, VolumePatch};
use crate::translate::steps::{Plan, Then, outline};
use sidecar_runtime::PlannedEvent;

const DRIVER: &str = "hostpath.csi.k8s.io";

fn now() -> Time {
    Time(Timestamp::from_second(1_700_000_000).unwrap())
}

fn earlier() -> Time {
    Time(Timestamp::from_second(1_600_000_000).unwrap())
}

/// Bound claim `apps/data` of `pv-1`: S, C, M = (T, X), and conditions (type, reason).
fn claim(
    spec: Option<&str>,
    current: Option<&str>,
    modify: Option<(&str, &str)>,
    conditions: &[(&str, Option<&str>)],
) -> PersistentVolumeClaim {
    let mut claim = PersistentVolumeClaim::default();
    claim.metadata.name = Some("data".into());
    claim.metadata.namespace = Some("apps".into());
    claim.metadata.resource_version = Some("7".into());
    claim.spec = Some(PersistentVolumeClaimSpec {
        volume_name: Some("pv-1".into()),
        volume_attributes_class_name: spec.map(str::to_string),
        ..Default::default()
    });
    claim.status = Some(PersistentVolumeClaimStatus {
        phase: Some("Bound".into()),
        current_volume_attributes_class_name: current.map(str::to_string),
        modify_volume_status: modify.map(|(target, status)| ModifyVolumeStatus {
            status: status.into(),
            target_volume_attributes_class_name: Some(target.into()),
        }),
        conditions: (!conditions.is_empty()).then(|| {
            conditions
                .iter()
                .map(|(type_, reason)| PersistentVolumeClaimCondition {
                    type_: type_.to_string(),
                    status: "True".into(),
                    reason: reason.map(str::to_string),
                    message: Some("earlier".into()),
                    last_probe_time: Some(earlier()),
                    last_transition_time: Some(earlier()),
                })
                .collect()
        }),
        ..Default::default()
    });
    claim
}

fn volume(class: Option<&str>) -> PersistentVolume {
    let mut volume = PersistentVolume::default();
    volume.metadata.name = Some("pv-1".into());
    volume.spec = Some(PersistentVolumeSpec {
        volume_attributes_class_name: class.map(str::to_string),
        csi: Some(CSIPersistentVolumeSource {
            driver: DRIVER.into(),
            volume_handle: "vol-1".into(),
            ..Default::default()
        }),
        ..Default::default()
    });
    volume
}

fn class(name: &str, driver: &str) -> VolumeAttributesClass {
    let mut class = VolumeAttributesClass {
        driver_name: driver.into(),
        parameters: Some(BTreeMap::from([("iops".to_string(), name.len().to_string())])),
        ..Default::default()
    };
    class.metadata.name = Some(name.into());
    class
}

fn classes() -> Vec<VolumeAttributesClass> {
    vec![
        class("silver", DRIVER),
        class("gold", DRIVER),
        class("platinum", DRIVER),
        class("foreign", "other.csi.k8s.io"),
    ]
}

fn config() -> ModificationConfig {
    ModificationConfig { driver_name: DRIVER.into(), extra_modify_metadata: false }
}

fn decide(
    claim: &PersistentVolumeClaim,
    memory: &ModificationMemory,
    known: &[VolumeAttributesClass],
) -> ModificationDecision {
    decide_modification(
        claim,
        &volume(Some("silver")),
        &config(),
        memory,
        |name| known.iter().find(|c| c.metadata.name.as_deref() == Some(name)),
        &now(),
    )
}

/// The action, reduced to what a table row states.
#[derive(Debug, PartialEq)]
enum Summary<'a> {
    Skip(Skip),
    Delay,
    Cancel { event: bool },
    WaitForClass { class: &'a str, pending: bool, requeue: bool },
    AnotherDriver { class: &'a str },
    Modify { target: &'a str, marked: bool },
}

fn summary(action: &ModificationAction) -> Summary<'_> {
    match action {
        ModificationAction::Skip(skip) => Summary::Skip(skip.clone()),
        ModificationAction::DelayRetry { .. } => Summary::Delay,
        ModificationAction::Cancel { event, .. } => Summary::Cancel { event: event.is_some() },
        ModificationAction::WaitForClass { class, patch, requeue, .. } => {
            Summary::WaitForClass { class, pending: patch.is_some(), requeue: *requeue }
        }
        ModificationAction::ClassOfAnotherDriver { class, .. } => Summary::AnotherDriver { class },
        ModificationAction::Modify(plan) => Summary::Modify { target: plan.target(), marked: plan.mark.is_some() },
    }
}

fn error(code: Code) -> CallError {
    CallError::Status { method: "/csi.v1.Controller/ControllerModifyVolume", status: tonic::Status::new(code, "boom") }
}

#[test]
fn sync_preconditions() {
    let mut no_volume_name = claim(Some("gold"), Some("silver"), None, &[]);
    no_volume_name.spec.as_mut().unwrap().volume_name = None;
    let mut not_bound = claim(Some("gold"), Some("silver"), None, &[]);
    not_bound.status.as_mut().unwrap().phase = Some("Pending".into());
    let mut other_driver = volume(None);
    other_driver.spec.as_mut().unwrap().csi.as_mut().unwrap().driver = "other.csi.k8s.io".into();
    let mut not_csi = volume(None);
    not_csi.spec.as_mut().unwrap().csi = None;
    let modify = claim(Some("gold"), Some("silver"), None, &[]);
    // (rule, claim, volume, skip)
    let table = [
        ("PV not created yet", no_volume_name, volume(None), Skip::NotBound),
        ("not Bound", not_bound, volume(None), Skip::NotBound),
        ("another driver's PV", modify.clone(), other_driver, Skip::OtherDriver),
        ("a non-CSI PV is skipped, without a panic (external-resizer #471)", modify, not_csi, Skip::OtherDriver),
    ];
    let known = classes();
    for (rule, claim, volume, want) in table {
        let decision = decide_modification(
            &claim,
            &volume,
            &config(),
            &ModificationMemory::default(),
            |name| known.iter().find(|c| c.metadata.name.as_deref() == Some(name)),
            &now(),
        );
        assert_eq!(decision.action, ModificationAction::Skip(want), "{rule}");
        assert_eq!(decision.memory, ModificationMemoryChange::default(), "{rule}");
    }
}

#[test]
fn state_machine() {
    let slow = ModificationMemory { slow_retry: Some(Duration::from_secs(200)), uncertain: false };
    let uncertain = ModificationMemory { slow_retry: None, uncertain: true };
    let none = ModificationMemory::default();
    let all = classes();
    let without_gold: Vec<_> = classes().into_iter().filter(|c| c.metadata.name.as_deref() != Some("gold")).collect();
    use SetChange::{Insert, Keep, Remove};
    // (rule, claim, memory, classes, action, slow-set change, uncertain change)
    type Row<'a> = (
        &'a str,
        PersistentVolumeClaim,
        &'a ModificationMemory,
        &'a [VolumeAttributesClass],
        Summary<'static>,
        SetChange,
        SetChange,
    );
    let table: Vec<Row> = vec![
        (
            "M nil, C = S → unchanged",
            claim(Some("silver"), Some("silver"), None, &[]),
            &none,
            &all,
            Summary::Skip(Skip::UpToDate),
            Remove,
            Keep,
        ),
        (
            "M nil, S and C unset → unchanged",
            claim(None, None, None, &[]),
            &none,
            &all,
            Summary::Skip(Skip::UpToDate),
            Remove,
            Keep,
        ),
        (
            "M nil, S ≠ C, class S missing → Pending",
            claim(Some("gold"), Some("silver"), None, &[]),
            &none,
            &without_gold,
            Summary::WaitForClass { class: "gold", pending: true, requeue: false },
            Remove,
            Keep,
        ),
        (
            "Pending, class S still missing → Pending again",
            claim(Some("gold"), Some("silver"), Some(("", "Pending")), &[]),
            &none,
            &without_gold,
            Summary::WaitForClass { class: "gold", pending: true, requeue: false },
            Remove,
            Keep,
        ),
        (
            "Infeasible to another class, class S missing → Pending",
            claim(Some("gold"), Some("silver"), Some(("platinum", "Infeasible")), &[]),
            &none,
            &without_gold,
            Summary::WaitForClass { class: "gold", pending: true, requeue: false },
            Remove,
            Keep,
        ),
        (
            "M nil, class S exists → InProgress + VolumeModify",
            claim(Some("gold"), Some("silver"), None, &[]),
            &none,
            &all,
            Summary::Modify { target: "gold", marked: true },
            Remove,
            Keep,
        ),
        (
            "Pending, class S created → InProgress",
            claim(Some("gold"), Some("silver"), Some(("", "Pending")), &[]),
            &none,
            &all,
            Summary::Modify { target: "gold", marked: true },
            Remove,
            Keep,
        ),
        (
            "InProgress after a final error, S changed → the new S",
            claim(Some("platinum"), Some("silver"), Some(("gold", "InProgress")), &[]),
            &none,
            &all,
            Summary::Modify { target: "platinum", marked: true },
            Remove,
            Keep,
        ),
        (
            "InProgress after a final error, same S → tried again at once",
            claim(Some("gold"), Some("silver"), Some(("gold", "InProgress")), &[]),
            &none,
            &all,
            Summary::Modify { target: "gold", marked: true },
            Keep,
            Keep,
        ),
        (
            "InProgress and uncertain, S changed → keep working toward T (TestModifyUncertain)",
            claim(Some("platinum"), Some("silver"), Some(("gold", "InProgress")), &[]),
            &uncertain,
            &all,
            Summary::Modify { target: "gold", marked: false },
            Remove,
            Keep,
        ),
        (
            "InProgress, S cleared → keep working toward T",
            claim(None, Some("silver"), Some(("gold", "InProgress")), &[]),
            &none,
            &all,
            Summary::Modify { target: "gold", marked: false },
            Remove,
            Keep,
        ),
        (
            "locked target's class missing → VolumeModifyFailed, requeue, no status write",
            claim(Some("platinum"), Some("silver"), Some(("gold", "InProgress")), &[]),
            &uncertain,
            &without_gold,
            Summary::WaitForClass { class: "gold", pending: false, requeue: true },
            Remove,
            Keep,
        ),
        (
            "S cleared, Infeasible, ModifyingVolume shown → cancel with VolumeModifyCanceled",
            claim(None, Some("silver"), Some(("gold", "Infeasible")), &[("ModifyingVolume", None)]),
            &none,
            &all,
            Summary::Cancel { event: true },
            Remove,
            Keep,
        ),
        (
            "S cleared, Pending, no ModifyingVolume → nothing (M kept)",
            claim(None, Some("silver"), Some(("gold", "Pending")), &[]),
            &none,
            &all,
            Summary::Cancel { event: false },
            Remove,
            Keep,
        ),
        (
            "rollback: Infeasible to gold, S back to C → modify to silver",
            claim(Some("silver"), Some("silver"), Some(("gold", "Infeasible")), &[("ModifyingVolume", None)]),
            &slow,
            &all,
            Summary::Modify { target: "silver", marked: true },
            Remove,
            Keep,
        ),
        (
            "Infeasible, T = S, in the slow set → no call",
            claim(Some("gold"), Some("silver"), Some(("gold", "Infeasible")), &[]),
            &slow,
            &all,
            Summary::Delay,
            Insert,
            Keep,
        ),
        (
            "Infeasible, T = S, slow period over → tried again",
            claim(Some("gold"), Some("silver"), Some(("gold", "Infeasible")), &[]),
            &none,
            &all,
            Summary::Modify { target: "gold", marked: true },
            Insert,
            Keep,
        ),
        (
            "a new class is tried at once, slow set or not",
            claim(Some("platinum"), Some("silver"), Some(("gold", "Infeasible")), &[]),
            &slow,
            &all,
            Summary::Modify { target: "platinum", marked: true },
            Remove,
            Keep,
        ),
        (
            "first-time modify (C unset, PV without class)",
            claim(Some("gold"), None, None, &[]),
            &none,
            &all,
            Summary::Modify { target: "gold", marked: true },
            Remove,
            Keep,
        ),
        (
            "deliberate difference: a class of another driver → Infeasible",
            claim(Some("foreign"), Some("silver"), None, &[]),
            &none,
            &all,
            Summary::AnotherDriver { class: "foreign" },
            Insert,
            Remove,
        ),
        (
            "deliberate difference: a locked target whose class is now another driver's → Infeasible",
            claim(Some("gold"), Some("silver"), Some(("foreign", "InProgress")), &[]),
            &uncertain,
            &all,
            Summary::AnotherDriver { class: "foreign" },
            Insert,
            Remove,
        ),
    ];
    for (rule, claim, memory, known, want, slow_set, uncertain) in table {
        let decision = decide(&claim, memory, known);
        assert_eq!(summary(&decision.action), want, "{rule}");
        assert_eq!(decision.memory, ModificationMemoryChange { slow_set, uncertain }, "{rule}: memory");
    }
}

#[test]
fn writes_before_the_call() {
    let known = classes();
    let without_gold: Vec<_> = classes().into_iter().filter(|c| c.metadata.name.as_deref() != Some("gold")).collect();

    // A missing class (external-resizer #500): Pending keeps T and the conditions, is resourceVersion-checked, no
    // requeue.
    let infeasible = claim(
        Some("gold"),
        Some("silver"),
        Some(("platinum", "Infeasible")),
        &[("ModifyVolumeError", Some("InvalidArgument"))],
    );
    let ModificationAction::WaitForClass { patch: Some(patch), event, .. } =
        decide(&infeasible, &ModificationMemory::default(), &without_gold).action
    else {
        panic!("expected Pending")
    };
    assert_eq!(
        event,
        PlannedEvent::warning("VolumeModifyFailed", "VAC \"gold\" does not exist."),
        "a missing class is warned"
    );
    assert_eq!(
        patch.strategic_merge_patch(),
        json!({"metadata": {"resourceVersion": "7"}, "status": {"modifyVolumeStatus": {"status": "Pending"}}}),
        "only the status, never the conditions"
    );
    let written = patch.apply(&infeasible);
    let status = written.status.as_ref().unwrap();
    assert_eq!(
        status.modify_volume_status,
        Some(ModifyVolumeStatus {
            status: "Pending".into(),
            target_volume_attributes_class_name: Some("platinum".into())
        }),
        "T unchanged (d03a1e75)"
    );
    assert_eq!(awaited_class(&written), Some("gold"), "deliberate difference: the controller waits for gold");

    // A class that exists: InProgress + ModifyingVolume + VolumeModify.
    let pending = claim(
        Some("gold"),
        Some("silver"),
        Some(("", "Pending")),
        &[("ModifyingVolume", None), ("ModifyVolumeError", Some("Aborted"))],
    );
    let ModificationAction::Modify(plan) = decide(&pending, &ModificationMemory::default(), &known).action else {
        panic!("expected a modification")
    };
    assert_eq!(plan.class, class("gold", DRIVER));
    assert_eq!(
        plan.event,
        Some(PlannedEvent::normal("VolumeModify", "external resizer is modifying volume data with vac gold")),
        "a Normal VolumeModify event before the call"
    );
    let mark = plan.mark.unwrap();
    assert_eq!(mark.resource_version, Some("7".into()), "resourceVersion-checked");
    assert_eq!(
        mark.modify_volume_status,
        Some(ModifyVolumeStatusChange::Set { status: "InProgress", target: Some("gold".into()) }),
        "M = {{T: S, InProgress}}"
    );
    assert_eq!(
        mark.conditions,
        vec![ConditionChange::Set(PersistentVolumeClaimCondition {
            type_: "ModifyingVolume".into(),
            status: "True".into(),
            reason: None,
            message: Some("Modifying volume to \"gold\" is in progress.".into()),
            last_probe_time: Some(now()),
            last_transition_time: Some(earlier()),
        })],
        "ModifyingVolume rewritten (transition time kept), ModifyVolumeError left"
    );

    // S cleared while nothing is in progress: cancel removes only ModifyingVolume, without a resourceVersion.
    let cancelled = claim(
        None,
        Some("silver"),
        Some(("gold", "Infeasible")),
        &[("ModifyingVolume", None), ("ModifyVolumeError", Some("InvalidArgument"))],
    );
    let ModificationAction::Cancel { patch: Some(patch), event } =
        decide(&cancelled, &ModificationMemory::default(), &known).action
    else {
        panic!("expected a cancel")
    };
    assert_eq!(event, Some(PlannedEvent::normal("VolumeModifyCanceled", "Cancelled modify.")), "VolumeModifyCanceled");
    assert_eq!(
        patch,
        ClaimStatusPatch { conditions: vec![ConditionChange::Remove("ModifyingVolume".into())], ..Default::default() },
        "M left as it is, no resourceVersion"
    );

    // Deliberate difference: another driver's class.
    let foreign = claim(Some("foreign"), Some("silver"), None, &[]);
    let ModificationAction::ClassOfAnotherDriver { patch, event, .. } =
        decide(&foreign, &ModificationMemory::default(), &known).action
    else {
        panic!("expected Infeasible")
    };
    let message = "VAC \"foreign\" is for driver \"other.csi.k8s.io\", not for driver \"hostpath.csi.k8s.io\"";
    assert_eq!(event, PlannedEvent::warning("VolumeModifyFailed", message), "the event names both drivers");
    let written = patch.apply(&foreign);
    assert_eq!(
        written.status.as_ref().unwrap().modify_volume_status,
        Some(ModifyVolumeStatus {
            status: "Infeasible".into(),
            target_volume_attributes_class_name: Some("foreign".into())
        })
    );
    let error = conditions(&written).iter().find(|c| c.type_ == "ModifyVolumeError").unwrap();
    assert_eq!((error.reason.as_deref(), error.message.as_deref()), (Some("InvalidArgument"), Some(message)));
    assert_eq!(patch.resource_version, Some("7".into()));

    // An Infeasible modification tried recently: the delay message.
    let slow = ModificationMemory { slow_retry: Some(Duration::from_secs(200)), uncertain: false };
    let ModificationAction::DelayRetry { after, message } =
        decide(&claim(Some("gold"), None, Some(("gold", "Infeasible")), &[]), &slow, &known).action
    else {
        panic!("expected a delay")
    };
    assert_eq!(after, Duration::from_secs(200));
    assert_eq!(
        message,
        "skipping volume modification for pvc apps/data, because modification previously failed with infeasible error"
    );
}

#[test]
fn driver_answers() {
    let in_progress = claim(
        Some("gold"),
        Some("silver"),
        Some(("gold", "InProgress")),
        &[("ModifyingVolume", None), ("ModifyVolumeError", Some("Aborted"))],
    );
    let plan = ModifyPlan { class: class("gold", DRIVER), mark: None, event: None };

    // Success.
    let outcome = modification_outcome(&in_progress, &plan, Ok(()), &now());
    assert_eq!(
        outcome.volume_patch,
        Some(VolumePatch { volume_attributes_class_name: Some("gold".into()), ..Default::default() }),
        "PV first"
    );
    let patch = outcome.claim_patch.unwrap();
    assert_eq!(
        patch.strategic_merge_patch(),
        json!({"status": {
            "conditions": [{"$patch": "delete", "type": "ModifyingVolume"}, {"$patch": "delete", "type": "ModifyVolumeError"}],
            "modifyVolumeStatus": null,
            "currentVolumeAttributesClassName": "gold",
        }}),
        "M cleared, C = T, both conditions removed (#421), no resourceVersion"
    );
    assert_eq!(
        outcome.event,
        Some(PlannedEvent::normal(
            "VolumeModifySuccessful",
            "external resizer modified volume data with vac gold successfully"
        ))
    );
    assert_eq!(outcome.error, None);
    assert_eq!(outcome.memory.uncertain, SetChange::Remove);

    let timeout =
        CallError::Timeout { method: "/csi.v1.Controller/ControllerModifyVolume", timeout: Duration::from_secs(10) };
    let errors: Vec<(Code, CallError)> = [
        Code::Cancelled,
        Code::DeadlineExceeded,
        Code::Unavailable,
        Code::ResourceExhausted,
        Code::Aborted,
        Code::InvalidArgument,
        Code::OutOfRange,
        Code::NotFound,
        Code::Internal,
        Code::FailedPrecondition,
    ]
    .into_iter()
    .map(|code| (code, error(code)))
    .collect();
    let failure = |code: Code| CallFailure::Driver(&errors.iter().find(|(c, _)| *c == code).unwrap().1);
    use SetChange::{Insert, Keep, Remove};
    // (rule, failure, X, ModifyingVolume message, error reason, error message, event suffix, slow set, uncertain)
    type Row<'a> = (
        &'static str,
        CallFailure<'a>,
        &'static str,
        &'static str,
        &'static str,
        &'static str,
        bool,
        SetChange,
        SetChange,
    );
    let still = "Modifying volume to \"gold\" is still in progress.";
    let failed = "Modifying volume to \"gold\" failed. Waiting for retry.";
    let table: Vec<Row> = vec![
        (
            "Canceled is non-final",
            failure(Code::Cancelled),
            "InProgress",
            still,
            "Canceled",
            "boom",
            true,
            Keep,
            Insert,
        ),
        (
            "DeadlineExceeded is non-final",
            failure(Code::DeadlineExceeded),
            "InProgress",
            still,
            "DeadlineExceeded",
            "boom",
            true,
            Keep,
            Insert,
        ),
        (
            "a timeout is non-final",
            CallFailure::Driver(&timeout),
            "InProgress",
            still,
            "DeadlineExceeded",
            "context deadline exceeded",
            true,
            Keep,
            Insert,
        ),
        (
            "Unavailable is non-final",
            failure(Code::Unavailable),
            "InProgress",
            still,
            "Unavailable",
            "boom",
            true,
            Keep,
            Insert,
        ),
        (
            "ResourceExhausted is non-final",
            failure(Code::ResourceExhausted),
            "InProgress",
            still,
            "ResourceExhausted",
            "boom",
            true,
            Keep,
            Insert,
        ),
        ("Aborted is non-final", failure(Code::Aborted), "InProgress", still, "Aborted", "boom", true, Keep, Insert),
        (
            "InvalidArgument → Infeasible, slow retry",
            failure(Code::InvalidArgument),
            "Infeasible",
            failed,
            "InvalidArgument",
            "boom",
            false,
            Insert,
            Remove,
        ),
        (
            "OutOfRange stays InProgress",
            failure(Code::OutOfRange),
            "InProgress",
            failed,
            "OutOfRange",
            "boom",
            false,
            Keep,
            Remove,
        ),
        (
            "NotFound stays InProgress",
            failure(Code::NotFound),
            "InProgress",
            failed,
            "NotFound",
            "boom",
            false,
            Keep,
            Remove,
        ),
        (
            "Internal stays InProgress",
            failure(Code::Internal),
            "InProgress",
            failed,
            "Internal",
            "boom",
            false,
            Keep,
            Remove,
        ),
        (
            "FailedPrecondition stays InProgress",
            failure(Code::FailedPrecondition),
            "InProgress",
            failed,
            "FailedPrecondition",
            "boom",
            false,
            Keep,
            Remove,
        ),
    ];
    for (rule, failure, status, modifying_message, reason, message, still_modifying, slow_set, uncertain) in table {
        let text = failure.text();
        let outcome = modification_outcome(&in_progress, &plan, Err(failure), &now());
        assert_eq!(outcome.volume_patch, None, "{rule}");
        assert_eq!(outcome.memory, ModificationMemoryChange { slow_set, uncertain }, "{rule}: memory");
        assert_eq!(outcome.error.as_deref(), Some(text.as_str()), "{rule}: requeued");
        let event = if still_modifying { format!("{text}. Still modifying to VAC gold") } else { text.clone() };
        assert_eq!(outcome.event, Some(PlannedEvent::warning("VolumeModifyFailed", event)), "{rule}: event");
        let patch = outcome.claim_patch.unwrap();
        assert_eq!(patch.resource_version, Some("7".into()), "{rule}");
        let written = patch.apply(&in_progress);
        assert_eq!(
            written.status.as_ref().unwrap().modify_volume_status,
            Some(ModifyVolumeStatus {
                status: status.into(),
                target_volume_attributes_class_name: Some("gold".into())
            }),
            "{rule}: T kept"
        );
        let modifying = conditions(&written).iter().find(|c| c.type_ == "ModifyingVolume").unwrap();
        assert_eq!(modifying.message.as_deref(), Some(modifying_message), "{rule}");
        assert_eq!(modifying.last_transition_time, Some(earlier()), "{rule}");
        let error = conditions(&written).iter().find(|c| c.type_ == "ModifyVolumeError").unwrap();
        assert_eq!((error.reason.as_deref(), error.message.as_deref()), (Some(reason), Some(message)), "{rule}");
        let moved = if reason == "Aborted" { earlier() } else { now() };
        assert_eq!(error.last_transition_time, Some(moved), "{rule}: moves only with the reason");
        assert_eq!(error.last_probe_time, Some(now()), "{rule}");
    }

    // A failure before the call (the Secret, the request): no status change, no event.
    let outcome = modification_outcome(
        &in_progress,
        &plan,
        Err(CallFailure::NotCalled("error getting secret s in namespace n: forbidden".into())),
        &now(),
    );
    assert_eq!(
        outcome,
        ModificationOutcome {
            volume_patch: None,
            claim_patch: None,
            event: None,
            memory: ModificationMemoryChange::default(),
            error: Some(
                "cannot get error status from modify volume err: error getting secret s in namespace n: forbidden"
                    .into()
            ),
        },
        "no status change, no event"
    );
}

/// Runs syncs the way a controller would: decide, write, call (answers from `driver`), write back.
fn sync(
    claim: &PersistentVolumeClaim,
    memory: &mut ModificationMemory,
    known: &[VolumeAttributesClass],
    driver: Option<Result<(), &CallError>>,
) -> PersistentVolumeClaim {
    let apply_memory = |memory: &mut ModificationMemory, change: ModificationMemoryChange| {
        match change.uncertain {
            SetChange::Insert => memory.uncertain = true,
            SetChange::Remove => memory.uncertain = false,
            SetChange::Keep => {}
        }
        match change.slow_set {
            SetChange::Insert if memory.slow_retry.is_none() => memory.slow_retry = Some(Duration::from_secs(300)),
            SetChange::Remove => memory.slow_retry = None,
            _ => {}
        }
    };
    let decision = decide(claim, memory, known);
    apply_memory(memory, decision.memory);
    let mut claim = claim.clone();
    match decision.action {
        ModificationAction::Modify(plan) => {
            if let Some(mark) = &plan.mark {
                claim = mark.apply(&claim);
            }
            let result = driver.expect("unexpected driver call").map_err(CallFailure::Driver);
            let outcome = modification_outcome(&claim, &plan, result, &now());
            apply_memory(memory, outcome.memory);
            if let Some(patch) = outcome.claim_patch {
                claim = patch.apply(&claim);
            }
        }
        ModificationAction::WaitForClass { patch: Some(patch), .. }
        | ModificationAction::ClassOfAnotherDriver { patch, .. } => claim = patch.apply(&claim),
        ModificationAction::Cancel { patch: Some(patch), .. } => claim = patch.apply(&claim),
        _ => assert!(driver.is_none(), "expected a driver call"),
    }
    claim
}

fn modify_status(claim: &PersistentVolumeClaim) -> Option<(String, String)> {
    let status = claim.status.as_ref()?.modify_volume_status.as_ref()?;
    Some((status.target_volume_attributes_class_name.clone().unwrap_or_default(), status.status.clone()))
}

#[test]
fn issue_scenarios() {
    let known = classes();
    let without_gold: Vec<_> = classes().into_iter().filter(|c| c.metadata.name.as_deref() != Some("gold")).collect();
    let invalid = error(Code::InvalidArgument);
    let deadline = error(Code::DeadlineExceeded);
    let set = |mut claim: PersistentVolumeClaim, class: &str| {
        claim.spec.as_mut().unwrap().volume_attributes_class_name = Some(class.into());
        claim
    };

    // silver → gold.
    let mut memory = ModificationMemory::default();
    let claim0 = claim(Some("gold"), Some("silver"), None, &[]);
    let done = sync(&claim0, &mut memory, &known, Some(Ok(())));
    assert_eq!((current_class(&done), modify_status(&done)), ("gold", None), "silver → gold");
    assert!(conditions(&done).is_empty(), "no condition left");

    // Unknown parameter → Infeasible while the old class stays current; then back to the old class.
    let mut memory = ModificationMemory::default();
    let infeasible = sync(&claim0, &mut memory, &known, Some(Err(&invalid)));
    assert_eq!(modify_status(&infeasible), Some(("gold".into(), "Infeasible".into())));
    assert_eq!(current_class(&infeasible), "silver", "the old class stays current");
    assert!(memory.slow_retry.is_some(), "slow retry");
    let again = sync(&infeasible, &mut memory, &known, None);
    assert_eq!(again, infeasible, "no call while in the slow set");
    let rolled_back = sync(&set(infeasible, "silver"), &mut memory, &known, Some(Ok(())));
    assert_eq!((current_class(&rolled_back), modify_status(&rolled_back)), ("silver", None), "rollback (#513)");
    assert!(conditions(&rolled_back).is_empty());

    // Missing class → Pending → created → applied.
    let mut memory = ModificationMemory::default();
    let pending = sync(&claim0, &mut memory, &without_gold, None);
    assert_eq!(modify_status(&pending), Some((String::new(), "Pending".into())));
    assert_eq!(awaited_class(&pending), Some("gold"));
    let applied = sync(&pending, &mut memory, &known, Some(Ok(())));
    assert_eq!((current_class(&applied), modify_status(&applied)), ("gold", None));

    // DEADLINE_EXCEEDED, then success; the target is locked meanwhile, and across a restart.
    let mut memory = ModificationMemory::default();
    let uncertain = sync(&claim0, &mut memory, &known, Some(Err(&deadline)));
    assert_eq!(modify_status(&uncertain), Some(("gold".into(), "InProgress".into())));
    assert!(memory.uncertain);
    let mut restarted = ModificationMemory { uncertain: uncertain_at_startup(&uncertain), ..Default::default() };
    assert!(restarted.uncertain, "InProgress claims start uncertain");
    let changed = set(uncertain, "platinum");
    let resumed = sync(&changed, &mut restarted, &known, Some(Ok(())));
    assert_eq!((current_class(&resumed), modify_status(&resumed)), ("gold", None), "the same target is resumed");
    let next = sync(&resumed, &mut restarted, &known, Some(Ok(())));
    assert_eq!(current_class(&next), "platinum", "then the new class");
}

/// The outline of a plan, its call shown as the class it applies.
fn planned<M>(plan: Plan<M, Box<ModifyPlan>>) -> Vec<String> {
    let then = match plan.then {
        Then::Finish(outcome) => Then::Finish(outcome),
        Then::Call(call) => Then::Call(call.target().to_string()),
    };
    outline(&Plan { steps: plan.steps, then })
}

#[test]
fn planned_steps_before_the_call() {
    let uncertain = ModificationMemory { uncertain: true, ..Default::default() };
    let slow = ModificationMemory { slow_retry: Some(Duration::from_secs(60)), ..Default::default() };
    let none = ModificationMemory::default();
    let lines = |lines: &[&str]| lines.iter().map(|l| l.to_string()).collect::<Vec<_>>();
    // (rule, claim, memory, steps)
    let table = [
        (
            "the steady state writes nothing",
            claim(Some("silver"), Some("silver"), None, &[]),
            &none,
            lines(&["remember", "log Trace: no modification: UpToDate", "finish Done"]),
        ),
        (
            "an Infeasible modification tried recently waits out the slow set, without a write",
            claim(Some("gold"), Some("silver"), Some(("gold", "Infeasible")), &[]),
            &slow,
            lines(&[
                "remember",
                "log Info: skipping volume modification for pvc apps/data, because modification previously failed with infeasible error",
                "finish RetryAfter(60s)",
            ]),
        ),
        (
            "a class cleared while ModifyingVolume shows: the condition goes, VolumeModifyCanceled",
            claim(None, Some("silver"), Some(("gold", "Infeasible")), &[("ModifyingVolume", None)]),
            &none,
            lines(&[
                "remember",
                r#"patch claim, else warn "writing the cancellation failed""#,
                "event Normal VolumeModifyCanceled: Cancelled modify.",
                "finish Done",
            ]),
        ),
        (
            "a class cleared without the condition: nothing written",
            claim(None, Some("silver"), Some(("gold", "Infeasible")), &[]),
            &none,
            lines(&["remember", "finish Done"]),
        ),
        (
            "a missing class: Pending, a warning, no requeue (the class's creation queues the claim)",
            claim(Some("bronze"), Some("silver"), None, &[]),
            &none,
            lines(&[
                "remember",
                r#"patch claim, else warn "marking the modification Pending failed" unless a Conflict"#,
                r#"event Warning VolumeModifyFailed: VAC "bronze" does not exist."#,
                r#"log Info: VolumeAttributesClass "bronze" not found; waiting for it"#,
                "finish Done",
            ]),
        ),
        (
            "the missing locked target of an uncertain modification: no write, a warning, a requeue",
            claim(Some("gold"), Some("silver"), Some(("bronze", "InProgress")), &[]),
            &uncertain,
            lines(&[
                "remember",
                r#"event Warning VolumeModifyFailed: VAC "bronze" does not exist."#,
                r#"log Info: VolumeAttributesClass "bronze" not found; waiting for it"#,
                "finish Retry",
            ]),
        ),
        (
            "a class of another driver: Infeasible, a warning, a retry",
            claim(Some("foreign"), Some("silver"), None, &[]),
            &none,
            lines(&[
                "remember",
                r#"patch claim, else warn "marking the modification Infeasible failed""#,
                r#"event Warning VolumeModifyFailed: VAC "foreign" is for driver "other.csi.k8s.io", not for driver "hostpath.csi.k8s.io""#,
                r#"log Warn: VolumeAttributesClass "foreign" names another driver"#,
                "finish Retry",
            ]),
        ),
        (
            "a modification: mark InProgress (the call sees the claim as marked), VolumeModify, the call",
            claim(Some("gold"), Some("silver"), None, &[]),
            &none,
            lines(&[
                "remember",
                r#"patch claim and go on with it, else warn "marking the modification InProgress failed" unless a Conflict"#,
                "event Normal VolumeModify: external resizer is modifying volume data with vac gold",
                r#"log Info: modifying volume to class "gold""#,
                r#"call "gold""#,
            ]),
        ),
        (
            "an uncertain modification goes on toward its locked target: no mark, no event",
            claim(Some("platinum"), Some("silver"), Some(("gold", "InProgress")), &[]),
            &uncertain,
            lines(&["remember", r#"log Info: modifying volume to class "gold""#, r#"call "gold""#]),
        ),
    ];
    for (rule, claim, memory, want) in table {
        assert_eq!(planned(decision_steps(decide(&claim, memory, &classes()))), want, "{rule}");
    }
}

#[test]
fn planned_steps_after_the_call() {
    let marked = claim(Some("gold"), Some("silver"), Some(("gold", "InProgress")), &[("ModifyingVolume", None)]);
    let plan = ModifyPlan { class: class("gold", DRIVER), mark: None, event: None };
    let unavailable = error(Code::Unavailable);
    let lines = |lines: &[&str]| lines.iter().map(|l| l.to_string()).collect::<Vec<_>>();
    // (rule, answer, steps)
    let table = [
        (
            "success: the PV before the claim, then VolumeModifySuccessful",
            Ok(()),
            lines(&[
                "remember",
                r#"patch volume, else warn "updating the volume's class failed""#,
                r#"patch claim, else warn "updating the claim's modification status failed""#,
                "event Normal VolumeModifySuccessful: external resizer modified volume data with vac gold successfully",
                r#"log Info: modification to class "gold" done"#,
                "finish Done",
            ]),
        ),
        (
            "an error that is not final: the claim records it, a warning, a retry",
            Err(CallFailure::Driver(&unavailable)),
            lines(&[
                "remember",
                r#"patch claim, else warn "updating the claim's modification status failed""#,
                "event Warning VolumeModifyFailed: rpc error: code = Unavailable desc = boom. Still modifying to VAC gold",
                r#"log Warn: modification to class "gold" failed: rpc error: code = Unavailable desc = boom"#,
                "finish Retry",
            ]),
        ),
        (
            "the driver not called (a Secret not read): no write, no event, a retry",
            Err(CallFailure::NotCalled("secrets \"s\" not found".into())),
            lines(&[
                r#"log Warn: modification to class "gold" failed: cannot get error status from modify volume err: secrets "s" not found"#,
                "finish Retry",
            ]),
        ),
    ];
    for (rule, answer, want) in table {
        let outcome = modification_outcome(&marked, &plan, answer, &now());
        assert_eq!(outline(&outcome_steps(outcome, plan.target())), want, "{rule}");
    }
}
