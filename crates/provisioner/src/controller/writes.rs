//! The shared context's own helpers: the writes of claims, PVs and snapshots, events, capacity nudges, and the reads
//! beyond the caches more than one part needs (Secrets, snapshots). Claims are written with guarded updates
//! (upstream's role grants `update` on claims, not `patch`), PVs with a create and strategic-merge patches.

use std::borrow::Cow;
use std::future::Future;
use std::time::Duration;

use csi_client::CsiClient;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Secret};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Resource};
use sidecar_runtime::api_error::{api_error_text, is_already_exists, is_forbidden, is_not_found};
use sidecar_runtime::update::{Updated, delete_by_name, set_finalizer, update};
use snapshot_api::VolumeSnapshot;

use super::{Shared, claim_path};
use crate::translate::api_errors::{clone_source_gone, snapshot_not_protected, volume_not_saved};
use crate::translate::data_source::DataSource;
use crate::translate::names::{
    ANN_SELECTED_NODE, FINALIZER_CLONE_PROTECTION, FINALIZER_PROVISIONING_PROTECTION,
    FINALIZER_SNAPSHOT_SOURCE_PROTECTION,
};
use crate::translate::refusal::{PlannedEvent, Refusal};
use crate::translate::secrets::{Credentials, SecretRef, credentials};
use crate::translate::snapshot_source::source_protection_releasable;
use crate::translate::watch_keys::claim_key;

impl Shared {
    pub(super) async fn publish<K: Resource<DynamicType = ()>>(&self, object: &K, event: &PlannedEvent) {
        self.events.record(object, event).await;
    }

    /// Something that may change the published capacity happened (a provisioned, refused or deleted volume).
    pub(super) fn capacity_changed(&self) {
        if let Some(capacity) = &self.capacity {
            capacity.nudge();
        }
    }

    /// A class or node changed: the publisher refreshes if that changes which objects should exist.
    pub(super) fn capacity_keys_may_have_changed(&self) {
        if let Some(capacity) = &self.capacity {
            capacity.nudge_keys();
        }
    }

    /// `--retry-interval-max`: how long an infeasible claim waits.
    pub(super) fn slow_retry(&self) -> Duration {
        self.options.retry.max
    }

