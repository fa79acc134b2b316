//! The provisioner's writes of claims and PVs: finalizers and the selected-node annotation with guarded updates
//! (upstream's role grants `update` on claims, not `patch`), the PV with a create.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::Api;
use kube::api::PostParams;
use kube::runtime::reflector::ObjectRef;
use sidecar_runtime::update::{Updated, set_finalizer, update};

use super::provision::{api_error_text, claim_path};
use super::{Shared, stores};
use crate::translate::api_errors::{clone_source_gone, volume_not_saved};
use crate::translate::data_source::DataSource;
use crate::translate::names::{ANN_SELECTED_NODE, FINALIZER_CLONE_PROTECTION, FINALIZER_PROVISIONING_PROTECTION};
use crate::translate::refusal::Refusal;

impl Shared {
    /// Creates the PV; one that exists already is success (item 34).
    pub(super) async fn save_volume(&self, pv: &PersistentVolume) -> Result<(), Refusal> {
        let api: Api<PersistentVolume> = Api::all(self.client.clone());
        match api.create(&PostParams::default(), pv).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 409 && status.reason == "AlreadyExists" => Ok(()),
            Err(err) => Err(volume_not_saved(pv.metadata.name.as_deref().unwrap_or_default(), &api_error_text(&err))),
        }
    }

    pub(super) fn claims_api(&self, claim: &PersistentVolumeClaim) -> Api<PersistentVolumeClaim> {
        Api::namespaced(self.client.clone(), claim.metadata.namespace.as_deref().unwrap_or_default())
    }

    /// Adds `finalizer` to the claim; returns the claim as stored (`None` when it is gone).
    pub(super) async fn add_finalizer(
        &self,
        claim: &PersistentVolumeClaim,
        finalizer: &str,
    ) -> Result<Option<PersistentVolumeClaim>, kube::Error> {
        let api = self.claims_api(claim);
        let written = self.own_write(claim, set_finalizer(&api, claim, finalizer, true)).await?;
        Ok(match written {
            Updated::Written(stored) => Some(stored),
            Updated::Unchanged => Some(claim.clone()),
            Updated::Gone => None,
        })
    }

    pub(super) async fn remove_claim_finalizer(&self, claim: &PersistentVolumeClaim) -> Result<(), kube::Error> {
        self.remove_finalizer(claim, FINALIZER_PROVISIONING_PROTECTION).await
    }

    /// Removes `finalizer` from the claim (see [`Shared::newest`]).
    pub(super) async fn remove_finalizer(
        &self,
        claim: &PersistentVolumeClaim,
        finalizer: &str,
    ) -> Result<(), kube::Error> {
        let newest = self.newest(claim);
        let api = self.claims_api(&newest);
        self.own_write(&newest, set_finalizer(&api, &newest, finalizer, false)).await.map(|_| ())
    }

    /// The newest copy of the claim this provisioner has seen: the cache's, or `claim` when that is newer (as right
    /// after our own write). Updates computed from it rarely meet a Conflict.
    pub(super) fn newest(&self, claim: &PersistentVolumeClaim) -> PersistentVolumeClaim {
        match stores::claim_key(claim).and_then(|key| self.stores.claim(&key)) {
            Some(cached) if newer(&cached, claim) => (*cached).clone(),
            _ => claim.clone(),
        }
    }

    /// Removes the finalizer (whether or not the cached claim shows it: it may have been added since).
    pub(super) async fn remove_claim_finalizer_logged(&self, claim: &PersistentVolumeClaim) {
        if let Err(err) = self.remove_claim_finalizer(claim).await {
            tracing::warn!(claim = %claim_path(claim), error = %err, "cannot remove the provisioning finalizer yet");
        }
    }

    /// Adds the clone-protection finalizer to the claim being cloned (read from the cache: the plan found it there).
    pub(super) async fn protect_clone_source(&self, source: &DataSource) -> Result<(), Refusal> {
        let Some(source_claim) = self.stores.claims.get(&ObjectRef::new(&source.name).within(&source.namespace)) else {
            return Err(clone_source_gone(source));
        };
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &source.namespace);
        set_finalizer(&api, &*source_claim, FINALIZER_CLONE_PROTECTION, true)
            .await
            .map(|_| ())
            .map_err(|e| Refusal::no_change(api_error_text(&e)))
    }

    /// Gives the claim back to the scheduler (item 40): the selected-node annotation goes, with an update.
    pub(super) async fn remove_selected_node(&self, claim: &PersistentVolumeClaim) -> Result<(), kube::Error> {
        let newest = self.newest(claim);
        let api = self.claims_api(&newest);
        update(&api, &newest, |current| {
            let mut updated = current.clone();
            updated.metadata.annotations.as_mut()?.remove(ANN_SELECTED_NODE)?;
            Some(updated)
        })
        .await?;
        Ok(())
    }
}

/// Whether `a` is a later version of the claim than `b` (resourceVersions compared as integers, as upstream's
/// snapshot controller compares them; an unreadable one is never newer).
pub(super) fn newer(a: &PersistentVolumeClaim, b: &PersistentVolumeClaim) -> bool {
    let version =
        |c: &PersistentVolumeClaim| c.metadata.resource_version.as_deref().and_then(|v| v.parse::<u64>().ok());
    a.metadata.uid == b.metadata.uid && matches!((version(a), version(b)), (Some(a), Some(b)) if a > b)
}
