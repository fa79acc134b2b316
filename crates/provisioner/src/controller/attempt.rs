//! One provisioning attempt: the request, the claim recorded in flight, the sources protected, CreateVolume, the PV
//! (external-provisioner pkg/controller/controller.go, `Provision`). Beyond upstream, the claim is recorded in the
//! API before the call (in the in-flight journal, else with the provisioning-protection finalizer), so that a crash
//! or the claim's deletion cannot lose the volume.

use std::time::Instant;

use csi_client::proto::DeleteVolumeRequest;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;

use super::writes::Saved;
use super::{Shared, claim_path, name_of, namespace_of, prepare};
use crate::translate::api_errors::{claim_gone, volume_deleted_for_pv_in_the_way, volume_kept_by_pv_in_the_way};
use crate::translate::in_flight::{cleanup_rules_out_volume, has_provisioning_finalizer, record_goes_after_failure};
use crate::translate::in_flight_entry::{in_flight_entry, journal_may_take};
use crate::translate::migration::{api_volume, csi_class, is_migrated_class};
use crate::translate::names::FINALIZER_PROVISIONING_PROTECTION;
use crate::translate::persistent_volume::persistent_volume;
use crate::translate::prepare::Prepared;
use crate::translate::pv_in_the_way::{PvInTheWay, pv_in_the_way};
use crate::translate::refusal::{ProvisioningState, Refusal, create_volume_failure};
use crate::translate::secrets::Credentials;

/// Attempts at deleting a volume the provisioner created but cannot use, within one `--timeout` (as upstream's
/// `cleanupVolume`, external-provisioner pkg/controller/controller.go).
const REJECTED_VOLUME_DELETE_ATTEMPTS: usize = 5;

/// How a claim in flight is protected.
enum Protection {
    /// Its entry in the journal.
    Journal { uid: String },
    /// The finalizer, on the claim as stored.
    Finalizer(Box<PersistentVolumeClaim>),
}

/// One attempt. Returns the PV name. `class` is the claim's class as stored: an in-tree class of the plugin the
/// driver replaces is translated here, and its PV is then written in the in-tree form.
pub(super) async fn try_provision(
    shared: &Shared,
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    node: Option<&str>,
) -> Result<String, Refusal> {
    let migrated = is_migrated_class(&shared.provisioner, class);
    let class = csi_class(&shared.provisioner, class)?;
    let Prepared { plan, request, credentials, references, clone_source, snapshot_source } =
        prepare::prepare(shared, claim, &class, node).await?;

    let recorded_before = is_recorded(shared, claim);
    let protection = protect(shared, claim, &class).await?;
    if let Some(source) = &clone_source {
        shared.protect_clone_source(source).await?;
    }
    if let Some(source) = &snapshot_source {
        shared.protect_snapshot(source).await?;
    }
    let may_reschedule = shared.provisioner.supports_topology() && node.is_some();
    let response = match shared.csi_for(migrated).create_volume(request).await {
        Ok(response) => response,
        Err(err) => {
            let refusal = create_volume_failure(&err, may_reschedule);
            if record_goes_after_failure(refusal.state, cleanup_rules_out_volume(&err), recorded_before) {
                unprotect(shared, &protection).await;
            }
            return Err(refusal);
        }
    };
    let volume = response.volume.unwrap_or_default();
    let pv = match persistent_volume(&volume, &plan, &references, claim, &class, &shared.provisioner) {
        Ok(pv) => pv,
        Err(rejection) if !rejection.needs_cleanup() => {
            // Nothing to delete by id: the claim stays in flight and the retry, by the same name, learns the id.
            return Err(rejection.refusal(&plan.volume_name, None));
        }
        Err(rejection) => {
            let cleanup = delete_rejected_volume(shared, &volume.volume_id, credentials, migrated).await;
            return Err(rejection.refusal(&plan.volume_name, cleanup.err().as_deref()));
        }
    };
    let pv = match api_volume(pv, migrated) {
        Ok(pv) => pv,
        Err(message) => {
            // As upstream: the volume cannot be recorded, so it goes; if that fails, try again later.
            let state = match delete_rejected_volume(shared, &volume.volume_id, credentials, migrated).await {
                Ok(()) => ProvisioningState::Finished,
                Err(_) => ProvisioningState::InBackground,
            };
            return Err(Refusal::failed(state, message));
        }
    };
    if let Saved::AlreadyExists(existing) = shared.save_volume(&pv).await? {
        let volume_id = volume.volume_id.as_str();
        pv_in_the_way_of_volume(shared, &existing, claim, volume_id, &protection, credentials, migrated).await?;
    }
    // The PV exists: the journal entry may go (with a later write). The finalizer waits for the claim to be Bound
    // ([`crate::translate::in_flight`]), so that it is not written while the PV binder writes the claim.
    if let Protection::Journal { uid } = &protection {
        shared.journal.remove(uid);
    }
    if let Some(source) = &snapshot_source {
        shared.release_snapshot(source, claim.metadata.uid.as_deref()).await;
    }
    Ok(plan.volume_name)
}