    /// The CSI client for calls about a migrated (`true`) or CSI volume, for the metrics' `migrated` label.
    pub(super) fn csi_for(&self, migrated: bool) -> Cow<'_, CsiClient> {
        if migrated { Cow::Owned(self.csi.for_migrated_volume()) } else { Cow::Borrowed(&self.csi) }
    }

    /// The Secret's data. The error is the API's text, never the data.
    pub(super) async fn read_secret(&self, secret: &SecretRef) -> Result<Credentials, String> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &secret.namespace);
        api.get(&secret.name).await.map(|s| credentials(&s)).map_err(|e| api_error_text(&e))
    }

    // ---- Claims ---------------------------------------------------------------------------------------------------

    pub(super) fn claims_api(&self, claim: &PersistentVolumeClaim) -> Api<PersistentVolumeClaim> {
        Api::namespaced(self.client.clone(), claim.metadata.namespace.as_deref().unwrap_or_default())
    }

    /// Runs the finalizer `write` on `claim` as one of our own writes, so that its watch event does not queue the
    /// claim (see [`super::own_writes`]); a foreign change seen meanwhile queues it.
    async fn own_write<F>(
        &self,
        claim: &PersistentVolumeClaim,
        write: F,
    ) -> Result<Updated<PersistentVolumeClaim>, kube::Error>
    where
        F: Future<Output = Result<Updated<PersistentVolumeClaim>, kube::Error>>,
    {
        let uid = claim.metadata.uid.clone().unwrap_or_default();
        self.memory.own_write_begins(&uid);
        let result = write.await;
        let version = match &result {
            Ok(Updated::Written(stored)) => stored.metadata.resource_version.clone(),
            _ => None,
        };
        if self.memory.own_write_ends(&uid, version.as_deref())
            && let Some(key) = claim_key(claim)
        {
            self.claims.add(key);
        }
        result
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

    /// Removes `finalizer` from the newest copy of the claim (see [`Shared::newest`]).
    pub(super) async fn remove_finalizer(
        &self,
        claim: &PersistentVolumeClaim,
        finalizer: &str,
    ) -> Result<(), kube::Error> {
        let newest = self.newest(claim);
        let api = self.claims_api(&newest);
        self.own_write(&newest, set_finalizer(&api, &newest, finalizer, false)).await.map(|_| ())
    }

    pub(super) async fn remove_claim_finalizer(&self, claim: &PersistentVolumeClaim) -> Result<(), kube::Error> {
        self.remove_finalizer(claim, FINALIZER_PROVISIONING_PROTECTION).await
    }

    /// Removes the provisioning-protection finalizer (whether or not the cached claim shows it: it may have been
    /// added since); a failure is logged and left to a later sync.
    pub(super) async fn remove_claim_finalizer_logged(&self, claim: &PersistentVolumeClaim) {
        if let Err(err) = self.remove_claim_finalizer(claim).await {
            tracing::warn!(claim = %claim_path(claim), error = %err, "cannot remove the provisioning finalizer yet");
        }
    }

    /// The newest copy of the claim this provisioner has seen: the cache's, or `claim` when that is newer (as right
    /// after our own write). Updates computed from it rarely meet a Conflict.
    fn newest(&self, claim: &PersistentVolumeClaim) -> PersistentVolumeClaim {
        match claim_key(claim).and_then(|key| self.stores.claim(&key)) {
            Some(cached) if newer(&cached, claim) => (*cached).clone(),
            _ => claim.clone(),
        }
    }

    /// Adds the clone-protection finalizer to the claim being cloned (read from the cache: the plan found it there).
    pub(super) async fn protect_clone_source(&self, source: &DataSource) -> Result<(), Refusal> {
        let Some(source_claim) = self.stores.claims.get_in(&source.namespace, &source.name) else {
            return Err(clone_source_gone(source));
        };
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &source.namespace);
        set_finalizer(&api, &*source_claim, FINALIZER_CLONE_PROTECTION, true)
            .await
            .map(|_| ())
            .map_err(|e| Refusal::no_change(api_error_text(&e)))
    }

    /// Gives the claim back to the scheduler: the selected-node annotation goes, with an update (the upstream
    /// library's `rescheduleProvisioning`, sig-storage-lib-external-provisioner controller/controller.go).
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

    /// Writes `claim` as it is (a plain Update, whose Conflict tells that someone else wrote it first).
    pub(super) async fn replace_claim(&self, claim: &PersistentVolumeClaim) -> Result<(), kube::Error> {
        let name = claim.metadata.name.as_deref().unwrap_or_default();
        self.claims_api(claim).replace(name, &PostParams::default(), claim).await.map(|_| ())
    }

    // ---- PersistentVolumes ----------------------------------------------------------------------------------------

    /// Creates the PV. On AlreadyExists the PV of that name is read and returned: whether it holds the new volume
    /// is the caller's question (upstream's library counts AlreadyExists as done, external-provisioner#1469). One
    /// gone again by then is an error: the attempt is tried again.
    pub(super) async fn save_volume(&self, pv: &PersistentVolume) -> Result<Saved, Refusal> {
        let name = pv.metadata.name.as_deref().unwrap_or_default();
        let api: Api<PersistentVolume> = Api::all(self.client.clone());
        let exists = match api.create(&PostParams::default(), pv).await {
            Ok(_) => return Ok(Saved::Created),
            Err(err) if is_already_exists(&err) => api_error_text(&err),
            Err(err) => return Err(volume_not_saved(name, &api_error_text(&err))),
        };
        match api.get_opt(name).await {
            Ok(Some(existing)) => Ok(Saved::AlreadyExists(Box::new(existing))),
            Ok(None) => Err(volume_not_saved(name, &exists)),
            Err(err) => Err(volume_not_saved(name, &api_error_text(&err))),
        }
    }

    /// The PV `name` as the API holds it now (not the cache, which may lag).
    pub(super) async fn read_volume_object(&self, name: &str) -> Result<Option<PersistentVolume>, String> {
        Api::<PersistentVolume>::all(self.client.clone()).get_opt(name).await.map_err(|e| api_error_text(&e))
    }

    /// Every PV the API holds (listed in pages, not from the cache) for which `keep` is true.
    pub(super) async fn list_volumes_where(
        &self,
        keep: impl Fn(&PersistentVolume) -> bool,
    ) -> Result<Vec<PersistentVolume>, String> {
        let api: Api<PersistentVolume> = Api::all(self.client.clone());
        let mut kept = Vec::new();
        let mut params = ListParams::default().limit(500);
        loop {
            let page = api.list(&params).await.map_err(|e| api_error_text(&e))?;
            kept.extend(page.items.into_iter().filter(|pv| keep(pv)));
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => return Ok(kept),
            }
        }
    }

    /// A strategic-merge patch of the PV `name`; a PV that is gone is no error.
    pub(super) async fn patch_volume(&self, name: &str, patch: serde_json::Value) -> Result<(), kube::Error> {
        let api: Api<PersistentVolume> = Api::all(self.client.clone());
        match api.patch(name, &PatchParams::default(), &Patch::Strategic(patch)).await {
            Ok(_) => Ok(()),
            Err(err) if is_not_found(&err) => Ok(()),
            Err(err) => Err(err),
        }
    }

    /// Deletes the PV object `name`; one that is gone already is no error.
    pub(super) async fn delete_volume_object(&self, name: &str) -> Result<(), kube::Error> {
        delete_by_name(&Api::<PersistentVolume>::all(self.client.clone()), name).await
    }

    // ---- VolumeSnapshots (read when needed, never cached) ---------------------------------------------------------

    /// The snapshot `source` names, as the API holds it now.
    pub(super) async fn snapshot(&self, source: &DataSource) -> Result<Option<VolumeSnapshot>, kube::Error> {
        let snapshots: Api<VolumeSnapshot> = Api::namespaced(self.client.clone(), &source.namespace);
        snapshots.get_opt(&source.name).await
    }

    /// Adds the source-protection finalizer before CreateVolume, so the snapshot outlives the restore.
    pub(super) async fn protect_snapshot(&self, source: &DataSource) -> Result<(), Refusal> {
        self.change_snapshot_finalizer(source, true)
            .await
            .map_err(|e| snapshot_not_protected(&source.name, &api_error_text(&e)))
    }

    /// Removes the source-protection finalizer once a restore is over, unless a claim other than `restoring_uid`
    /// still restores from the same snapshot (upstream removes it regardless, which unprotects the other restore).
    pub(super) async fn release_snapshot(&self, source: &DataSource, restoring_uid: Option<&str>) {
        let Some(snapshot) = self.snapshot(source).await.ok().flatten() else { return };
        let claims = self.stores.claims_with_data_source();
        let others = claims.iter().filter(|c| c.metadata.uid.as_deref() != restoring_uid).map(|c| &**c);
        if !source_protection_releasable(&snapshot, others) {
            return;
        }
        if let Err(err) = self.change_snapshot_finalizer(source, false).await {
            // The sweep takes it away later.
            tracing::warn!(snapshot = %source.name, error = %err, "cannot remove the snapshot's source protection yet");
        }
    }

    /// Adds or removes the finalizer on the snapshot as read now, with an update.
    pub(super) async fn change_snapshot_finalizer(&self, source: &DataSource, add: bool) -> Result<(), kube::Error> {
        let snapshots: Api<VolumeSnapshot> = Api::namespaced(self.client.clone(), &source.namespace);
        let Some(snapshot) = snapshots.get_opt(&source.name).await? else { return Ok(()) };
        match set_finalizer(&snapshots, &snapshot, FINALIZER_SNAPSHOT_SOURCE_PROTECTION, add).await {
            Ok(_) => Ok(()),
            // Upstream tolerates RBAC without `update` on snapshots (older deployments): go on unprotected.
            Err(err) if is_forbidden(&err) => {
                tracing::warn!(
                    snapshot = %source.name,
                    "no permission to update volumesnapshots: the snapshot's finalizers are left as they are"
                );
                Ok(())
            }
            Err(err) => Err(err),
        }
    }
}

/// What the PV create found.
pub(super) enum Saved {
    Created,
    /// A PV of that name was there already, as read just after.
    AlreadyExists(Box<PersistentVolume>),
}

/// Whether `a` is a later version of the claim than `b` (resourceVersions compared as integers, as upstream's
/// snapshot controller compares them; an unreadable one is never newer).
fn newer(a: &PersistentVolumeClaim, b: &PersistentVolumeClaim) -> bool {
    let version =
        |c: &PersistentVolumeClaim| c.metadata.resource_version.as_deref().and_then(|v| v.parse::<u64>().ok());
    a.metadata.uid == b.metadata.uid && matches!((version(a), version(b)), (Some(a), Some(b)) if a > b)
}
