//! Which claims the modification controller looks at (external-resizer pkg/modifycontroller/controller.go, updatePVC).
//! Adds always queue the claim; deletes forget it.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;

use crate::translate::claim::{is_bound, requested_class};
use crate::translate::names::MODIFY_PENDING;

/// Whether an update of a claim queues it: its class changed or nothing is being modified, it is Bound, and
/// `old_volume_known` (the PV named by the *old* claim's `spec.volumeName` is in the store).
pub fn claim_update_needs_sync(
    old: &PersistentVolumeClaim,
    new: &PersistentVolumeClaim,
    old_volume_known: bool,
) -> bool {
    let modify_status = new.status.as_ref().and_then(|s| s.modify_volume_status.as_ref());
    (requested_class(old) != requested_class(new) || modify_status.is_none()) && is_bound(new) && old_volume_known
}

/// The class a Pending claim waits for, if any. Deliberate difference: the controller indexes claims by it and queues
/// them when that VolumeAttributesClass is created, instead of waiting for a restart or a spec change.
pub fn awaited_class(claim: &PersistentVolumeClaim) -> Option<&str> {
    let status = claim.status.as_ref()?.modify_volume_status.as_ref()?;
    let class = requested_class(claim);
    (status.status == MODIFY_PENDING && !class.is_empty()).then_some(class)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ModifyVolumeStatus, PersistentVolumeClaimSpec, PersistentVolumeClaimStatus};

    use super::*;

    fn claim(class: Option<&str>, modify: Option<&str>, phase: &str) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            spec: Some(PersistentVolumeClaimSpec {
                volume_attributes_class_name: class.map(str::to_string),
                ..Default::default()
            }),
            status: Some(PersistentVolumeClaimStatus {
                phase: Some(phase.into()),
                modify_volume_status: modify.map(|status| ModifyVolumeStatus {
                    status: status.into(),
                    target_volume_attributes_class_name: None,
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn updates_that_queue_a_claim() {
        let old = claim(Some("silver"), Some("InProgress"), "Bound");
        // (rule, new claim, old PV known, queued)
        let table = [
            ("class changed", claim(Some("gold"), Some("InProgress"), "Bound"), true, true),
            ("nothing being modified", claim(Some("silver"), None, "Bound"), true, true),
            ("status set and class unchanged", claim(Some("silver"), Some("Pending"), "Bound"), true, false),
            ("not Bound", claim(Some("gold"), None, "Pending"), true, false),
            ("old PV not in the store", claim(Some("gold"), None, "Bound"), false, false),
            ("class cleared", claim(None, Some("InProgress"), "Bound"), true, true),
        ];
        for (rule, new, known, want) in table {
            assert_eq!(claim_update_needs_sync(&old, &new, known), want, "{rule}");
        }
    }

    #[test]
    fn pending_claims_wait_for_their_class() {
        // (rule, claim, awaited class)
        let table = [
            ("Pending waits for the requested class", claim(Some("gold"), Some("Pending"), "Bound"), Some("gold")),
            ("InProgress does not wait", claim(Some("gold"), Some("InProgress"), "Bound"), None),
            ("no status, no wait", claim(Some("gold"), None, "Bound"), None),
            ("no class, no wait", claim(None, Some("Pending"), "Bound"), None),
        ];
        for (rule, claim, want) in table {
            assert_eq!(awaited_class(&claim), want, "{rule}");
        }
    }
}
