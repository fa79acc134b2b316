//! A claim's in-flight record, the first step of its sync: the claim is recorded in the in-flight journal (or, as a
//! fallback, with the provisioning-protection finalizer) before CreateVolume, and when the claim goes before its PV
//! exists, the record says what [`super::recover`] must do (see [`crate::translate::in_flight_entry`] and
//! [`crate::translate::in_flight`]). Beyond upstream, which keeps claims in flight in memory only and leaks their
//! volume when it restarts (external-provisioner issue #486).

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use sidecar_runtime::Outcome;

use super::{ClaimKey, Shared, recover};
use crate::translate::in_flight::{InFlight, has_provisioning_finalizer, in_flight};
use crate::translate::in_flight_entry::{
    ClaimNow, EntryStep, InFlightEntry, entry_defect, entry_step, in_flight_entry,
};
use crate::translate::migration::csi_class;
use crate::translate::node_deployment::tends_in_flight_volume;

/// `Some` when the claim's in-flight record decides the outcome of its sync (a release or a recovery), `None` when
/// the sync goes on. `claim` is the cached claim with the key's UID, if any.
pub(super) async fn sync_in_flight(
    shared: &Shared,
    key: &ClaimKey,
    claim: Option<&PersistentVolumeClaim>,
    volume_exists: bool,
) -> Option<Outcome> {
    if let Some(outcome) = sync_journal_entry(shared, key, claim, volume_exists).await {
        return Some(outcome);
    }
    let claim = claim?;
    if !tends_in_flight_volume(claim, &shared.provisioner) {
        return None;
    }
    match in_flight(claim, &shared.provisioner, volume_exists) {
        InFlight::Release => Some(recover::release_claim(shared, claim).await),
        InFlight::Recover => {
            // Protected by the finalizer, not the journal: the entry is the claim itself.
            Some(recover::recover(shared, entry_of_claim(claim), Some(claim)).await)
        }
        _ => None,
    }
}

/// The journal's part: `Some` when the claim's entry decides the outcome (recovery, or a rejected entry), `None`
/// when the sync goes on. The entry is untrusted: while the claim exists, recovery works from the claim itself;
/// once it is gone, the entry must pass [`entry_defect`] first.
async fn sync_journal_entry(
    shared: &Shared,
    key: &ClaimKey,
    claim: Option<&PersistentVolumeClaim>,
    volume_exists: bool,
) -> Option<Outcome> {
    let text = shared.journal.get(&key.uid)?;
    // In node mode the journal is this node's: only claims it provisioned are in it.
    if claim.is_some_and(|c| !tends_in_flight_volume(c, &shared.provisioner)) {
        return None;
    }
    let names_volume = claim.and_then(|c| c.spec.as_ref()?.volume_name.as_deref()).is_some_and(|v| !v.is_empty());
    let now = match claim {
        None => ClaimNow::Gone,
        Some(claim) if claim.metadata.deletion_timestamp.is_some() => ClaimNow::Deleting,
        Some(_) => ClaimNow::Live,
    };
    match entry_step(now, volume_exists || names_volume) {
        EntryStep::Keep => None,
        EntryStep::Drop => {
            shared.journal.remove(&key.uid);
            None
        }
        EntryStep::Recover => {
            let recorded = InFlightEntry::parse(&text);
            let entry = match claim {
                // The claim as the API holds it, not as the entry says; only the recorded id is kept, to compare.
                Some(claim) => InFlightEntry { volume_id: recorded.and_then(|r| r.volume_id), ..entry_of_claim(claim) },
                None => {
                    let Some(entry) = recorded else {
                        return Some(recover::reject_entry(shared, &key.uid, "it is not an entry's JSON".into()).await);
                    };
                    let class = shared.stores.class(entry.spec.storage_class_name.as_deref().unwrap_or_default());
                    let class = class.and_then(|c| csi_class(&shared.provisioner, &c).ok().map(|c| c.into_owned()));
                    if let Some(defect) = entry_defect(&key.uid, &entry, class.as_ref()) {
                        return Some(recover::reject_entry(shared, &key.uid, defect).await);
                    }
                    entry
                }
            };
            let finalizer_claim = claim.filter(|c| has_provisioning_finalizer(c));
            Some(recover::recover(shared, entry, finalizer_claim).await)
        }
    }
}

/// The record of a claim the API still holds, read from the claim itself: every annotation kept (its class's
/// templates may name any).
fn entry_of_claim(claim: &PersistentVolumeClaim) -> InFlightEntry {
    InFlightEntry { annotations: claim.metadata.annotations.clone().unwrap_or_default(), ..in_flight_entry(claim) }
}
