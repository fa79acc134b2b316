//! Which volumes a dynamic group snapshot is of: its selector → the claims of its namespace → their bound CSI
//! volumes (upstream: external-snapshotter, pkg/common-controller/groupsnapshot_controller_helper.go,
//! `getVolumesFromVolumeGroupSnapshot`). Every claim that cannot be snapshotted is reported, each in its own event
//! naming it, so that a user fixes them all at once (upstream stops at the first).

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use sidecar_runtime::events::PlannedEvent;
use snapshot_api::VolumeGroupSnapshot;

use super::names::{EVENT_CONTENT_CREATION_FAILED, EVENT_CREATE_CONTENT_FAILED};
use super::selector;

/// One claim of the group and the volume it is bound to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SelectedVolume {
    pub claim_name: String,
    pub volume_name: String,
    /// The volume's CSI driver.
    pub driver: String,
    /// The volume's CSI handle: what CreateVolumeGroupSnapshot is asked to snapshot.
    pub volume_handle: String,
}

/// Why no content can be created yet: one warning per claim (or one for the selector). The group snapshot's
/// `status.error` gets [`Refusal::message`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub events: Vec<PlannedEvent>,
}

impl Refusal {
    fn one(event: PlannedEvent) -> Refusal {
        Refusal { events: vec![event] }
    }

    /// Every event's message, in order, for the group snapshot's status.
    pub fn message(&self) -> String {
        refusal_message(&self.events)
    }
}

/// The text of a refusal for `status.error`: every event's message, in order, joined by `; `.
pub fn refusal_message(events: &[PlannedEvent]) -> String {
    events.iter().map(|e| e.message.as_str()).collect::<Vec<_>>().join("; ")
}

/// The volumes of a dynamic group snapshot, in claim-name order (the order the API server lists claims in, which is
/// the order upstream puts the handles in). `claims` may hold claims of any namespace; `volume` looks a
/// PersistentVolume up by name.
pub fn select_volumes<'v>(
    group: &VolumeGroupSnapshot,
    claims: &[PersistentVolumeClaim],
    volume: impl Fn(&str) -> Option<&'v PersistentVolume>,
) -> Result<Vec<SelectedVolume>, Refusal> {
    let namespace = group.metadata.namespace.as_deref().unwrap_or_default();
    let Some(group_selector) = group.spec.source.selector.as_ref() else {
        return Err(Refusal::one(PlannedEvent::warning(
            EVENT_CONTENT_CREATION_FAILED,
            "the group snapshot has no label selector",
        )));
    };
    let shown = selector::format(group_selector);
    let mut selected = Vec::new();
    for claim in claims.iter().filter(|c| c.metadata.namespace.as_deref() == Some(namespace)) {
        let labels = claim.metadata.labels.clone().unwrap_or_default();
        match selector::matches(group_selector, &labels) {
            Ok(true) => selected.push(claim),
            Ok(false) => {}
            Err(err) => {
                let message = format!("invalid label selector {shown} of group snapshot: {err}");
                return Err(Refusal::one(PlannedEvent::warning(EVENT_CONTENT_CREATION_FAILED, message)));
            }
        }
    }
    if selected.is_empty() {
        let message = format!("label selector {shown} for group snapshot not applied to any PVC");
        return Err(Refusal::one(PlannedEvent::warning(EVENT_CONTENT_CREATION_FAILED, message)));
    }
    selected.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let (volumes, refusals): (Vec<_>, Vec<_>) =
        selected.into_iter().map(|claim| claim_volume(claim, &volume)).partition(Result::is_ok);
    if refusals.is_empty() {
        Ok(volumes.into_iter().flatten().collect())
    } else {
        Err(Refusal { events: refusals.into_iter().filter_map(Result::err).collect() })
    }
}

/// The bound CSI volume of one selected claim, or the warning that says why it cannot be snapshotted.
fn claim_volume<'v>(
    claim: &PersistentVolumeClaim,
    volume: &impl Fn(&str) -> Option<&'v PersistentVolume>,
) -> Result<SelectedVolume, PlannedEvent> {
    let claim_name = claim.metadata.name.clone().unwrap_or_default();
    let volume_name = claim.spec.as_ref().and_then(|s| s.volume_name.clone()).unwrap_or_default();
    let bound = claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
    if !bound || volume_name.is_empty() {
        let message =
            format!("the PVC {claim_name} is not yet bound to a PV, will not attempt to take a group snapshot");
        return Err(PlannedEvent::warning(EVENT_CONTENT_CREATION_FAILED, message));
    }
    let Some(pv) = volume(&volume_name) else {
        let message = format!("the PV {volume_name} bound to PVC {claim_name} does not exist");
        return Err(PlannedEvent::warning(EVENT_CONTENT_CREATION_FAILED, message));
    };
    if !points_back(pv, claim) {
        let message = format!("the PV {volume_name} is not bound to PVC {claim_name}");
        return Err(PlannedEvent::warning(EVENT_CONTENT_CREATION_FAILED, message));
    }
    let Some(csi) = pv.spec.as_ref().and_then(|s| s.csi.as_ref()) else {
        let message = format!("Cannot snapshot a non-CSI volume: PV {volume_name} of PVC {claim_name}");
        return Err(PlannedEvent::warning(EVENT_CREATE_CONTENT_FAILED, message));
    };
    Ok(SelectedVolume { claim_name, volume_name, driver: csi.driver.clone(), volume_handle: csi.volume_handle.clone() })
}

