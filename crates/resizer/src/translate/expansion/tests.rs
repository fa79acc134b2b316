//! The expansion rules (external-resizer pkg/controller), one row per rule or transition, named after it.

use std::collections::BTreeMap;
use std::time::Duration;

use csi_client::CallError;
use csi_client::proto::ControllerExpandVolumeResponse;
use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, ObjectReference, PersistentVolume, PersistentVolumeClaim,
    PersistentVolumeClaimCondition, PersistentVolumeClaimSpec, PersistentVolumeClaimStatus, PersistentVolumeSpec,
    VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::json;
use tonic::Code;

use super::decide::*;
use super::migration::{VolumeOrigin, csi_form};
use super::request::controller_expand_volume_request;
use super::result::*;
use super::steps::{decision_steps, outcome_steps};
use crate::translate::call_failure::CallFailure;
use crate::translate::capabilities::Expander;
use crate::translate::claim::{allocated_size, annotation, conditions, resize_status, status_capacity};
use crate::translate::memory::SetChange;
use crate::translate::patch::{ClaimStatusPatch, ConditionChange, StorageStatusChange, VolumePatch};
use crate::translate::quantity::Size;
use crate::translate::steps::outline;
use sidecar_runtime::events::PlannedEvent;

const DRIVER: &str = "hostpath.csi.k8s.io";
const NOT_REQUIRED: &str = "volume.kubernetes.io/node-expansion-not-required";
const PRE_RESIZE: &str = "volume.alpha.kubernetes.io/pre-resize-capacity";

fn now() -> Time {
    Time(Timestamp::from_second(1_700_000_000).unwrap())
}

fn q(text: &str) -> Quantity {
    Quantity(text.to_string())
}

fn size(text: &str) -> Size {
    Size::parse(&q(text)).unwrap()
}

/// A Bound claim `default/claim01` of volume `pv-1`: spec request, status capacity, allocatedResources, resize status.
fn claim(request: &str, capacity: &str, allocated: Option<&str>, status: &str) -> PersistentVolumeClaim {
    let mut claim = PersistentVolumeClaim::default();
    claim.metadata.name = Some("claim01".into());
    claim.metadata.namespace = Some("default".into());
    claim.metadata.uid = Some("test-uid".into());
    claim.metadata.resource_version = Some("7".into());
    claim.spec = Some(PersistentVolumeClaimSpec {
        volume_name: Some("pv-1".into()),
        resources: Some(VolumeResourceRequirements {
            requests: Some(BTreeMap::from([("storage".into(), q(request))])),
            ..Default::default()
        }),
        ..Default::default()
    });
    claim.status = Some(PersistentVolumeClaimStatus {
        phase: Some("Bound".into()),
        capacity: Some(BTreeMap::from([("storage".into(), q(capacity))])),
        allocated_resources: allocated.map(|a| BTreeMap::from([("storage".into(), q(a))])),
        allocated_resource_statuses: (!status.is_empty()).then(|| BTreeMap::from([("storage".into(), status.into())])),
        ..Default::default()
    });
    claim
}

fn with_conditions(mut claim: PersistentVolumeClaim, types: &[&str]) -> PersistentVolumeClaim {
    claim.status.as_mut().unwrap().conditions = Some(types.iter().map(|t| old_condition(t)).collect());
    claim
}

fn with_annotation(mut claim: PersistentVolumeClaim, key: &str, value: &str) -> PersistentVolumeClaim {
    claim.metadata.annotations.get_or_insert_with(BTreeMap::new).insert(key.into(), value.into());
    claim
}

fn old_condition(type_: &str) -> PersistentVolumeClaimCondition {
    PersistentVolumeClaimCondition {
        type_: type_.into(),
        status: "True".into(),
        message: Some("earlier".into()),
        last_transition_time: Some(Time(Timestamp::from_second(1_600_000_000).unwrap())),
        ..Default::default()
    }
}

/// CSI volume `pv-1` of the driver, bound to `default/claim01` (UID test-uid).
fn volume(capacity: &str) -> PersistentVolume {
    let mut volume = PersistentVolume::default();
    volume.metadata.name = Some("pv-1".into());
    volume.spec = Some(PersistentVolumeSpec {
        access_modes: Some(vec!["ReadWriteOnce".into()]),
        capacity: Some(BTreeMap::from([("storage".into(), q(capacity))])),
        claim_ref: Some(ObjectReference {
            namespace: Some("default".into()),
            name: Some("claim01".into()),
            uid: Some("test-uid".into()),
            ..Default::default()
        }),
        csi: Some(CSIPersistentVolumeSource {
            driver: DRIVER.into(),
            volume_handle: "vol-1".into(),
            ..Default::default()
        }),
        ..Default::default()
    });
    volume
}

fn with_volume_annotation(mut volume: PersistentVolume, key: &str, value: &str) -> PersistentVolume {
    volume.metadata.annotations.get_or_insert_with(BTreeMap::new).insert(key.into(), value.into());
    volume
}

fn config() -> ExpansionConfig {
    ExpansionConfig {
        driver_name: DRIVER.into(),
        expander: Expander::Controller { single_node_multi_writer: false },
        annotate_fs_resize: true,
        handle_volume_inuse_error: true,
    }
}

fn node_only() -> ExpansionConfig {
    ExpansionConfig { expander: Expander::NodeOnly, ..config() }
}

fn status_error(code: Code) -> CallError {
    CallError::Status {
        method: "/csi.v1.Controller/ControllerExpandVolume",
        status: tonic::Status::new(code, "something broke"),
    }
}

fn plan(decision: &ExpansionDecision) -> &ExpandPlan {
    match &decision.action {
        ExpansionAction::Expand(plan) => plan,
        other => panic!("expected an expansion, got {other:?}"),
    }
}

