//! The volume of a claim deleted mid-flight goes: its id learned by repeating CreateVolume with the same name and
//! arguments (idempotent by name), then DeleteVolume unless a PV holds it. Beyond upstream, which leaks such a
//! volume when it restarts (external-provisioner issue #486). Journal entries are untrusted: one that cannot be
//! this provisioner's own is rejected with a Warning on the journal's Lease.

use csi_client::proto::DeleteVolumeRequest;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use sidecar_runtime::Outcome;

use super::{ClaimKey, Shared, claim_path, name_of, namespace_of, prepare};
use crate::translate::api_errors::cleanup_class_missing;
use crate::translate::claim_filter::{claim_class_name, selected_node};
use crate::translate::create_volume::volume_name;
use crate::translate::data_source::DataSource;
use crate::translate::in_flight::cleanup_rules_out_volume;
use crate::translate::in_flight_entry::{InFlightEntry, JOURNAL_ENTRY_PREFIX};
use crate::translate::migration::{csi_class, is_migrated_class};
use crate::translate::names::{EVENT_IN_FLIGHT_ENTRY_REJECTED, EVENT_PROVISIONING_CLEANUP_FAILED};
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
/// it. `entry` is the journal's record (checked by [`crate::translate::in_flight_entry::entry_defect`] when its
/// claim is gone), or one built from the claim itself (`finalizer_claim`: a claim carrying the
/// provisioning-protection finalizer, released at the end).
///
/// Only the volume the driver gives for the entry's own name is ever deleted: CreateVolume is repeated with the
/// same name and arguments (idempotent by name) to learn its id, and the id is deleted only while no PV holds it
/// (asked of the API, not only of the cache). An id the entry records is compared, never deleted on its word: a
/// recorded id that a PV holds means the entry is not this claim's, and it is rejected before any call.
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
    let elsewhere = |c: &PersistentVolumeClaim| {
        c.metadata.uid.as_deref() == Some(&entry.uid)
            && (namespace_of(c), name_of(c)) != (&entry.namespace[..], &entry.name[..])
    };
    if let Some(other) = shared.stores.claims.filter(elsewhere).first() {
        // The claim of that UID lives under another name: the entry is not the record of a claim that went.
        let reason = format!("its claim {}/{} lives as {}", entry.namespace, entry.name, claim_path(other));
        return reject_entry(shared, &entry.uid, reason).await;
    }
    // The cache may lag: a PV written just before a crash makes the volume the PV's business (its reclaim policy
    // decides), so ask the API itself before deleting anything. Only a live PV of the claim counts: one being
    // deleted may have deleted its volume already (external-provisioner#1469).
    let own_pv = match volume_object(shared, &entry.uid).await {
        Ok(pv) => pv,
        Err(message) => return cleanup_failed(shared, &claim, message).await,
    };
    let own_pv_name = own_pv.as_ref().and_then(|pv| pv.metadata.name.clone());
    // The id the entry records, kept only when no other PV holds it.
    let recorded = match entry.volume_id.take() {
        None => None,
        Some(recorded) => match holder(shared, &entry.uid, own_pv.as_ref(), Some(&recorded)).await {
            Ok(None) => Some(recorded),
            Ok(Some(pv)) if Some(&pv) == own_pv_name.as_ref() => {
                return recovered(shared, &entry, finalizer_claim, None).await;
            }
            Ok(Some(pv)) => {
                let reason = format!("it names the volume {recorded:?}, which the PV {pv} holds");
                let key =
                    ClaimKey { uid: entry.uid.clone(), namespace: entry.namespace.clone(), name: entry.name.clone() };
                if shared.stores.claim(&key).is_none() {
                    return reject_entry(shared, &entry.uid, reason).await;
                }
                // The claim itself is still in the API: its volume is recovered from the claim, and the wrong id is
                // only forgotten (rejecting the entry would forget the claim's own volume too).
                tracing::warn!(claim = %claim_path(&claim), %reason, "ignoring the in-flight journal's recorded volume id");
                None
            }
            Err(message) => return cleanup_failed(shared, &claim, message).await,
        },
    };
    if own_pv.as_ref().is_some_and(|pv| left_to(pv, &entry.uid, None, shared)) {
        return recovered(shared, &entry, finalizer_claim, None).await;
    }
    tracing::info!(claim = %claim_path(&claim), "claim deleted while its volume was being provisioned: deleting the volume");
    let (credentials, snapshot_source) =
        match learn_volume_id(shared, &mut entry, recorded.as_deref(), &claim, &class, migrated).await {
            Ok(learned) => learned,
            Err(Stopped::NoVolume) => return recovered(shared, &entry, finalizer_claim, None).await,
            Err(Stopped::Failed(message)) => return cleanup_failed(shared, &claim, message).await,
        };
    if let Some(volume_id) = entry.volume_id.clone() {
        // The recorded id was checked above already: the same id needs no second look.
        let checked = recorded.as_deref() == Some(volume_id.as_str());
        let held = if checked { Ok(None) } else { holder(shared, &entry.uid, own_pv.as_ref(), Some(&volume_id)).await };
        match held {
            Ok(None) => {}
            Ok(Some(pv)) => {
                if Some(&pv) != own_pv_name.as_ref() {
                    tracing::warn!(claim = %claim_path(&claim), volume = %volume_id, %pv,
                        "the driver gives the deleted claim's name a volume another PV holds: not deleting it");
                }
                return recovered(shared, &entry, finalizer_claim, snapshot_source.as_ref()).await;
            }
            Err(message) => return cleanup_failed(shared, &claim, message).await,
        }
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

/// Whether `pv` holds or keeps the volume `volume_id` (`None`: whatever the claim `uid`'s volume is).
fn left_to(pv: &PersistentVolume, uid: &str, volume_id: Option<&str>, shared: &Shared) -> bool {
    matches!(pv_in_the_way(pv, uid, volume_id, &shared.provisioner), PvInTheWay::Holds | PvInTheWay::KeepsIt)
}

/// The name of a PV that holds or keeps `volume_id`, so that it must not be deleted: the claim's own PV as the API
/// has it, then every cached PV, then (none cached) every PV the API lists, for one the cache has not seen yet.
async fn holder(
    shared: &Shared,
    uid: &str,
    own_pv: Option<&PersistentVolume>,
    volume_id: Option<&str>,
) -> Result<Option<String>, String> {
    let name = |pv: &PersistentVolume| pv.metadata.name.clone().unwrap_or_default();
    if let Some(pv) = own_pv.filter(|pv| left_to(pv, uid, volume_id, shared)) {
        return Ok(Some(name(pv)));
    }
    if let Some(pv) = shared.stores.volumes.filter(|pv| left_to(pv, uid, volume_id, shared)).first() {
        return Ok(Some(name(pv)));
    }
    let listed = shared.list_volumes_where(|pv| left_to(pv, uid, volume_id, shared)).await?;
    Ok(listed.first().map(name))
}

/// Rebuilds the request and repeats CreateVolume to learn the id of the volume of the entry's name (`recorded`:
/// the id the entry records, only compared). Returns the provisioner Secret's data for DeleteVolume and the
/// snapshot whose protection goes afterwards.
async fn learn_volume_id(
    shared: &Shared,
    entry: &mut InFlightEntry,
    recorded: Option<&str>,
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    migrated: bool,
) -> Result<(Credentials, Option<DataSource>), Stopped> {
    let path = claim_path(claim);
    match prepare::prepare(shared, claim, class, selected_node(claim).as_deref()).await {
        Ok(prepared) => {
            match shared.csi_for(migrated).create_volume(prepared.request).await {
                Ok(response) => {
                    let learned = response.volume.map(|v| v.volume_id).unwrap_or_default();
                    if learned.is_empty() {
                        return Err(Stopped::Failed("CreateVolume answered an empty volume id".into()));
                    }
                    if recorded.is_some_and(|r| r != learned) {
                        tracing::warn!(claim = %path, recorded = ?recorded, volume = %learned,
                            "the journal entry records another volume than the driver gives its name: only the driver's is deleted");
                    }
                    entry.volume_id = Some(learned);
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
            Ok((prepared.credentials, prepared.snapshot_source))
        }
        // A volume was made (its id recorded) but the request cannot be built again to prove which: try later.
        Err(refusal) if recorded.is_some() => Err(Stopped::Failed(format!(
            "cannot repeat CreateVolume to find the recorded volume of the deleted claim: {}",
            refusal.message
        ))),
        // A request that cannot be built was never sent: there is no volume.
        Err(refusal) if refusal.state == ProvisioningState::Finished => {
            tracing::info!(claim = %path, reason = %refusal, "no volume can exist for the deleted claim");
            Err(Stopped::NoVolume)
        }
        Err(refusal) => Err(Stopped::Failed(refusal.message)),
    }
}

/// A journal entry that cannot be this provisioner's own (forged, damaged, or for a claim the journal never
/// takes): it goes with a Warning on the journal's Lease, and nothing is read, created or deleted for it.
pub(super) async fn reject_entry(shared: &Shared, uid: &str, reason: String) -> Outcome {
    let entry = format!("{JOURNAL_ENTRY_PREFIX}{}", uid.chars().take(64).collect::<String>());
    tracing::warn!(journal = %shared.journal.path(), %entry, %reason, "in-flight journal entry rejected: nothing deleted");
    shared.journal.remove(uid);
    let lease = Lease {
        metadata: ObjectMeta {
            namespace: Some(shared.journal.namespace().to_string()),
            name: Some(shared.journal.name().to_string()),
            ..Default::default()
        },
        spec: None,
    };
    let message = format!("in-flight journal entry {entry} rejected, nothing deleted: {reason}");
    let event = PlannedEvent { event_type: EventType::Warning, reason: EVENT_IN_FLIGHT_ENTRY_REJECTED, message };
    shared.publish(&lease, &event).await;
    Outcome::Done
}

/// Keeps the volume id in the claim's journal entry, when the journal holds one: a claim protected by the finalizer
/// instead stays in the API until its recovery ends and is read from there (an entry written for it would be one
/// the journal never takes, rejected once the claim is gone). Not fatal when the journal refuses: the cleanup goes
/// on, only a crash before its end would repeat CreateVolume.
async fn record_volume_id(shared: &Shared, entry: &InFlightEntry) {
    if shared.journal.get(&entry.uid).is_none() {
        return;
    }
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
