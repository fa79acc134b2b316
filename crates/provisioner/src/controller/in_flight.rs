//! Claims in flight: recorded in the in-flight journal (or, as a fallback, with the provisioning-protection
//! finalizer) before CreateVolume, and recovered from that record when the claim goes before its PV exists (see
//! [`crate::translate::in_flight_entry`]).

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::StorageClass;
use sidecar_runtime::Outcome;

use super::provision::{api_error_text, claim_path, name_of, namespace_of};
use super::{ClaimKey, Shared};
use crate::translate::api_errors::claim_gone;
use crate::translate::in_flight::has_provisioning_finalizer;
use crate::translate::in_flight_entry::{ClaimNow, EntryStep, InFlightEntry, entry_step, in_flight_entry};
use crate::translate::names::FINALIZER_PROVISIONING_PROTECTION;
use crate::translate::node_deployment::tends_in_flight_volume;
use crate::translate::refusal::Refusal;

/// How a claim in flight is protected.
pub(super) enum Protection {
    /// Its entry in the journal.
    Journal { uid: String },
    /// The finalizer, on the claim as stored.
    Finalizer(Box<PersistentVolumeClaim>),
}

impl Shared {
    /// Records the claim before CreateVolume: in the journal (one write shared with every claim starting now), or
    /// with the finalizer when the journal cannot take it. A claim that carries the finalizer already keeps it.
    pub(super) async fn protect(
        &self,
        claim: &PersistentVolumeClaim,
        class: &StorageClass,
    ) -> Result<Protection, Refusal> {
        if has_provisioning_finalizer(claim) {
            return Ok(Protection::Finalizer(Box::new(claim.clone())));
        }
        let entry = in_flight_entry(claim, class);
        match self.journal.put(&entry.uid, entry.to_json()).await {
            Ok(()) => return Ok(Protection::Journal { uid: entry.uid }),
            Err(refused) => {
                tracing::info!(claim = %claim_path(claim), reason = %refused,
                    "the in-flight journal cannot take the claim: protecting it with the finalizer")
            }
        }
        let stored = self
            .add_finalizer(claim, FINALIZER_PROVISIONING_PROTECTION)
            .await
            .map_err(|e| Refusal::no_change(api_error_text(&e)))?
            .ok_or_else(|| claim_gone(namespace_of(claim), name_of(claim)))?;
        Ok(Protection::Finalizer(Box::new(stored)))
    }

    /// The driver said it makes no volume: the record goes.
    pub(super) async fn unprotect(&self, protection: &Protection) {
        match protection {
            Protection::Journal { uid } => self.journal.remove(uid),
            Protection::Finalizer(claim) => self.remove_claim_finalizer_logged(claim).await,
        }
    }

    /// The PV exists: the journal entry may go (with a later write). The finalizer waits for the claim to be Bound
    /// ([`crate::translate::in_flight`]), so that it is not written while the PV binder writes it.
    pub(super) fn volume_saved(&self, protection: &Protection) {
        if let Protection::Journal { uid } = protection {
            self.journal.remove(uid);
        }
    }

    /// The journal's part of a claim's sync: `Some` when the entry decides the outcome (recovery), `None` when the
    /// sync goes on. `claim` is the cached claim with the key's UID, if any.
    pub(super) async fn sync_journal_entry(
        &self,
        key: &ClaimKey,
        claim: Option<&PersistentVolumeClaim>,
        volume_exists: bool,
    ) -> Option<Outcome> {
        let text = self.journal.get(&key.uid)?;
        let Some(entry) = InFlightEntry::parse(&text) else {
            tracing::warn!(claim = %format!("{}/{}", key.namespace, key.name), "unreadable in-flight journal entry left alone");
            return None;
        };
        let now = match claim {
            None => ClaimNow::Gone,
            Some(claim) if claim.metadata.deletion_timestamp.is_some() => ClaimNow::Deleting,
            Some(_) => ClaimNow::Live,
        };
        // In node mode the journal is this node's: only claims it provisioned are in it.
        if claim.is_some_and(|c| !tends_in_flight_volume(c, &self.provisioner)) {
            return None;
        }
        match entry_step(&entry, now, volume_exists) {
            EntryStep::Keep => None,
            EntryStep::Drop => {
                self.journal.remove(&key.uid);
                None
            }
            EntryStep::LearnVolumeId | EntryStep::DeleteVolume => {
                let finalizer_claim = claim.filter(|c| has_provisioning_finalizer(c));
                Some(self.recover(entry, finalizer_claim).await)
            }
        }
    }

    /// Once the journal has been read: every entry's claim is synced, so that entries of claims deleted while no
    /// provisioner ran are recovered.
    pub(super) async fn queue_journal_entries(&self) {
        self.journal.loaded().await;
        for (uid, text) in self.journal.entries() {
            match InFlightEntry::parse(&text) {
                Some(entry) => self.claims.add(ClaimKey { uid, namespace: entry.namespace, name: entry.name }),
                None => tracing::warn!(%uid, "unreadable in-flight journal entry left alone"),
            }
        }
    }
}