#[test]
fn target_size_rules() {
    // (rule, S, A, P, R, final error, expands in controller, FileSystemResizePending, target)
    type Row = (&'static str, &'static str, Option<&'static str>, &'static str, &'static str, bool, bool, bool, Target);
    let expand = |s: &str| Target::Expand(size(s));
    let table: Vec<Row> = vec![
        (
            "P<S, NodeResizeInfeasible → A",
            "5G",
            Some("4G"),
            "3G",
            "NodeResizeInfeasible",
            false,
            true,
            false,
            expand("4G"),
        ),
        (
            "P<S, NodeResizeInfeasible without A → S",
            "5G",
            None,
            "3G",
            "NodeResizeInfeasible",
            false,
            true,
            false,
            expand("5G"),
        ),
        (
            "P<S, NodeResizePending, P≥A → let kubelet finish",
            "10G",
            Some("3G"),
            "3G",
            "NodeResizePending",
            false,
            true,
            false,
            Target::NodeExpansionPending,
        ),
        (
            "P<S, NodeResizeInProgress, P≥A → let kubelet finish",
            "10G",
            Some("3G"),
            "3G",
            "NodeResizeInProgress",
            false,
            true,
            false,
            Target::NodeExpansionPending,
        ),
        (
            "P<S, NodeResizePending, P<A → A",
            "10G",
            Some("4G"),
            "3G",
            "NodeResizePending",
            false,
            true,
            false,
            expand("4G"),
        ),
        (
            "P<S, ControllerResizeInProgress after an uncertain error → A",
            "5G",
            Some("10G"),
            "3G",
            "ControllerResizeInProgress",
            false,
            true,
            false,
            expand("10G"),
        ),
        (
            "P<S, ControllerResizeInProgress after a final error → S",
            "5G",
            Some("10G"),
            "3G",
            "ControllerResizeInProgress",
            true,
            true,
            false,
            expand("5G"),
        ),
        (
            "P<S, ControllerResizeInProgress without A → S",
            "5G",
            None,
            "3G",
            "ControllerResizeInProgress",
            false,
            true,
            false,
            expand("5G"),
        ),
        (
            "P<S, ControllerResizeInfeasible → S",
            "5G",
            Some("10G"),
            "3G",
            "ControllerResizeInfeasible",
            false,
            true,
            false,
            expand("5G"),
        ),
        ("P<S, no status → S", "2G", None, "1G", "", false, true, false, expand("2G")),
        (
            "P≥S, NodeResizePending → no-op",
            "2G",
            Some("2G"),
            "2G",
            "NodeResizePending",
            false,
            true,
            false,
            Target::NodeExpansionPending,
        ),
        (
            "P≥S, NodeResizeInProgress → no-op",
            "2G",
            Some("2G"),
            "2G",
            "NodeResizeInProgress",
            false,
            true,
            false,
            Target::NodeExpansionPending,
        ),
        (
            "P≥S, NodeResizeInfeasible, controller expander → A",
            "5G",
            Some("10G"),
            "10G",
            "NodeResizeInfeasible",
            false,
            true,
            false,
            expand("10G"),
        ),
        (
            "P≥S, NodeResizeInfeasible, node-only expander → S",
            "5G",
            Some("10G"),
            "10G",
            "NodeResizeInfeasible",
            false,
            false,
            false,
            expand("5G"),
        ),
        (
            "P≥S, NodeResizeInfeasible without A → S",
            "5G",
            None,
            "10G",
            "NodeResizeInfeasible",
            false,
            true,
            false,
            expand("5G"),
        ),
        (
            "P≥S, ControllerResizeInProgress → A",
            "5G",
            Some("10G"),
            "10G",
            "ControllerResizeInProgress",
            false,
            true,
            false,
            expand("10G"),
        ),
        (
            "P≥S, ControllerResizeInfeasible → A (user shrank after expanding)",
            "5G",
            Some("10G"),
            "10G",
            "ControllerResizeInfeasible",
            false,
            true,
            false,
            expand("10G"),
        ),
        ("P≥S, no status, A set → A", "5G", Some("6G"), "10G", "", false, true, false, expand("6G")),
        (
            "P≥S, no status, no A, FileSystemResizePending → no-op (older API server)",
            "1G",
            None,
            "1Gi",
            "",
            false,
            true,
            true,
            Target::AlreadyExpanded,
        ),
        ("P≥S, no status, no A → S (older API server)", "1G", None, "1Gi", "", false, true, false, expand("1G")),
    ];
    for (rule, s, a, p, r, final_error, in_controller, pending, want) in table {
        let sizes = ClaimSizes { requested: size(s), capacity: size("1"), allocated: a.map(size), volume: size(p) };
        assert_eq!(expansion_target(&sizes, r, final_error, in_controller, pending), want, "{rule}");
    }
}

/// The driver's answer in the truth table: `Ok(node_expansion_required)` or an error.
enum Driver {
    Answers { node_expansion_required: bool },
    Fails(Code),
}

#[test]
fn upstream_truth_table() {
    // Upstream's own truth table (external-resizer pkg/controller/expand_and_recover_test.go):
    // spec/status/allocated/R/PV, memory, driver → call, target, R, A, node-expansion-not-required annotation.
    struct Row {
        rule: &'static str,
        claim: PersistentVolumeClaim,
        volume: PersistentVolume,
        config: ExpansionConfig,
        final_error: bool,
        driver: Driver,
        call: Option<&'static str>,
        status: &'static str,
        allocated: &'static str,
        not_required: bool,
    }
    let answers = Driver::Answers { node_expansion_required: true };
    let rows = vec![
        Row {
            rule: "2G/1G/–/–/1Gi → call, NodeResizePending, alloc 2G",
            claim: claim("2G", "1G", None, ""),
            volume: volume("1Gi"),
            config: config(),
            final_error: false,
            driver: answers,
            call: Some("2G"),
            status: "NodeResizePending",
            allocated: "2G",
            not_required: false,
        },
        Row {
            rule: "5G/3G/10G/ControllerResizeInfeasible/3Gi → call with 5G (recovery by shrinking)",
            claim: claim("5G", "3G", Some("10G"), "ControllerResizeInfeasible"),
            volume: volume("3Gi"),
            config: config(),
            final_error: false,
            driver: Driver::Answers { node_expansion_required: true },
            call: Some("5G"),
            status: "NodeResizePending",
            allocated: "5G",
            not_required: false,
        },
        Row {
            rule: "5G/3G/10G/ControllerResizeInProgress, no final error → call with 10G",
            claim: claim("5G", "3G", Some("10G"), "ControllerResizeInProgress"),
            volume: volume("3Gi"),
            config: config(),
            final_error: false,
            driver: Driver::Answers { node_expansion_required: true },
            call: Some("10G"),
            status: "NodeResizePending",
            allocated: "10G",
            not_required: false,
        },
        Row {
            rule: "5G/3G/10G/ControllerResizeInProgress + final error → call with 5G",
            claim: claim("5G", "3G", Some("10G"), "ControllerResizeInProgress"),
            volume: volume("3Gi"),
            config: config(),
            final_error: true,
            driver: Driver::Answers { node_expansion_required: true },
            call: Some("5G"),
            status: "NodeResizePending",
            allocated: "5G",
            not_required: false,
        },
        Row {
            rule: "… retry fails with FailedPrecondition → R stays ControllerResizeInProgress",
            claim: claim("5G", "3G", Some("10G"), "ControllerResizeInProgress"),
            volume: volume("3Gi"),
            config: config(),
            final_error: true,
            driver: Driver::Fails(Code::FailedPrecondition),
            call: Some("5G"),
            status: "ControllerResizeInProgress",
            allocated: "5G",
            not_required: false,
        },
        Row {
            rule: "… retry fails with InvalidArgument → ControllerResizeInfeasible",
            claim: claim("5G", "3G", Some("10G"), "ControllerResizeInProgress"),
            volume: volume("3Gi"),
            config: config(),
            final_error: true,
            driver: Driver::Fails(Code::InvalidArgument),
            call: Some("5G"),
            status: "ControllerResizeInfeasible",
            allocated: "5G",
            not_required: false,
        },
        Row {
            rule: "10G/1G/3G/NodeResizePending/3Gi → no call, nothing changes",
            claim: claim("10G", "1G", Some("3G"), "NodeResizePending"),
            volume: volume("3Gi"),
            config: config(),
            final_error: false,
            driver: Driver::Fails(Code::Internal),
            call: None,
            status: "NodeResizePending",
            allocated: "3G",
            not_required: false,
        },
        Row {
            rule: "10G/1G/3G/NodeResizeInProgress/3Gi → no call, nothing changes",
            claim: claim("10G", "1G", Some("3G"), "NodeResizeInProgress"),
            volume: volume("3Gi"),
            config: config(),
            final_error: false,
            driver: Driver::Fails(Code::Internal),
            call: None,
            status: "NodeResizeInProgress",
            allocated: "3G",
            not_required: false,
        },
        Row {
            rule: "1G/1G/1G/NodeResizePending/1Gi → no call",
            claim: claim("1G", "1G", Some("1G"), "NodeResizePending"),
            volume: volume("1Gi"),
            config: config(),
            final_error: false,
            driver: Driver::Fails(Code::Internal),
            call: None,
            status: "NodeResizePending",
            allocated: "1G",
            not_required: false,
        },
        Row {
            rule: "2G/1G/2G/NodeResizeInfeasible/2Gi → call with 2G, NodeResizePending",
            claim: claim("2G", "1G", Some("2G"), "NodeResizeInfeasible"),
            volume: volume("2Gi"),
            config: config(),
            final_error: false,
            driver: Driver::Answers { node_expansion_required: true },
            call: Some("2G"),
            status: "NodeResizePending",
            allocated: "2G",
            not_required: false,
        },
        Row {
            rule: "node-only driver, 5G/3G/10G/NodeResizeInfeasible/10Gi → \"call\" with 5G",
            claim: claim("5G", "3G", Some("10G"), "NodeResizeInfeasible"),
            volume: volume("10Gi"),
            config: node_only(),
            final_error: false,
            driver: Driver::Answers { node_expansion_required: true },
            call: Some("5G"),
            status: "NodeResizePending",
            allocated: "5G",
            not_required: false,
        },
        Row {
            rule: "no node expansion, 2G/1G → R cleared, node-expansion-not-required set",
            claim: claim("2G", "1G", None, ""),
            volume: volume("1Gi"),
            config: config(),
            final_error: false,
            driver: Driver::Answers { node_expansion_required: false },
            call: Some("2G"),
            status: "",
            allocated: "2G",
            not_required: true,
        },
    ];
    for row in rows {
        let memory = ExpansionMemory { final_error: row.final_error, ..Default::default() };
        let decision = decide_expansion(&row.claim, &row.volume, &row.config, &memory, &now());
        let mut claim = row.claim.clone();
        match (&decision.action, row.call) {
            (ExpansionAction::Expand(plan), Some(call)) => {
                assert_eq!(plan.target, size(call), "{}: target", row.rule);
                assert_eq!(plan.call_driver, row.config.expander.expands_in_controller(), "{}", row.rule);
                claim = plan.mark.apply(&claim);
                let result = match (&row.driver, plan.call_driver) {
                    (_, false) => Ok(ExpandedVolume::node_only(&plan.target)),
                    (Driver::Answers { node_expansion_required }, true) => {
                        let response = ControllerExpandVolumeResponse {
                            capacity_bytes: plan.target.bytes,
                            node_expansion_required: *node_expansion_required,
                        };
                        Ok(ExpandedVolume::from_response(&response, &plan.target))
                    }
                    (Driver::Fails(_), true) => Err(()),
                };
                let error = match &row.driver {
                    Driver::Fails(code) => Some(status_error(*code)),
                    Driver::Answers { .. } => None,
                };
                let result = result.map_err(|()| CallFailure::Driver(error.as_ref().unwrap()));
                let outcome = expansion_outcome(&claim, &row.volume, &row.config, result, &now());
                if let Some(patch) = outcome.claim_patch {
                    claim = patch.apply(&claim);
                }
            }
            (ExpansionAction::Skip(_), None) => {}
            (other, call) => panic!("{}: expected call {call:?}, got {other:?}", row.rule),
        }
        assert_eq!(resize_status(&claim), row.status, "{}: resize status", row.rule);
        assert_eq!(allocated_size(&claim), Some(&q(row.allocated)), "{}: allocated", row.rule);
        assert_eq!(annotation(&claim, NOT_REQUIRED).is_some(), row.not_required, "{}: annotation", row.rule);
    }
}

#[test]
fn sync_preconditions() {
    let mut not_bound = claim("2Gi", "1Gi", None, "");
    not_bound.status.as_mut().unwrap().phase = Some("Pending".into());
    let mut no_volume_name = claim("2Gi", "1Gi", None, "");
    no_volume_name.spec.as_mut().unwrap().volume_name = None;
    let mut other_driver = volume("1Gi");
    other_driver.spec.as_mut().unwrap().csi.as_mut().unwrap().driver = "other.csi.k8s.io".into();
    let mut in_tree = volume("1Gi");
    in_tree.spec.as_mut().unwrap().csi = None;
    let mut no_claim_ref = volume("1Gi");
    no_claim_ref.spec.as_mut().unwrap().claim_ref = None;
    let mut other_namespace = volume("1Gi");
    other_namespace.spec.as_mut().unwrap().claim_ref.as_mut().unwrap().namespace = Some("other".into());
    let mut other_uid = volume("1Gi");
    other_uid.spec.as_mut().unwrap().claim_ref.as_mut().unwrap().uid = Some("old-uid".into());
    // (rule, claim, volume, skip)
    let table = [
        ("not Bound", not_bound, volume("1Gi"), Skip::NotBound),
        ("no spec.volumeName", no_volume_name, volume("1Gi"), Skip::NotBound),
        ("request equals capacity", claim("1Gi", "1Gi", None, ""), volume("1Gi"), Skip::NoExpansionRequested),
        ("request below capacity", claim("1Gi", "2Gi", None, ""), volume("2Gi"), Skip::NoExpansionRequested),
        ("another driver's PV", claim("2Gi", "1Gi", None, ""), other_driver, Skip::OtherDriver),
        ("an in-tree PV (the driver replaces no plugin)", claim("2Gi", "1Gi", None, ""), in_tree, Skip::OtherDriver),
        ("no claimRef", claim("2Gi", "1Gi", None, ""), no_claim_ref, Skip::ClaimRefMismatch),
        ("claimRef in another namespace", claim("2Gi", "1Gi", None, ""), other_namespace, Skip::ClaimRefMismatch),
        ("claimRef of another UID", claim("2Gi", "1Gi", None, ""), other_uid, Skip::ClaimRefMismatch),
        (
            "a malformed request is skipped, never fatal",
            claim("2GB", "1Gi", None, ""),
            volume("1Gi"),
            Skip::InvalidSize { field: "spec.resources.requests.storage", value: "2GB".into() },
        ),
    ];
    for (rule, claim, volume, want) in table {
        let decision = decide_expansion(&claim, &volume, &config(), &ExpansionMemory::default(), &now());
        assert_eq!(decision.action, ExpansionAction::Skip(want.clone()), "{rule}");
        assert_eq!(decision.memory, ExpansionMemoryChange::default(), "{rule}");
    }
}

/// CSI migration: an in-tree EBS PV handed over to `ebs.csi.aws.com` is expanded with its translated handle, and only
/// its capacity is written back; the PV keeps its in-tree source.
#[test]
fn migrated_in_tree_volume() {
    const EBS: &str = "ebs.csi.aws.com";
    let mut in_tree = volume("1Gi");
    let spec = in_tree.spec.as_mut().unwrap();
    spec.csi = None;
    spec.aws_elastic_block_store = Some(k8s_openapi::api::core::v1::AWSElasticBlockStoreVolumeSource {
        volume_id: "aws://us-east-1a/vol-0123".into(),
        ..Default::default()
    });
    let ebs = ExpansionConfig { driver_name: EBS.into(), ..config() };
    let handed_over = with_annotation(claim("2Gi", "1Gi", None, ""), "volume.kubernetes.io/storage-resizer", EBS);

    let decision = decide_expansion(&handed_over, &in_tree, &ebs, &ExpansionMemory::default(), &now());
    let plan = plan(&decision);
    assert_eq!(plan.origin, VolumeOrigin::Migrated);
    assert_eq!(plan.target, size("2Gi"));
    let not_handed_over =
        decide_expansion(&claim("2Gi", "1Gi", None, ""), &in_tree, &ebs, &ExpansionMemory::default(), &now());
    assert_eq!(not_handed_over.action, ExpansionAction::Skip(Skip::OtherDriver), "KCM has not handed it over");

    let csi_volume = csi_form(&in_tree, plan.origin).unwrap();
    let request = controller_expand_volume_request(&csi_volume, &plan.target, false, Default::default()).unwrap();
    assert_eq!(request.volume_id, "vol-0123");
    assert_eq!(request.capacity_range.unwrap().required_bytes, size("2Gi").bytes);

    let response = ControllerExpandVolumeResponse { capacity_bytes: size("2Gi").bytes, node_expansion_required: false };
    let answer = ExpandedVolume::from_response(&response, &plan.target);
    let outcome = expansion_outcome(&handed_over, &in_tree, &ebs, Ok(answer), &now());
    let patch = outcome.volume_patch.expect("the capacity is written back");
    assert_eq!(patch, VolumePatch { capacity: Some(q("2Gi")), ..Default::default() });
    let stored = patch.apply(&in_tree);
    let stored_spec = stored.spec.unwrap();
    assert!(stored_spec.csi.is_none(), "the PV stays in its in-tree form");
    assert_eq!(stored_spec.aws_elastic_block_store, in_tree.spec.as_ref().unwrap().aws_elastic_block_store);
}

#[test]
fn pre_resize_capacity_cleanup() {
    let annotated = |capacity| with_volume_annotation(volume(capacity), PRE_RESIZE, "1Gi");
    let mut other_driver = annotated("2Gi");
    other_driver.spec.as_mut().unwrap().csi.as_mut().unwrap().driver = "other.csi.k8s.io".into();
    let removal = Some(VolumePatch { annotations: BTreeMap::from([(PRE_RESIZE.into(), None)]), ..Default::default() });
    // (rule, claim, volume, gate, cleanup)
    let table = [
        (
            "node step done (capacity ≥ PV) → remove",
            claim("2Gi", "2Gi", None, ""),
            annotated("2Gi"),
            true,
            removal.clone(),
        ),
        ("node step pending → keep", claim("2Gi", "1Gi", None, ""), annotated("2Gi"), true, None),
        ("AnnotateFsResize off → keep", claim("2Gi", "2Gi", None, ""), annotated("2Gi"), false, None),
        ("no annotation, nothing to do", claim("2Gi", "2Gi", None, ""), volume("2Gi"), true, None),
        ("done before the driver check, as upstream", claim("2Gi", "2Gi", None, ""), other_driver, true, removal),
    ];
    for (rule, claim, volume, gate, want) in table {
        let config = ExpansionConfig { annotate_fs_resize: gate, ..config() };
        let decision = decide_expansion(&claim, &volume, &config, &ExpansionMemory::default(), &now());
        assert_eq!(decision.volume_cleanup, want, "{rule}");
    }
}

#[test]
fn marking_in_progress() {
    let resizing = ConditionChange::Set(PersistentVolumeClaimCondition {
        type_: "Resizing".into(),
        status: "True".into(),
        last_transition_time: Some(now()),
        ..Default::default()
    });
    let others = ["Resizing", "FileSystemResizePending", "ControllerResizeError", "NodeResizeError", "ModifyingVolume"];
    // (rule, claim, mark)
    let table = [
        (
            "rewrite: Resizing replaces every resize condition, ControllerResizeInProgress, allocatedResources, annotation removed",
            with_annotation(
                with_conditions(claim("5G", "3G", Some("10G"), "ControllerResizeInfeasible"), &others),
                NOT_REQUIRED,
                "true",
            ),
            ClaimStatusPatch {
                resource_version: Some("7".into()),
                annotations: BTreeMap::from([(NOT_REQUIRED.into(), None)]),
                conditions: vec![
                    ConditionChange::Remove("FileSystemResizePending".into()),
                    ConditionChange::Remove("ControllerResizeError".into()),
                    ConditionChange::Remove("NodeResizeError".into()),
                    resizing.clone(),
                ],
                allocated_resources: Some(q("5G")),
                allocated_resource_status: Some(StorageStatusChange::Set("ControllerResizeInProgress")),
                ..Default::default()
            },
        ),
        (
            "same size as allocated: status kept, conditions kept",
            with_conditions(claim("5G", "3G", Some("10G"), "ControllerResizeInProgress"), &others),
            ClaimStatusPatch {
                resource_version: Some("7".into()),
                conditions: vec![resizing.clone()],
                allocated_resources: Some(q("10G")),
                ..Default::default()
            },
        ),
    ];
    for (rule, claim, want) in table {
        let decision = decide_expansion(&claim, &volume("3Gi"), &config(), &ExpansionMemory::default(), &now());
        assert_eq!(plan(&decision).mark, want, "{rule}");
    }
    let decision = decide_expansion(
        &claim("2Gi", "1Gi", None, ""),
        &volume("1Gi"),
        &config(),
        &ExpansionMemory::default(),
        &now(),
    );
    assert_eq!(
        plan(&decision).mark.strategic_merge_patch(),
        json!({
            "metadata": {"resourceVersion": "7"},
            "status": {
                "conditions": [{"type": "Resizing", "status": "True", "reason": null, "message": null,
                                "lastProbeTime": null, "lastTransitionTime": "2023-11-14T22:13:20Z"}],
                "allocatedResources": {"storage": "2Gi"},
                "allocatedResourceStatuses": {"storage": "ControllerResizeInProgress"},
            }
        }),
        "a strategic merge patch of the status with the resourceVersion"
    );
    assert_eq!(
        plan(&decision).resizing,
        PlannedEvent::normal("Resizing", "External resizer is resizing volume pv-1"),
        "a Normal Resizing event before the call"
    );
}

#[test]
fn slow_retry_after_infeasible() {
    let remaining = Some(Duration::from_secs(120));
    // (rule, claim, PV, slow set, action is a delay, slow-set change)
    let table = [
        (
            "same size as allocated, in the slow set → delay, no write, no call",
            claim("10G", "3G", Some("10G"), "ControllerResizeInfeasible"),
            "3Gi",
            remaining,
            true,
            SetChange::Insert,
        ),
        (
            "first sight of ControllerResizeInfeasible → into the slow set, tried once more",
            claim("10G", "3G", Some("10G"), "ControllerResizeInfeasible"),
            "3Gi",
            None,
            false,
            SetChange::Insert,
        ),
        (
            "a new size bypasses the slow set",
            claim("5G", "3G", Some("10G"), "ControllerResizeInfeasible"),
            "3Gi",
            remaining,
            false,
            SetChange::Insert,
        ),
        (
            "in the slow set but retrying the allocated size after an uncertain error",
            claim("5G", "3G", Some("10G"), "ControllerResizeInProgress"),
            "3Gi",
            remaining,
            true,
            SetChange::Keep,
        ),
    ];
    for (rule, claim, capacity, slow_retry, delayed, slow_set) in table {
        let memory = ExpansionMemory { slow_retry, ..Default::default() };
        let decision = decide_expansion(&claim, &volume(capacity), &config(), &memory, &now());
        assert_eq!(decision.memory.slow_set, slow_set, "{rule}");
        match &decision.action {
            ExpansionAction::DelayRetry { after, message } => {
                assert!(delayed, "{rule}: unexpected delay");
                assert_eq!(Some(*after), slow_retry, "{rule}");
                assert_eq!(
                    message,
                    "skipping volume expansion for pvc default/claim01, because expansion previously failed with infeasible error",
                    "{rule}"
                );
            }
            ExpansionAction::Expand(_) => assert!(!delayed, "{rule}: expected a delay"),
            other => panic!("{rule}: {other:?}"),
        }
    }
}

#[test]
fn offline_expansion_gate() {
    let blocked = PlannedEvent::warning(
        "VolumeResizeFailed",
        "Unable to expand default/claim01 because CSI driver hostpath.csi.k8s.io only supports offline expansion and volume is currently in-use",
    );
    // (rule, handle flag, in-use error, used by pod, blocked)
    let table = [
        ("FailedPrecondition earlier and a pod uses the claim → no call", true, true, true, true),
        ("no pod uses it → call", true, true, false, false),
        ("no earlier FailedPrecondition → call", true, false, true, false),
        ("--handle-volume-inuse-error=false: never blocked", false, true, true, false),
    ];
    for (rule, handle, in_use_error, used_by_pod, want) in table {
        let config = ExpansionConfig { handle_volume_inuse_error: handle, ..config() };
        let memory = ExpansionMemory { in_use_error, used_by_pod, ..Default::default() };
        let decision = decide_expansion(&claim("2Gi", "1Gi", None, ""), &volume("1Gi"), &config, &memory, &now());
        let plan = plan(&decision);
        assert_eq!(plan.in_use, want.then(|| blocked.clone()), "{rule}");
        let forget = if want { SetChange::Keep } else { SetChange::Remove };
        assert_eq!(plan.before_call.in_use_errors, forget, "{rule}: the in-use error is forgotten before a call");
    }
}

#[test]
fn failed_expansions() {
    let timeout =
        CallError::Timeout { method: "/csi.v1.Controller/ControllerExpandVolume", timeout: Duration::from_secs(10) };
    let claim = with_conditions(claim("2Gi", "1Gi", Some("2Gi"), "ControllerResizeInProgress"), &["Resizing"]);
    // (rule, failure, resize status written, ControllerResizeError written, slow set, final errors, in-use errors)
    type Row<'a> = (&'static str, CallFailure<'a>, Option<&'static str>, bool, SetChange, SetChange, SetChange);
    let errors: Vec<(Code, CallError)> = [
        Code::InvalidArgument,
        Code::OutOfRange,
        Code::NotFound,
        Code::Internal,
        Code::FailedPrecondition,
        Code::Cancelled,
        Code::DeadlineExceeded,
        Code::Unavailable,
        Code::ResourceExhausted,
        Code::Aborted,
    ]
    .into_iter()
    .map(|code| (code, status_error(code)))
    .collect();
    let error = |code: Code| CallFailure::Driver(&errors.iter().find(|(c, _)| *c == code).unwrap().1);
    use SetChange::{Insert, Keep, Remove};
    let table: Vec<Row> = vec![
        (
            "InvalidArgument is infeasible",
            error(Code::InvalidArgument),
            Some("ControllerResizeInfeasible"),
            true,
            Keep,
            Insert,
            Keep,
        ),
        (
            "OutOfRange is infeasible",
            error(Code::OutOfRange),
            Some("ControllerResizeInfeasible"),
            true,
            Keep,
            Insert,
            Keep,
        ),
        ("NotFound is infeasible", error(Code::NotFound), Some("ControllerResizeInfeasible"), true, Keep, Insert, Keep),
        ("Internal is final, not infeasible", error(Code::Internal), None, true, Remove, Insert, Keep),
        (
            "FailedPrecondition is final and remembered as in-use",
            error(Code::FailedPrecondition),
            None,
            true,
            Remove,
            Insert,
            Insert,
        ),
        ("Canceled is not final", error(Code::Cancelled), None, false, Remove, Remove, Keep),
        ("DeadlineExceeded is not final", error(Code::DeadlineExceeded), None, false, Remove, Remove, Keep),
        ("Unavailable is not final", error(Code::Unavailable), None, false, Remove, Remove, Keep),
        ("ResourceExhausted is not final", error(Code::ResourceExhausted), None, false, Remove, Remove, Keep),
        ("Aborted is not final", error(Code::Aborted), None, false, Remove, Remove, Keep),
        ("a timeout is not final", CallFailure::Driver(&timeout), None, false, Remove, Remove, Keep),
        (
            "a non-gRPC error is not final",
            CallFailure::NotCalled("no secret".into()),
            None,
            false,
            Remove,
            Remove,
            Keep,
        ),
    ];
    for (rule, failure, status, error_condition, slow_set, final_errors, in_use_errors) in table {
        let text = failure.text();
        let outcome = expansion_outcome(&claim, &volume("1Gi"), &config(), Err(failure), &now());
        assert!(outcome.failed, "{rule}: requeued with backoff");
        assert_eq!(outcome.volume_patch, None, "{rule}");
        assert_eq!(outcome.memory, ExpansionMemoryChange { slow_set, final_errors, in_use_errors }, "{rule}: memory");
        assert_eq!(
            outcome.event,
            PlannedEvent::warning(
                "VolumeResizeFailed",
                format!("resize volume \"pv-1\" by resizer \"hostpath.csi.k8s.io\" failed: {text}")
            ),
            "every failure is a VolumeResizeFailed event: {rule}"
        );
        match &outcome.claim_patch {
            None => assert!(!error_condition, "{rule}: expected a ControllerResizeError"),
            Some(patch) => {
                assert!(error_condition, "{rule}: unexpected patch {patch:?}");
                assert_eq!(patch.resource_version, None, "no resourceVersion check");
                assert_eq!(patch.allocated_resource_status, status.map(StorageStatusChange::Set), "{rule}");
                let written = patch.apply(&claim);
                let types: Vec<_> = conditions(&written).iter().map(|c| c.type_.as_str()).collect();
                assert_eq!(types, ["Resizing", "ControllerResizeError"], "{rule}: other conditions kept");
                assert_eq!(
                    conditions(&written)[1].message.as_deref(),
                    Some(format!("failed to expand pvc with {text}").as_str()),
                    "{rule}"
                );
            }
        }
    }
}

