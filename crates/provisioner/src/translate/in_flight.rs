//! Provisioning that must survive a crash (beyond upstream; external-provisioner #486).
//!
//! Upstream remembers a CreateVolume whose outcome is unknown only in memory: if the provisioner restarts while the
//! driver works and the claim is deleted meanwhile, the volume leaks. Here the claim is first recorded in the
//! in-flight journal ([`super::in_flight_entry`]); when the journal cannot take it (full, or its Lease not
//! writable), and on claims an older version protected, the claim carries [`FINALIZER_PROVISIONING_PROTECTION`]
//! from just before CreateVolume until either its PV exists or the driver has said the volume does not exist (or
//! deleted it). A claim deleted while it carries the finalizer stays in the API
//! until the provisioner has repeated CreateVolume with the same name (CSI calls are idempotent by name), learned
//! the volume id and deleted the volume.

use csi_client::{Call, CallError};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;

use super::claim_filter::is_our_claim;
use super::names::FINALIZER_PROVISIONING_PROTECTION;
use super::provisioner::Provisioner;
use super::refusal::ProvisioningState;

/// What the finalizer asks of the controller for one claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InFlight {
    /// No finalizer, or provisioning simply goes on.
    Nothing,
    /// The PV exists (or the claim names its volume) and the claim is Bound or being deleted: the finalizer has done
    /// its job, remove it. Waiting for Bound lets the PV binder finish its own writes of the claim first, so that the
    /// removal (a guarded update) does not meet a Conflict and cost a read and a second write.
    Release,
    /// The claim is being deleted before its PV was written: find the volume by name, delete it, then remove the
    /// finalizer.
    Recover,
}

/// Whether the claim carries the provisioning-protection finalizer.
pub fn has_provisioning_finalizer(claim: &PersistentVolumeClaim) -> bool {
    claim.metadata.finalizers.iter().flatten().any(|f| f == FINALIZER_PROVISIONING_PROTECTION)
}

/// What to do about the finalizer. `volume_exists` tells whether the claim's live PV is known. The
/// finalizer of another driver's claim is that driver's provisioner's business.
pub fn in_flight(claim: &PersistentVolumeClaim, provisioner: &Provisioner, volume_exists: bool) -> InFlight {
    if !has_provisioning_finalizer(claim) || !is_our_claim(claim, provisioner) {
        return InFlight::Nothing;
    }
    let bound = claim.spec.as_ref().and_then(|s| s.volume_name.as_deref()).is_some_and(|v| !v.is_empty());
    let deleting = claim.metadata.deletion_timestamp.is_some();
    let settled = deleting || claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
    match (volume_exists || bound, settled, deleting) {
        (true, true, _) => InFlight::Release,
        (true, false, _) => InFlight::Nothing,
        (false, _, true) => InFlight::Recover,
        (false, _, false) => InFlight::Nothing,
    }
}

/// After a failed CreateVolume: may the claim's in-flight record (journal entry or finalizer) go? Only when the
/// driver's answer says it is not creating the volume (a final error, or ResourceExhausted, which may send the
/// claim back to the scheduler) and no earlier call can have left one. After an in-progress error (timeout,
/// Unavailable, ...) the volume may exist, and the record stays until a later call tells.
///
/// `final_answer`: the answer rules out a volume under the claim's name ([`cleanup_rules_out_volume`]).
/// ResourceExhausted does not: it is about this call only. `recorded_before`: the record was there before this
/// attempt, so an earlier call's outcome is unknown (it timed out, or the provisioner died during it) and may be a
/// volume; the record then stays while the claim lives. Upstream forgets the claim on ResourceExhausted, and the
/// volume of the earlier call leaks if the claim is deleted then.
pub fn record_goes_after_failure(state: ProvisioningState, final_answer: bool, recorded_before: bool) -> bool {
    let driver_is_done = matches!(state, ProvisioningState::Finished | ProvisioningState::Reschedule);
    driver_is_done && (final_answer || !recorded_before)
}

