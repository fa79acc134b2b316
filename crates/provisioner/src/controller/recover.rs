//! The volume of a claim deleted mid-flight goes: its id recorded in the in-flight journal, or learned by repeating
//! CreateVolume with the same name and arguments (idempotent by name), then DeleteVolume. Beyond upstream, which
//! leaks such a volume when it restarts (external-provisioner issue #486).

use csi_client::proto::DeleteVolumeRequest;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use sidecar_runtime::Outcome;

use super::{Shared, claim_path, name_of, namespace_of, prepare};
use crate::translate::api_errors::cleanup_class_missing;
use crate::translate::claim_filter::{claim_class_name, selected_node};
use crate::translate::create_volume::volume_name;
use crate::translate::data_source::DataSource;
use crate::translate::in_flight::cleanup_rules_out_volume;
use crate::translate::in_flight_entry::InFlightEntry;
use crate::translate::migration::{csi_class, is_migrated_class};
use crate::translate::names::EVENT_PROVISIONING_CLEANUP_FAILED;
use crate::translate::pv_in_the_way::{PvInTheWay, pv_in_the_way};
use crate::translate::refusal::{EventType, PlannedEvent, ProvisioningState, create_volume_failure};
use crate::translate::secrets::Credentials;

/// Why the cleanup stops before DeleteVolume.
enum Stopped {
    /// No volume can exist: the request was never sent.
    NoVolume,
    /// Not now: the message says why, and the claim is synced again.
    Failed(String),
}

/// The claim was deleted (or is being deleted) before its PV was written: make sure its volume does not outlive
/// it. `entry` is the journal's record, or one built from `finalizer_claim` (a claim carrying the
/// provisioning-protection finalizer, released at the end). With the volume id recorded the volume is deleted at
/// once; otherwise CreateVolume is repeated to learn the id, which is recorded before DeleteVolume so that a crash
/// in between does not create the volume again.
pub(super) async fn recover(
    shared: &Shared,
    mut entry: InFlightEntry,
    finalizer_claim: Option<&PersistentVolumeClaim>,
) -> Outcome {
    let claim = entry.claim();
    let class_name = claim_class_name(&claim);
    let Some(class) = shared.stores.class(&class_name) else {
        let message = cleanup_class_missing(namespace_of(&claim), name_of(&claim), &class_name);
        return cleanup_failed(shared, &claim, message).await;
    };
    let migrated = is_migrated_class(&shared.provisioner, &class);
    let class = match csi_class(&shared.provisioner, &class) {
        Ok(class) => class.into_owned(),
        // A class that cannot be translated never made a request: there is no volume.
        Err(_) => return recovered(shared, &entry, finalizer_claim, None).await,
    };
    // The cache may lag: a PV written just before a crash makes the volume the PV's business (its reclaim policy
    // decides), so ask the API itself before deleting anything. Only a live PV of the claim counts: one being
    // deleted may have deleted its volume already (external-provisioner#1469).
    let in_the_way = match volume_object(shared, &entry.uid).await {
        Ok(pv) => pv,
        Err(message) => return cleanup_failed(shared, &claim, message).await,
    };
    let left_to_pv = |entry: &InFlightEntry| {
        in_the_way.as_ref().is_some_and(|pv| {
            let seen = pv_in_the_way(pv, &entry.uid, entry.volume_id.as_deref(), &shared.provisioner);
            matches!(seen, PvInTheWay::Holds | PvInTheWay::KeepsIt)
        })
    };
    if left_to_pv(&entry) {
        return recovered(shared, &entry, finalizer_claim, None).await;
    }
    tracing::info!(claim = %claim_path(&claim), volume_id = ?entry.volume_id,
        "claim deleted while its volume was being provisioned: deleting the volume");
    let (credentials, snapshot_source) = match learn_volume_id(shared, &mut entry, &claim, &class, migrated).await {
        Ok(learned) => learned,
        Err(Stopped::NoVolume) => return recovered(shared, &entry, finalizer_claim, None).await,
        Err(Stopped::Failed(message)) => return cleanup_failed(shared, &claim, message).await,
    };
    // With the id learnt, the PV in the way may turn out to name this very volume and keep it.
    if entry.volume_id.is_some() && left_to_pv(&entry) {
        return recovered(shared, &entry, finalizer_claim, snapshot_source.as_ref()).await;
    }
    if let Some(volume_id) = entry.volume_id.clone() {
        let request = DeleteVolumeRequest { volume_id: volume_id.clone(), secrets: credentials.into_map() };
        if let Err(err) = shared.csi_for(migrated).delete_volume(request).await {
            return cleanup_failed(shared, &claim, err.go_text()).await;
        }
        tracing::info!(claim = %claim_path(&claim), volume = %volume_id, "deleted the volume of the deleted claim");
    }
    recovered(shared, &entry, finalizer_claim, snapshot_source.as_ref()).await
}

