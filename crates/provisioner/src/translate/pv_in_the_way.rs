//! A PV named after the claim that is already there: met by the PV create (`409 AlreadyExists`), or by the cleanup
//! of a deleted claim's volume. Does it hold the volume CreateVolume gave?
//!
//! Upstream takes any such PV for its own (the library's PV save counts AlreadyExists as done). In
//! external-provisioner#1469 a claim is provisioned again from a stale cache after its PV was released: the driver
//! had already deleted the first volume, makes a second one under the same name, and the PV create meets the first
//! PV, still being deleted. The second volume leaks. Here a PV counts only when it is the claim's, live, and names
//! the volume; otherwise the volume goes, unless the PV names that very volume and its deletion would not delete it.

use k8s_openapi::api::core::v1::PersistentVolume;

use super::migration::csi_volume;
use super::provisioner::Provisioner;

/// What a PV named after the claim means for a volume CreateVolume gave for the claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PvInTheWay {
    /// The claim's live PV names the volume (or the volume's id is not known yet: an idempotent driver gives the
    /// same volume for the same name): provisioning is done, by an earlier write or another replica.
    Holds,
    /// The claim's live PV names another volume (a driver that made a second volume for the same name): the claim
    /// has its PV, and this volume is one too many.
    HoldsAnother,
    /// The PV names this very volume but is not the claim's live PV: another claim's, or none's, or the claim's
    /// being deleted under a policy that keeps the volume. Deleting the volume would destroy what that PV keeps:
    /// it is left to the PV.
    KeepsIt,
    /// Nothing live of the claim names the volume: the claim's earlier PV being deleted (its DeleteVolume may have
    /// run before CreateVolume made the volume again), or a PV naming another volume. The volume goes; with its id
    /// unknown, it is learnt first (CreateVolume by the same name) and the PV looked at again.
    Orphan,
}

/// Whether `pv` is the live PV of the claim `claim_uid`: its claimRef names the claim's UID and it is not being
/// deleted.
pub fn holds_claim(pv: &PersistentVolume, claim_uid: &str) -> bool {
    let reference = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()).and_then(|r| r.uid.as_deref());
    !claim_uid.is_empty() && reference == Some(claim_uid) && pv.metadata.deletion_timestamp.is_none()
}

/// What `pv` means for the volume `volume_id` of the claim `claim_uid` (`None`: the id is not known yet).
pub fn pv_in_the_way(
    pv: &PersistentVolume,
    claim_uid: &str,
    volume_id: Option<&str>,
    provisioner: &Provisioner,
) -> PvInTheWay {
    let handle = volume_handle(pv, provisioner);
    let names_it = |id: &str| handle.as_deref() == Some(id);
    if holds_claim(pv, claim_uid) {
        return if volume_id.is_none_or(names_it) { PvInTheWay::Holds } else { PvInTheWay::HoldsAnother };
    }
    if !volume_id.is_some_and(names_it) {
        return PvInTheWay::Orphan;
    }
    let policy = pv.spec.as_ref().and_then(|s| s.persistent_volume_reclaim_policy.as_deref());
    // A PV being deleted under the Delete policy deletes the same volume itself: deleting it here too is
    // idempotent, and is what is left to do when its DeleteVolume ran before the volume was made again.
    if pv.metadata.deletion_timestamp.is_some() && policy == Some("Delete") {
        return PvInTheWay::Orphan;
    }
    PvInTheWay::KeepsIt
}

