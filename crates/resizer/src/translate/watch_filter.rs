//! Which watched change queues which claim. The watch handlers of the controller hand each change to one of these
//! and queue what they answer; the per-job claim filters are [`super::expansion::filter`] and
//! [`super::modification::filter`].

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::VolumeAttributesClass;
use sidecar_runtime::watch::Change;

use crate::translate::claim::bound_volume_name;
use crate::translate::expansion::decide::ExpansionConfig;
use crate::translate::expansion::in_use::claims_in_use;
use crate::translate::modification::filter::awaited_class;
use crate::translate::names::MODIFY_IN_PROGRESS;

/// Whether an update of a claim queues it: when either running job's filter says so. `expansion` is the expansion
/// settings when expansion runs, `modification` whether modification runs; `volume_cached` tells whether a PV is
/// in the cache (the modification filter asks about the PV the old claim names).
pub fn claim_update_needs_sync(
    old: &PersistentVolumeClaim,
    new: &PersistentVolumeClaim,
    expansion: Option<&ExpansionConfig>,
    modification: bool,
    volume_cached: impl Fn(&str) -> bool,
) -> bool {
    let expansion = expansion.is_some() && super::expansion::filter::claim_update_needs_sync(old, new);
    let modification = modification && {
        let old_volume = bound_volume_name(old);
        let known = !old_volume.is_empty() && volume_cached(old_volume);
        super::modification::filter::claim_update_needs_sync(old, new, known)
    };
    expansion || modification
}

/// The claim (`namespace/name`) a PV that has just reached the cache is bound to: a claim that names its PV before
/// the PV is cached is retried with backoff, and goes on as soon as the PV arrives. Only a watch event of a new PV
/// counts; the PVs of a (re)list come with their claims anyway.
pub fn claim_of_new_volume(change: &Change<'_, PersistentVolume>) -> Option<String> {
    let Change::Applied { old: None, object: volume, listed: false } = change else { return None };
    let reference = volume.spec.as_ref()?.claim_ref.as_ref()?;
    Some(format!("{}/{}", reference.namespace.as_ref()?, reference.name.as_ref()?))
}

/// The class a watch event created or changed, whose waiting claims are queued (deliberate difference: upstream's
/// VolumeAttributesClass informer has no handlers, so a claim Pending on a missing class waits for a restart or a
/// spec change; external-resizer pkg/modifycontroller/controller.go, NewModifyController).
pub fn changed_class<'a>(change: &Change<'a, VolumeAttributesClass>) -> Option<&'a str> {
    match change {
        Change::Applied { object: class, listed: false, .. } => {
            Some(class.metadata.name.as_deref().unwrap_or_default())
        }
        _ => None,
    }
}

/// Whether `claim` waits for `class`: Pending on it, or InProgress with it as the locked target of an uncertain
/// modification whose class was missing.
pub fn waits_for_class(claim: &PersistentVolumeClaim, class: &str) -> bool {
    let locked = claim.status.as_ref().and_then(|s| s.modify_volume_status.as_ref()).is_some_and(|m| {
        m.status == MODIFY_IN_PROGRESS && m.target_volume_attributes_class_name.as_deref() == Some(class)
    });
    awaited_class(claim) == Some(class) || locked
}