/// The volume's claimRef names the claim (and its UID, when the reference has one).
fn points_back(pv: &PersistentVolume, claim: &PersistentVolumeClaim) -> bool {
    let Some(reference) = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else { return false };
    reference.name == claim.metadata.name
        && reference.namespace == claim.metadata.namespace
        && reference.uid.as_ref().is_none_or(|uid| Some(uid) == claim.metadata.uid.as_ref())
}

/// Every volume must belong to the class's driver: CreateVolumeGroupSnapshot goes to one driver.
pub fn check_driver(volumes: &[SelectedVolume], class_name: &str, class_driver: &str) -> Result<(), Refusal> {
    let events: Vec<PlannedEvent> = volumes
        .iter()
        .filter(|v| v.driver != class_driver)
        .map(|v| {
            let message = format!(
                "Volume CSI driver ({}) of PVC {} mismatch with VolumeGroupSnapshotClass {class_name} ({class_driver})",
                v.driver, v.claim_name
            );
            PlannedEvent::warning(EVENT_CREATE_CONTENT_FAILED, message)
        })
        .collect();
    if events.is_empty() { Ok(()) } else { Err(Refusal { events }) }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::{
        CSIPersistentVolumeSource, ObjectReference, PersistentVolumeClaimSpec, PersistentVolumeClaimStatus,
        PersistentVolumeSpec,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement, ObjectMeta};
    use snapshot_api::{VolumeGroupSnapshotSource, VolumeGroupSnapshotSpec};

    use super::*;

    pub(crate) fn group(selector: Option<LabelSelector>) -> VolumeGroupSnapshot {
        VolumeGroupSnapshot {
            metadata: ObjectMeta {
                name: Some("group".into()),
                namespace: Some("ns".into()),
                uid: Some("group-uid".into()),
                resource_version: Some("7".into()),
                ..Default::default()
            },
            spec: VolumeGroupSnapshotSpec {
                source: VolumeGroupSnapshotSource { selector, volume_group_snapshot_content_name: None },
                volume_group_snapshot_class_name: None,
            },
            status: None,
        }
    }

    fn app(value: &str) -> Option<LabelSelector> {
        Some(LabelSelector { match_labels: Some(BTreeMap::from([("app".into(), value.into())])), ..Default::default() })
    }

    /// A claim in `ns`, labelled `app=<app>`, bound (or not) to `pv-<name>`.
    pub(crate) fn claim(name: &str, app: &str, bound: bool) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                uid: Some(format!("uid-{name}")),
                labels: Some(BTreeMap::from([("app".into(), app.into())])),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                volume_name: bound.then(|| format!("pv-{name}")),
                ..Default::default()
            }),
            status: Some(PersistentVolumeClaimStatus {
                phase: Some(if bound { "Bound" } else { "Pending" }.into()),
                ..Default::default()
            }),
        }
    }

    /// The CSI volume `pv-<claim>` of `driver` (no CSI source when empty), bound to the claim in `ns`.
    pub(crate) fn volume(claim: &str, driver: &str) -> PersistentVolume {
        PersistentVolume {
            metadata: ObjectMeta { name: Some(format!("pv-{claim}")), ..Default::default() },
            spec: Some(PersistentVolumeSpec {
                claim_ref: Some(ObjectReference {
                    name: Some(claim.into()),
                    namespace: Some("ns".into()),
                    uid: Some(format!("uid-{claim}")),
                    ..Default::default()
                }),
                csi: (!driver.is_empty()).then(|| CSIPersistentVolumeSource {
                    driver: driver.into(),
                    volume_handle: format!("handle-{claim}"),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn lookup<'v>(volumes: &'v [PersistentVolume]) -> impl Fn(&str) -> Option<&'v PersistentVolume> {
        move |name| volumes.iter().find(|v| v.metadata.name.as_deref() == Some(name))
    }

    pub(crate) fn selected(claim: &str, driver: &str) -> SelectedVolume {
        SelectedVolume {
            claim_name: claim.into(),
            volume_name: format!("pv-{claim}"),
            driver: driver.into(),
            volume_handle: format!("handle-{claim}"),
        }
    }

    #[test]
    fn selected_claims_give_their_volumes_in_name_order() {
        let claims = [claim("b", "db", true), claim("web", "web", true), claim("a", "db", true)];
        let mut other_namespace = claim("c", "db", true);
        other_namespace.metadata.namespace = Some("other".into());
        let claims = [&claims[..], &[other_namespace]].concat();
        let volumes = [volume("a", "d"), volume("b", "d"), volume("web", "d"), volume("c", "d")];
        let got = select_volumes(&group(app("db")), &claims, lookup(&volumes));
        assert_eq!(got, Ok(vec![selected("a", "d"), selected("b", "d")]));
    }

    #[test]
    fn match_expressions_narrow_the_selection() {
        let selector = LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "app".into(),
                operator: "NotIn".into(),
                values: Some(vec!["web".into()]),
            }]),
            ..Default::default()
        };
        let claims = [claim("a", "db", true), claim("web", "web", true)];
        let volumes = [volume("a", "d"), volume("web", "d")];
        let got = select_volumes(&group(Some(selector)), &claims, lookup(&volumes));
        assert_eq!(got, Ok(vec![selected("a", "d")]));
    }

    #[test]
    fn every_unusable_claim_is_named() {
        let mut misbound = volume("misbound", "d");
        misbound.spec.as_mut().unwrap().claim_ref.as_mut().unwrap().uid = Some("someone-else".into());
        let claims = [
            claim("ok", "db", true),
            claim("pending", "db", false),
            claim("gone", "db", true),
            claim("misbound", "db", true),
            claim("nfs", "db", true),
        ];
        let volumes = [volume("ok", "d"), misbound, volume("nfs", "")];
        let refusal = select_volumes(&group(app("db")), &claims, lookup(&volumes)).unwrap_err();
        // (reason, message) in claim-name order: gone, misbound, nfs, pending.
        let want = [
            (EVENT_CONTENT_CREATION_FAILED, "the PV pv-gone bound to PVC gone does not exist"),
            (EVENT_CONTENT_CREATION_FAILED, "the PV pv-misbound is not bound to PVC misbound"),
            (EVENT_CREATE_CONTENT_FAILED, "Cannot snapshot a non-CSI volume: PV pv-nfs of PVC nfs"),
            (
                EVENT_CONTENT_CREATION_FAILED,
                "the PVC pending is not yet bound to a PV, will not attempt to take a group snapshot",
            ),
        ];
        let got: Vec<_> = refusal.events.iter().map(|e| (e.reason, e.message.as_str())).collect();
        assert_eq!(got, want);
        assert!(refusal.events.iter().all(|e| e.event_type == sidecar_runtime::events::EventType::Warning));
        assert!(refusal.message().contains("pv-gone") && refusal.message().contains("PVC pending"));
    }

    #[test]
    fn selectors_that_select_nothing_are_refused_with_their_own_message() {
        let claims = [claim("web", "web", true)];
        let volumes = [volume("web", "d")];
        let invalid = LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "app".into(),
                operator: "In".into(),
                values: None,
            }]),
            ..Default::default()
        };
        // (selector, message)
        let table = [
            (app("db"), "label selector app=db for group snapshot not applied to any PVC"),
            (None, "the group snapshot has no label selector"),
            (
                Some(invalid),
                "invalid label selector app in () of group snapshot: label selector operator In of key \"app\" needs at least one value",
            ),
        ];
        for (selector, want) in table {
            let refusal = select_volumes(&group(selector), &claims, lookup(&volumes)).unwrap_err();
            assert_eq!(refusal.events, [PlannedEvent::warning(EVENT_CONTENT_CREATION_FAILED, want)]);
        }
    }

    #[test]
    fn volumes_of_another_driver_are_refused() {
        let volumes = [selected("a", "d"), selected("b", "other"), selected("c", "other")];
        assert_eq!(check_driver(&volumes[..1], "gold", "d"), Ok(()));
        let refusal = check_driver(&volumes, "gold", "d").unwrap_err();
        let messages: Vec<_> = refusal.events.iter().map(|e| (e.reason, e.message.clone())).collect();
        assert_eq!(
            messages,
            [
                (
                    EVENT_CREATE_CONTENT_FAILED,
                    "Volume CSI driver (other) of PVC b mismatch with VolumeGroupSnapshotClass gold (d)".to_string()
                ),
                (
                    EVENT_CREATE_CONTENT_FAILED,
                    "Volume CSI driver (other) of PVC c mismatch with VolumeGroupSnapshotClass gold (d)".to_string()
                ),
            ]
        );
    }

    #[test]
    fn a_refusal_reads_as_its_events_in_order() {
        let warning = |message: &str| PlannedEvent::warning(EVENT_CONTENT_CREATION_FAILED, message.to_string());
        // (events, message)
        let table = [
            (vec![], ""),
            (vec![warning("PVC a is not bound")], "PVC a is not bound"),
            (
                vec![warning("PVC a is not bound"), warning("PVC b is not bound")],
                "PVC a is not bound; PVC b is not bound",
            ),
        ];
        for (events, want) in table {
            assert_eq!(refusal_message(&events), want);
            assert_eq!(Refusal { events }.message(), want);
        }
    }
}