/// The CSI volume handle `pv` names (an in-tree PV of the plugin the driver replaces translated first); `None` when
/// it names none.
fn volume_handle(pv: &PersistentVolume, provisioner: &Provisioner) -> Option<String> {
    let (pv, _) = csi_volume(provisioner, pv).ok()?;
    pv.spec.as_ref()?.csi.as_ref().map(|csi| csi.volume_handle.clone())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{CSIPersistentVolumeSource, ObjectReference, PersistentVolumeSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    const DRIVER: &str = "hostpath.csi.k8s.io";
    const CLAIM: &str = "uid-claim";

    /// A PV named after the claim: bound to `claim_uid`, naming `handle`, being deleted or not, with `policy`.
    fn pv(claim_uid: Option<&str>, handle: &str, deleting: bool, policy: &str) -> PersistentVolume {
        PersistentVolume {
            metadata: ObjectMeta {
                name: Some(format!("pvc-{CLAIM}")),
                deletion_timestamp: deleting.then_some(Time(Timestamp::UNIX_EPOCH)),
                ..Default::default()
            },
            spec: Some(PersistentVolumeSpec {
                claim_ref: claim_uid.map(|uid| ObjectReference { uid: Some(uid.into()), ..Default::default() }),
                csi: Some(CSIPersistentVolumeSource {
                    driver: DRIVER.into(),
                    volume_handle: handle.into(),
                    ..Default::default()
                }),
                persistent_volume_reclaim_policy: Some(policy.into()),
                ..Default::default()
            }),
            status: None,
        }
    }

    #[test]
    fn which_pv_holds_the_new_volume() {
        use PvInTheWay::*;
        let provisioner = Provisioner::new(DRIVER);
        // (rule, PV, volume id the call gave, outcome)
        let table = [
            (
                "the claim's live PV naming the volume: done (an earlier write)",
                pv(Some(CLAIM), "v1", false, "Delete"),
                Some("v1"),
                Holds,
            ),
            ("the claim's live PV, id not known yet: done", pv(Some(CLAIM), "v1", false, "Delete"), None, Holds),
            ("the claim's live PV under Retain: done", pv(Some(CLAIM), "v1", false, "Retain"), Some("v1"), Holds),
            (
                "the claim's live PV naming another volume: this one is extra",
                pv(Some(CLAIM), "v1", false, "Delete"),
                Some("v2"),
                HoldsAnother,
            ),
            (
                "external-provisioner#1469: the claim's earlier PV being deleted, another volume: it goes",
                pv(Some(CLAIM), "v1", true, "Delete"),
                Some("v2"),
                Orphan,
            ),
            (
                "the claim's earlier PV being deleted names the same volume: its DeleteVolume may be done, delete again",
                pv(Some(CLAIM), "v1", true, "Delete"),
                Some("v1"),
                Orphan,
            ),
            (
                "the claim's PV being deleted under Retain names the volume: it keeps it",
                pv(Some(CLAIM), "v1", true, "Retain"),
                Some("v1"),
                KeepsIt,
            ),
            (
                "the claim's PV being deleted, id not known: learn it first",
                pv(Some(CLAIM), "v1", true, "Retain"),
                None,
                Orphan,
            ),
            (
                "another claim's PV naming another volume: ours goes",
                pv(Some("uid-other"), "v1", false, "Delete"),
                Some("v2"),
                Orphan,
            ),
            (
                "another claim's PV naming this volume: it keeps it",
                pv(Some("uid-other"), "v2", false, "Delete"),
                Some("v2"),
                KeepsIt,
            ),
            ("a PV of no claim naming another volume: ours goes", pv(None, "v1", false, "Retain"), Some("v2"), Orphan),
            ("a PV of no claim naming this volume: it keeps it", pv(None, "v2", false, "Retain"), Some("v2"), KeepsIt),
            (
                "another claim's PV being deleted under Delete names this volume: delete too",
                pv(Some("uid-other"), "v2", true, "Delete"),
                Some("v2"),
                Orphan,
            ),
        ];
        for (rule, pv, volume_id, want) in table {
            assert_eq!(pv_in_the_way(&pv, CLAIM, volume_id, &provisioner), want, "{rule}");
        }
    }

    #[test]
    fn only_the_claims_live_pv_holds_the_claim() {
        let table = [
            ("bound to the claim, live", pv(Some(CLAIM), "v1", false, "Delete"), true),
            ("bound to the claim, being deleted", pv(Some(CLAIM), "v1", true, "Delete"), false),
            ("bound to another claim", pv(Some("uid-other"), "v1", false, "Delete"), false),
            ("bound to no claim", pv(None, "v1", false, "Delete"), false),
        ];
        for (rule, pv, want) in table {
            assert_eq!(holds_claim(&pv, CLAIM), want, "{rule}");
        }
        assert!(!holds_claim(&pv(Some(""), "v1", false, "Delete"), ""), "an empty UID names no claim");
    }

    #[test]
    fn a_pv_naming_no_csi_volume_holds_none() {
        let provisioner = Provisioner::new(DRIVER);
        let mut foreign = pv(Some("uid-other"), "v1", false, "Delete");
        foreign.spec.as_mut().unwrap().csi = None;
        assert_eq!(pv_in_the_way(&foreign, CLAIM, Some("v1"), &provisioner), PvInTheWay::Orphan);
    }
}