/// Whether the claim is in flight already, from an earlier attempt whose outcome is unknown.
fn is_recorded(shared: &Shared, claim: &PersistentVolumeClaim) -> bool {
    let uid = claim.metadata.uid.as_deref().unwrap_or_default();
    has_provisioning_finalizer(claim) || shared.journal.get(uid).is_some()
}

/// Records the claim before CreateVolume: in the journal (one write shared with every claim starting now), or
/// with the finalizer when the journal cannot take it, or must not ([`journal_may_take`]). A claim that carries
/// the finalizer already keeps it.
async fn protect(shared: &Shared, claim: &PersistentVolumeClaim, class: &StorageClass) -> Result<Protection, Refusal> {
    if has_provisioning_finalizer(claim) {
        return Ok(Protection::Finalizer(Box::new(claim.clone())));
    }
    if journal_may_take(claim, class) {
        let entry = in_flight_entry(claim);
        match shared.journal.put(&entry.uid, entry.to_json()).await {
            Ok(()) => return Ok(Protection::Journal { uid: entry.uid }),
            Err(refused) => {
                tracing::info!(claim = %claim_path(claim), reason = %refused,
                    "the in-flight journal cannot take the claim: protecting it with the finalizer")
            }
        }
    }
    let stored = shared
        .add_finalizer(claim, FINALIZER_PROVISIONING_PROTECTION)
        .await
        .map_err(|e| Refusal::no_change(sidecar_runtime::api_error::api_error_text(&e)))?
        .ok_or_else(|| claim_gone(namespace_of(claim), name_of(claim)))?;
    Ok(Protection::Finalizer(Box::new(stored)))
}

/// The driver said it makes no volume: the record goes.
async fn unprotect(shared: &Shared, protection: &Protection) {
    match protection {
        Protection::Journal { uid } => shared.journal.remove(uid),
        Protection::Finalizer(claim) => shared.remove_claim_finalizer_logged(claim).await,
    }
}

/// The PV create met a PV of the same name ([`crate::translate::pv_in_the_way`]): done when it holds the new volume;
/// otherwise the volume goes, unless that PV keeps it, and the attempt fails (the claim, if it lives, is
/// provisioned again once that PV is gone). Upstream takes any such PV for success (external-provisioner#1469).
async fn pv_in_the_way_of_volume(
    shared: &Shared,
    existing: &PersistentVolume,
    claim: &PersistentVolumeClaim,
    volume_id: &str,
    protection: &Protection,
    credentials: Credentials,
    migrated: bool,
) -> Result<(), Refusal> {
    let uid = claim.metadata.uid.as_deref().unwrap_or_default();
    let name = existing.metadata.name.as_deref().unwrap_or_default();
    match pv_in_the_way(existing, uid, Some(volume_id), &shared.provisioner) {
        PvInTheWay::Holds => Ok(()),
        PvInTheWay::HoldsAnother => {
            // Only a driver that breaks CSI's idempotency by name makes a second volume; the claim has its PV.
            if let Err(error) = delete_rejected_volume(shared, volume_id, credentials, migrated).await {
                tracing::warn!(claim = %claim_path(claim), volume = %name, %volume_id, %error,
                    "the claim's PV names another volume; cannot delete this extra one");
            }
            Ok(())
        }
        PvInTheWay::KeepsIt => {
            unprotect(shared, protection).await;
            Err(volume_kept_by_pv_in_the_way(name, volume_id))
        }
        PvInTheWay::Orphan => {
            let cleanup = delete_rejected_volume(shared, volume_id, credentials, migrated).await;
            if cleanup.is_ok() {
                unprotect(shared, protection).await;
            }
            Err(volume_deleted_for_pv_in_the_way(name, volume_id, cleanup.err().as_deref()))
        }
    }
}

/// DeleteVolume for a volume that cannot be used, a few times within one timeout.
async fn delete_rejected_volume(
    shared: &Shared,
    volume_id: &str,
    credentials: Credentials,
    migrated: bool,
) -> Result<(), String> {
    let secrets = credentials.into_map();
    let deadline = Instant::now() + shared.csi.timeout();
    let mut last = String::new();
    for _ in 0..REJECTED_VOLUME_DELETE_ATTEMPTS {
        let request = DeleteVolumeRequest { volume_id: volume_id.to_string(), secrets: secrets.clone() };
        match shared.csi_for(migrated).delete_volume(request).await {
            Ok(_) => return Ok(()),
            Err(err) => last = err.go_text(),
        }
        if Instant::now() >= deadline {
            break;
        }
    }
    Err(last)
}