#[test]
fn successful_expansions() {
    let pending_condition = PersistentVolumeClaimCondition {
        type_: "FileSystemResizePending".into(),
        status: "True".into(),
        message: Some("Waiting for user to (re-)start a pod to finish file system resize of volume on node.".into()),
        last_transition_time: Some(now()),
        ..Default::default()
    };
    let in_progress = with_annotation(
        with_conditions(
            claim("2Gi", "1Gi", Some("2Gi"), "ControllerResizeInProgress"),
            &["Resizing", "ModifyingVolume"],
        ),
        NOT_REQUIRED,
        "true",
    );
    let answer = |capacity: i64, node| {
        ExpandedVolume::from_response(
            &ControllerExpandVolumeResponse { capacity_bytes: capacity, node_expansion_required: node },
            &size("2Gi"),
        )
    };

    // Node expansion required.
    let outcome = expansion_outcome(&in_progress, &volume("1Gi"), &config(), Ok(answer(3 << 30, true)), &now());
    assert!(!outcome.failed);
    assert_eq!(
        outcome.volume_patch,
        Some(VolumePatch {
            capacity: Some(q("3Gi")),
            annotations: BTreeMap::from([(PRE_RESIZE.into(), Some("1Gi".into()))]),
            ..Default::default()
        }),
        "the PV takes the driver's size; pre-resize-capacity = the claim's capacity before"
    );
    assert_eq!(
        outcome.claim_patch,
        Some(ClaimStatusPatch {
            resource_version: Some("7".into()),
            annotations: BTreeMap::from([(NOT_REQUIRED.into(), None)]),
            conditions: vec![ConditionChange::Set(pending_condition.clone())],
            allocated_resource_status: Some(StorageStatusChange::Set("NodeResizePending")),
            ..Default::default()
        }),
        "FileSystemResizePending (Resizing kept), NodeResizePending, annotation removed, capacity untouched"
    );
    assert_eq!(
        outcome.event,
        PlannedEvent::normal("FileSystemResizeRequired", "Require file system resize of volume on node")
    );
    assert_eq!(
        outcome.memory,
        ExpansionMemoryChange { slow_set: SetChange::Remove, final_errors: SetChange::Remove, ..Default::default() },
        "the final error and slow-set entries are cleared"
    );

    // The pre-resize-capacity annotation is written once, and only with AnnotateFsResize.
    let annotated = with_volume_annotation(volume("1Gi"), PRE_RESIZE, "512Mi");
    let outcome = expansion_outcome(&in_progress, &annotated, &config(), Ok(answer(2 << 30, true)), &now());
    assert!(outcome.volume_patch.unwrap().annotations.is_empty(), "already annotated");
    let no_gate = ExpansionConfig { annotate_fs_resize: false, ..config() };
    let outcome = expansion_outcome(&in_progress, &volume("1Gi"), &no_gate, Ok(answer(2 << 30, true)), &now());
    assert!(outcome.volume_patch.unwrap().annotations.is_empty(), "AnnotateFsResize off");

    // No node expansion.
    let outcome = expansion_outcome(&in_progress, &volume("1Gi"), &config(), Ok(answer(2 << 30, false)), &now());
    assert_eq!(
        outcome.volume_patch,
        Some(VolumePatch { capacity: Some(q("2Gi")), ..Default::default() }),
        "no pre-resize-capacity without a node step"
    );
    let patch = outcome.claim_patch.unwrap();
    let written = patch.apply(&in_progress);
    assert_eq!(status_capacity(&written), Some(&q("2Gi")), "capacity = the driver's size");
    assert_eq!(
        conditions(&written).iter().map(|c| c.type_.as_str()).collect::<Vec<_>>(),
        ["ModifyingVolume"],
        "resize conditions dropped, others kept"
    );
    assert_eq!(written.status.as_ref().unwrap().allocated_resource_statuses, None, "R deleted");
    assert_eq!(allocated_size(&written), Some(&q("2Gi")), "allocatedResources never cleared");
    assert_eq!(annotation(&written, NOT_REQUIRED), Some("true"), "annotation kept (already there)");
    assert_eq!(patch.resource_version, Some("7".into()), "resourceVersion-checked");
    assert_eq!(outcome.event, PlannedEvent::normal("VolumeResizeSuccessful", "Resize volume succeeded"));
    let fresh = claim("2Gi", "1Gi", Some("2Gi"), "ControllerResizeInProgress");
    let outcome = expansion_outcome(&fresh, &volume("1Gi"), &config(), Ok(answer(2 << 30, false)), &now());
    assert_eq!(
        outcome.claim_patch.unwrap().annotations,
        BTreeMap::from([(NOT_REQUIRED.into(), Some("true".into()))]),
        "node-expansion-not-required added"
    );

    // external-resizer issues #225, #226: a zero answer is not written as a zero capacity.
    assert_eq!(answer(0, false).capacity, size("2Gi"), "deliberate difference: capacity_bytes 0 → the requested size");
    assert_eq!(
        ExpandedVolume::node_only(&size("5G")),
        ExpandedVolume { capacity: size("5G"), node_expansion_required: true },
        "a node-only driver: the PV takes the target, kubelet expands"
    );
}