/// The claims a pod's change may free, before and after it: an expansion that waits for its claim's pods to go (an
/// offline-only driver) is queued when one goes. The pods of a (re)list free nothing. Of these, only the claims
/// whose last ControllerExpandVolume failed with FailedPrecondition are queued (`had_in_use_error`).
pub fn claims_freed_by_pod(change: &Change<'_, Pod>, had_in_use_error: impl Fn(&str) -> bool) -> Vec<String> {
    let mut keys = match change {
        Change::Applied { object: pod, listed: false, .. } | Change::Deleted(pod) => claims_in_use(pod),
        _ => return Vec::new(),
    };
    if let Change::Applied { old: Some(old), .. } = change {
        keys.extend(claims_in_use(old));
    }
    keys.retain(|key| had_in_use_error(key));
    keys
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::{
        ModifyVolumeStatus, ObjectReference, PersistentVolumeClaimSpec, PersistentVolumeClaimStatus,
        PersistentVolumeClaimVolumeSource, PersistentVolumeSpec, PodSpec, PodStatus, Volume,
    };

    use super::*;

    fn claim(spec: &str, status: Option<(&str, Option<&str>)>) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            spec: Some(PersistentVolumeClaimSpec {
                volume_attributes_class_name: Some(spec.to_string()),
                ..Default::default()
            }),
            status: Some(PersistentVolumeClaimStatus {
                phase: Some("Bound".into()),
                modify_volume_status: status.map(|(status, target)| ModifyVolumeStatus {
                    status: status.into(),
                    target_volume_attributes_class_name: target.map(str::to_string),
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_new_class_wakes_the_claims_waiting_for_it() {
        // (case, claim, queued when "gold" appears)
        let table = [
            ("Pending on gold", claim("gold", Some(("Pending", None))), true),
            ("Pending on another class", claim("silver", Some(("Pending", None))), false),
            ("InProgress, gold locked", claim("silver", Some(("InProgress", Some("gold")))), true),
            ("InProgress toward another class", claim("gold", Some(("InProgress", Some("silver")))), false),
            ("Infeasible on gold", claim("gold", Some(("Infeasible", Some("gold")))), false),
            ("nothing under way", claim("gold", None), false),
        ];
        for (case, claim, want) in table {
            assert_eq!(waits_for_class(&claim, "gold"), want, "{case}");
        }
    }

    #[test]
    fn class_events_that_wake_claims() {
        let mut gold = VolumeAttributesClass::default();
        gold.metadata.name = Some("gold".into());
        let old = Some(Arc::new(gold.clone()));
        // (case, change, class)
        let table = [
            ("created", Change::Applied { old: None, object: &gold, listed: false }, Some("gold")),
            ("changed", Change::Applied { old, object: &gold, listed: false }, Some("gold")),
            ("listed when the watch (re)starts", Change::Applied { old: None, object: &gold, listed: true }, None),
            ("deleted", Change::Deleted(&gold), None),
        ];
        for (case, change, want) in table {
            assert_eq!(changed_class(&change), want, "{case}");
        }
    }

    fn claim_update(class: &str, volume: &str, version: &str) -> PersistentVolumeClaim {
        let mut claim = claim(class, Some(("InProgress", Some(class))));
        claim.spec.as_mut().unwrap().volume_name = Some(volume.into());
        claim.metadata.resource_version = Some(version.into());
        claim
    }

    #[test]
    fn claim_updates_that_queue_the_claim() {
        let expansion = ExpansionConfig {
            driver_name: "hostpath.csi.k8s.io".into(),
            expander: crate::translate::capabilities::Expander::NodeOnly,
            annotate_fs_resize: true,
            handle_volume_inuse_error: true,
        };
        let resync = (claim_update("gold", "pv-1", "7"), claim_update("gold", "pv-1", "7"));
        let new_class = (claim_update("gold", "pv-1", "7"), claim_update("platinum", "pv-1", "8"));
        let unbound_before = (claim_update("gold", "", "7"), claim_update("platinum", "pv-1", "8"));
        // (rule, (old, new), expansion runs, modification runs, queued)
        let table = [
            ("a resync queues the claim for expansion", &resync, Some(&expansion), false, true),
            ("a resync alone does not queue it for modification", &resync, None, true, false),
            ("a new class queues it for modification", &new_class, None, true, true),
            ("not for expansion alone", &new_class, Some(&expansion), false, false),
            ("either job may queue it", &new_class, Some(&expansion), true, true),
            ("not when the old claim named no PV", &unbound_before, None, true, false),
        ];
        for (rule, (old, new), expansion, modification, want) in table {
            assert_eq!(claim_update_needs_sync(old, new, expansion, modification, |v| v == "pv-1"), want, "{rule}");
        }
        let (old, new) = &new_class;
        assert!(
            !claim_update_needs_sync(old, new, None, true, |_| false),
            "not while the old claim's PV is not cached"
        );
    }

    #[test]
    fn a_new_volume_wakes_its_claim() {
        let volume = PersistentVolume {
            spec: Some(PersistentVolumeSpec {
                claim_ref: Some(ObjectReference {
                    namespace: Some("apps".into()),
                    name: Some("data".into()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let unbound = PersistentVolume::default();
        let old = Some(Arc::new(volume.clone()));
        // (case, change, claim queued)
        let table = [
            ("a new PV", Change::Applied { old: None, object: &volume, listed: false }, Some("apps/data")),
            ("a changed PV", Change::Applied { old, object: &volume, listed: false }, None),
            ("a listed PV", Change::Applied { old: None, object: &volume, listed: true }, None),
            ("a new PV without a claim", Change::Applied { old: None, object: &unbound, listed: false }, None),
            ("a deleted PV", Change::Deleted(&volume), None),
        ];
        for (case, change, want) in table {
            assert_eq!(claim_of_new_volume(&change).as_deref(), want, "{case}");
        }
    }

    fn pod(claim: &str, phase: &str) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.namespace = Some("apps".into());
        pod.spec = Some(PodSpec {
            volumes: Some(vec![Volume {
                name: "data".into(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: claim.into(),
                    read_only: None,
                }),
                ..Default::default()
            }]),
            ..Default::default()
        });
        pod.status = Some(PodStatus { phase: Some(phase.into()), ..Default::default() });
        pod
    }

    #[test]
    fn pods_that_go_free_their_claims() {
        let running = pod("data", "Running");
        let succeeded = pod("data", "Succeeded");
        let other = pod("logs", "Running");
        let was_running = Some(Arc::new(running.clone()));
        // (case, change, claims queued)
        let table = [
            ("a deleted pod", Change::Deleted(&running), vec!["apps/data"]),
            (
                "a pod that finished",
                Change::Applied { old: was_running, object: &succeeded, listed: false },
                vec!["apps/data"],
            ),
            ("a new pod", Change::Applied { old: None, object: &running, listed: false }, vec!["apps/data"]),
            ("a listed pod", Change::Applied { old: None, object: &running, listed: true }, vec![]),
            ("a claim without an in-use error", Change::Deleted(&other), vec![]),
        ];
        for (case, change, want) in table {
            assert_eq!(claims_freed_by_pod(&change, |key| key == "apps/data"), want, "{case}");
        }
    }
}
