//! A claim's in-flight record, the first step of its sync: the claim is recorded in the in-flight journal (or, as a
//! fallback, with the provisioning-protection finalizer) before CreateVolume, and when the claim goes before its PV
//! exists, the record says what [`super::recover`] must do (see [`crate::translate::in_flight_entry`] and
//! [`crate::translate::in_flight`]). Beyond upstream, which keeps claims in flight in memory only and leaks their
//! volume when it restarts (external-provisioner issue #486).

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::StorageClass;
use sidecar_runtime::Outcome;

use super::{ClaimKey, Shared, recover};
use crate::translate::in_flight::{InFlight, has_provisioning_finalizer, in_flight};
use crate::translate::in_flight_entry::{ClaimNow, EntryStep, InFlightEntry, entry_step, in_flight_entry};
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
            // Protected by the finalizer, not the journal: the entry is the claim itself, every annotation kept.
            let mut entry = in_flight_entry(claim, &StorageClass::default());
            entry.annotations = claim.metadata.annotations.clone().unwrap_or_default();
            Some(recover::recover(shared, entry, Some(claim)).await)
        }
        _ => None,
    }
}

/// The journal's part: `Some` when the claim's entry decides the outcome (recovery), `None` when the sync goes on.
async fn sync_journal_entry(
    shared: &Shared,
    key: &ClaimKey,
    claim: Option<&PersistentVolumeClaim>,
    volume_exists: bool,
) -> Option<Outcome> {
    let text = shared.journal.get(&key.uid)?;
    let Some(entry) = InFlightEntry::parse(&text) else {
        tracing::warn!(claim = %key, "unreadable in-flight journal entry left alone");
        return None;
    };
    let now = match claim {
        None => ClaimNow::Gone,
        Some(claim) if claim.metadata.deletion_timestamp.is_some() => ClaimNow::Deleting,
        Some(_) => ClaimNow::Live,
    };
    // In node mode the journal is this node's: only claims it provisioned are in it.
    if claim.is_some_and(|c| !tends_in_flight_volume(c, &shared.provisioner)) {
        return None;
    }
    match entry_step(&entry, now, volume_exists) {
        EntryStep::Keep => None,
        EntryStep::Drop => {
            shared.journal.remove(&key.uid);
            None
        }
        EntryStep::LearnVolumeId | EntryStep::DeleteVolume => {
            let finalizer_claim = claim.filter(|c| has_provisioning_finalizer(c));
            Some(recover::recover(shared, entry, finalizer_claim).await)
        }
    }
}