#[test]
fn planned_steps_before_the_call() {
    let offline = ExpansionMemory { in_use_error: true, used_by_pod: true, ..Default::default() };
    let slow = ExpansionMemory { slow_retry: Some(Duration::from_secs(120)), ..Default::default() };
    let mark = r#"patch claim and go on with it, else warn "marking the expansion failed" unless a Conflict"#;
    let resizing = "event Normal Resizing: External resizer is resizing volume pv-1";
    let call = |call_driver| {
        format!(
            r#"call ExpandCall {{ target: Size {{ quantity: Quantity("2Gi"), bytes: 2147483648 }}, call_driver: {call_driver}, origin: Csi }}"#
        )
    };
    // (rule, claim, PV, config, memory, steps)
    let table = [
        (
            "nothing requested: nothing written",
            claim("1Gi", "1Gi", None, ""),
            volume("1Gi"),
            config(),
            ExpansionMemory::default(),
            vec!["log Trace: no expansion: NoExpansionRequested".to_string(), "finish Done".into()],
        ),
        (
            "the pre-resize-capacity annotation is removed before anything else",
            claim("2Gi", "2Gi", None, ""),
            with_volume_annotation(volume("2Gi"), PRE_RESIZE, "1Gi"),
            config(),
            ExpansionMemory::default(),
            vec![
                r#"patch volume, else warn "removing the pre-resize-capacity annotation failed""#.to_string(),
                "log Trace: no expansion: NoExpansionRequested".into(),
                "finish Done".into(),
            ],
        ),
        (
            "a size that does not parse is warned and left alone",
            claim("lots", "1Gi", None, ""),
            volume("1Gi"),
            config(),
            ExpansionMemory::default(),
            vec![
                r#"log Warn: cannot read a size; not expanding: spec.resources.requests.storage is "lots""#.to_string(),
                "finish Done".into(),
            ],
        ),
        (
            "an infeasible size tried recently waits out the slow set, without a write",
            claim("10G", "3G", Some("10G"), "ControllerResizeInfeasible"),
            volume("3Gi"),
            config(),
            slow,
            vec![
                "remember".to_string(),
                "log Info: skipping volume expansion for pvc default/claim01, because expansion previously failed with infeasible error".into(),
                "finish RetryAfter(120s)".into(),
            ],
        ),
        (
            "an expansion: mark, forget the in-use error, Resizing, then the call",
            claim("2Gi", "1Gi", None, ""),
            volume("1Gi"),
            config(),
            ExpansionMemory::default(),
            vec![mark.to_string(), "remember".into(), resizing.into(), "log Info: expanding volume to 2Gi".into(), call(true)],
        ),
        (
            "a node-only driver is not called",
            claim("2Gi", "1Gi", None, ""),
            volume("1Gi"),
            node_only(),
            ExpansionMemory::default(),
            vec![mark.to_string(), "remember".into(), resizing.into(), "log Info: expanding volume to 2Gi".into(), call(false)],
        ),
        (
            "offline-only driver and a pod uses the claim: mark, warn, retry without a call",
            claim("2Gi", "1Gi", None, ""),
            volume("1Gi"),
            config(),
            offline,
            vec![
                mark.to_string(),
                "log Info: offline-only expansion waits until no pod uses the claim".into(),
                "event Warning VolumeResizeFailed: Unable to expand default/claim01 because CSI driver hostpath.csi.k8s.io only supports offline expansion and volume is currently in-use".into(),
                "finish Retry".into(),
            ],
        ),
        (
            "a claim written by an older API server is warned about first",
            claim("2Gi", "1Gi", None, ""),
            volume("2Gi"),
            config(),
            ExpansionMemory::default(),
            vec![
                format!("log Warn: {OLD_API_SERVER_WARNING}"),
                mark.into(),
                "remember".into(),
                "event Normal Resizing: External resizer is resizing volume pv-1".into(),
                "log Info: expanding volume to 2Gi".into(),
                call(true),
            ],
        ),
    ];
    for (rule, claim, volume, config, memory, want) in table {
        let decision = decide_expansion(&claim, &volume, &config, &memory, &now());
        assert_eq!(outline(&decision_steps(decision)), want, "{rule}");
    }
}