/// The PV named after the claim, as the API holds it (not the cache).
async fn volume_object(shared: &Shared, uid: &str) -> Result<Option<PersistentVolume>, String> {
    let p = &shared.provisioner;
    let Ok(name) = volume_name(&p.volume_name_prefix, uid, p.volume_name_uuid_length) else { return Ok(None) };
    shared.read_volume_object(&name).await
}

/// Rebuilds the request and, when the entry has no volume id, repeats CreateVolume to learn it. Returns the
/// provisioner Secret's data for DeleteVolume and the snapshot whose protection goes afterwards.
async fn learn_volume_id(
    shared: &Shared,
    entry: &mut InFlightEntry,
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    migrated: bool,
) -> Result<(Credentials, Option<DataSource>), Stopped> {
    let path = claim_path(claim);
    match prepare::prepare(shared, claim, class, selected_node(claim).as_deref()).await {
        Ok(prepared) => {
            if entry.volume_id.is_none() {
                match shared.csi_for(migrated).create_volume(prepared.request).await {
                    Ok(response) => {
                        entry.volume_id = Some(response.volume.map(|v| v.volume_id).unwrap_or_default());
                        record_volume_id(shared, entry).await;
                    }
                    Err(err) => {
                        let refusal = create_volume_failure(&err, false);
                        if !cleanup_rules_out_volume(&err) {
                            return Err(Stopped::Failed(refusal.message));
                        }
                        tracing::info!(claim = %path, error = %refusal, "the driver has no volume for the deleted claim");
                    }
                }
            }
            Ok((prepared.credentials, prepared.snapshot_source))
        }
        // The volume id is known: delete it even though the request cannot be built any more (its secret cannot be
        // resolved then; a driver that needs one refuses, and the cleanup is tried again).
        Err(refusal) if entry.volume_id.is_some() => {
            tracing::warn!(claim = %path, reason = %refusal, "deleting the recorded volume without secrets");
            Ok((Credentials::default(), None))
        }
        // A request that cannot be built was never sent: there is no volume.
        Err(refusal) if refusal.state == ProvisioningState::Finished => {
            tracing::info!(claim = %path, reason = %refusal, "no volume can exist for the deleted claim");
            Err(Stopped::NoVolume)
        }
        Err(refusal) => Err(Stopped::Failed(refusal.message)),
    }
}

/// Keeps the volume id in the claim's journal entry. Not fatal when the journal refuses (a claim protected by the
/// finalizer whose journal is not writable): the cleanup goes on as before, only a crash before its end would
/// repeat CreateVolume.
async fn record_volume_id(shared: &Shared, entry: &InFlightEntry) {
    if let Err(refused) = shared.journal.put(&entry.uid, entry.to_json()).await {
        tracing::warn!(claim = %format!("{}/{}", entry.namespace, entry.name), reason = %refused,
            "cannot record the volume id in the in-flight journal");
    }
}

/// The volume is gone or belongs to its PV: forget the claim's pin, its snapshot protection, its journal entry and
/// its finalizer.
async fn recovered(
    shared: &Shared,
    entry: &InFlightEntry,
    finalizer_claim: Option<&PersistentVolumeClaim>,
    snapshot_source: Option<&DataSource>,
) -> Outcome {
    shared.memory.forget_pin(&entry.uid);
    if let Some(source) = snapshot_source {
        shared.release_snapshot(source, Some(&entry.uid)).await;
    }
    shared.journal.remove(&entry.uid);
    match finalizer_claim {
        Some(claim) => release_claim(shared, claim).await,
        None => Outcome::Done,
    }
}

async fn cleanup_failed(shared: &Shared, claim: &PersistentVolumeClaim, message: String) -> Outcome {
    tracing::warn!(claim = %claim_path(claim), error = %message, "cleanup of a deleted claim's volume failed");
    let event = PlannedEvent { event_type: EventType::Warning, reason: EVENT_PROVISIONING_CLEANUP_FAILED, message };
    shared.publish(claim, &event).await;
    Outcome::Retry
}

/// The claim's volume is settled: its provisioning-protection finalizer goes.
pub(super) async fn release_claim(shared: &Shared, claim: &PersistentVolumeClaim) -> Outcome {
    match shared.remove_claim_finalizer(claim).await {
        Ok(()) => Outcome::Done,
        Err(err) => {
            tracing::warn!(claim = %claim_path(claim), error = %err, "cannot remove the provisioning finalizer");
            Outcome::Retry
        }
    }
}