/// Cleaning up after a deleted claim whose volume id was never recorded, CreateVolume is repeated to learn it: does
/// the driver's failure rule out a volume under the claim's name? Only a final answer does. RESOURCE_EXHAUSTED is
/// not one: a driver out of room or throttled for a moment says it, and the volume an earlier call made may well
/// exist (`make chaos` leaked one so: the cleanup took RESOURCE_EXHAUSTED for "no volume" and forgot the claim).
pub fn cleanup_rules_out_volume(error: &CallError) -> bool {
    error.disposition_for(Call::CreateVolume).is_final()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{PersistentVolumeClaimSpec, PersistentVolumeClaimStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use k8s_openapi::jiff::Timestamp;

    use super::*;
    use crate::translate::names::ANN_STORAGE_PROVISIONER;

    const DRIVER: &str = "hostpath.csi.k8s.io";

    fn claim(finalizer: bool, deleting: bool, volume_name: Option<&str>) -> PersistentVolumeClaim {
        let mut claim = pending(finalizer, deleting, volume_name);
        claim.status = Some(PersistentVolumeClaimStatus { phase: Some("Bound".into()), ..Default::default() });
        claim
    }

    fn pending(finalizer: bool, deleting: bool, volume_name: Option<&str>) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("data".into()),
                annotations: Some([(ANN_STORAGE_PROVISIONER.to_string(), DRIVER.to_string())].into()),
                finalizers: Some(if finalizer {
                    vec!["kubernetes.io/pvc-protection".into(), FINALIZER_PROVISIONING_PROTECTION.into()]
                } else {
                    vec!["kubernetes.io/pvc-protection".into()]
                }),
                deletion_timestamp: deleting.then_some(Time(Timestamp::UNIX_EPOCH)),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec { volume_name: volume_name.map(String::from), ..Default::default() }),
            ..Default::default()
        }
    }

    #[test]
    fn what_the_finalizer_asks_for() {
        use InFlight::*;
        // (rule, finalizer, deleting, spec.volumeName, PV exists, action)
        let table = [
            ("no finalizer: nothing, even when deleted", false, true, None, false, Nothing),
            ("no finalizer, PV exists: nothing", false, false, None, true, Nothing),
            ("finalizer, call unresolved: provisioning goes on", true, false, None, false, Nothing),
            ("finalizer, PV exists: release", true, false, None, true, Release),
            ("finalizer, claim bound: release", true, false, Some("pvc-1"), false, Release),
            ("finalizer, empty volumeName is not bound", true, false, Some(""), false, Nothing),
            (
                "finalizer, deleted, PV exists: release (the PV's reclaim policy applies)",
                true,
                true,
                None,
                true,
                Release,
            ),
            ("finalizer, deleted before the PV was written: recover", true, true, None, false, Recover),
        ];
        let provisioner = Provisioner::new(DRIVER);
        for (rule, finalizer, deleting, volume_name, exists, want) in table {
            assert_eq!(in_flight(&claim(finalizer, deleting, volume_name), &provisioner, exists), want, "{rule}");
        }
        // Not Bound yet: the PV binder is still writing the claim, the finalizer waits for it (unless deleted).
        let waiting = [
            ("PV exists, claim still Pending: wait for the binder", false, None, true, Nothing),
            ("volumeName set, phase not Bound yet: wait", false, Some("pvc-1"), false, Nothing),
            ("PV exists, Pending claim deleted: release", true, None, true, Release),
            ("Pending claim deleted before its PV: recover", true, None, false, Recover),
        ];
        for (rule, deleting, volume_name, exists, want) in waiting {
            assert_eq!(in_flight(&pending(true, deleting, volume_name), &provisioner, exists), want, "{rule}");
        }
        let other = Provisioner::new("other.csi.k8s.io");
        assert_eq!(in_flight(&claim(true, true, None), &other, false), Nothing, "another driver's claim");
    }

    #[test]
    fn only_a_final_answer_rules_out_a_volume_to_clean_up() {
        use tonic::Code;
        let method = "/csi.v1.Controller/CreateVolume";
        let table = [
            (Code::InvalidArgument, true),
            (Code::NotFound, true),
            (Code::OutOfRange, true),
            (Code::Unimplemented, true),
            (Code::FailedPrecondition, true),
            (Code::ResourceExhausted, false),
            (Code::Unavailable, false),
            (Code::DeadlineExceeded, false),
            (Code::Aborted, false),
            (Code::Cancelled, false),
        ];
        for (code, want) in table {
            let error = CallError::Status { method, status: tonic::Status::new(code, "boom") };
            assert_eq!(cleanup_rules_out_volume(&error), want, "{code:?}");
        }
        let timeout = CallError::Timeout { method, timeout: std::time::Duration::from_secs(10) };
        assert!(!cleanup_rules_out_volume(&timeout), "a timeout says nothing");
    }

    #[test]
    fn the_record_goes_only_when_no_volume_can_be_left() {
        use ProvisioningState::*;
        // (rule, state, final answer, recorded before this attempt, the record goes)
        let table = [
            ("a final error on a first call: nothing was made", Finished, true, false, true),
            (
                "a final error after an earlier unknown outcome: the driver says no volume by that name",
                Finished,
                true,
                true,
                true,
            ),
            ("ResourceExhausted on a first call: nothing was made", Finished, false, false, true),
            ("ResourceExhausted, the claim rescheduled, first call", Reschedule, false, false, true),
            (
                "ResourceExhausted after a timed-out call: that call may have made the volume",
                Finished,
                false,
                true,
                false,
            ),
            ("ResourceExhausted rescheduling after a timed-out call: the same", Reschedule, false, true, false),
            ("a timeout: the volume may be being made", InBackground, false, false, false),
            ("a timeout after another", InBackground, false, true, false),
            ("failed before the call: whatever was in flight stays", NoChange, false, true, false),
        ];
        for (rule, state, final_answer, recorded_before, want) in table {
            assert_eq!(record_goes_after_failure(state, final_answer, recorded_before), want, "{rule}");
        }
    }
}