#[test]
fn planned_steps_after_the_call() {
    let marked = claim("2Gi", "1Gi", Some("2Gi"), "ControllerResizeInProgress");
    let invalid = status_error(Code::InvalidArgument);
    let unavailable = status_error(Code::Unavailable);
    let expanded = |node_expansion_required| Ok(ExpandedVolume { capacity: size("2Gi"), node_expansion_required });
    let failed = "resize volume \"pv-1\" by resizer \"hostpath.csi.k8s.io\" failed";
    let else_failed = "else resize of pv-1 by hostpath.csi.k8s.io failed";
    // (rule, answer, steps)
    let table = [
        (
            "the node step remains: PV, then claim, then FileSystemResizeRequired",
            expanded(true),
            vec![
                "remember".to_string(),
                format!("patch volume, {else_failed}"),
                format!("patch claim and go on with it, {else_failed}"),
                "event Normal FileSystemResizeRequired: Require file system resize of volume on node".into(),
                "log Info: expansion done: Require file system resize of volume on node".into(),
                "finish Done".into(),
            ],
        ),
        (
            "done in the controller: PV, then claim, then VolumeResizeSuccessful",
            expanded(false),
            vec![
                "remember".to_string(),
                format!("patch volume, {else_failed}"),
                format!("patch claim and go on with it, {else_failed}"),
                "event Normal VolumeResizeSuccessful: Resize volume succeeded".into(),
                "log Info: expansion done: Resize volume succeeded".into(),
                "finish Done".into(),
            ],
        ),
        (
            "an infeasible error: the claim records it, a warning, a retry",
            Err(CallFailure::Driver(&invalid)),
            vec![
                "remember".to_string(),
                format!("patch claim and go on with it, {else_failed}"),
                format!(
                    "event Warning VolumeResizeFailed: {failed}: rpc error: code = InvalidArgument desc = something broke"
                ),
                format!(
                    "log Warn: expansion failed: {failed}: rpc error: code = InvalidArgument desc = something broke"
                ),
                "finish Retry".into(),
            ],
        ),
        (
            "an error that is not final writes nothing, a warning, a retry",
            Err(CallFailure::Driver(&unavailable)),
            vec![
                "remember".to_string(),
                format!(
                    "event Warning VolumeResizeFailed: {failed}: rpc error: code = Unavailable desc = something broke"
                ),
                format!("log Warn: expansion failed: {failed}: rpc error: code = Unavailable desc = something broke"),
                "finish Retry".into(),
            ],
        ),
    ];
    for (rule, answer, want) in table {
        let outcome = expansion_outcome(&marked, &volume("1Gi"), &config(), answer, &now());
        assert_eq!(outline(&outcome_steps(outcome, "pv-1", DRIVER)), want, "{rule}");
    }
}
