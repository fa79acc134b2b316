//! How the write values of [`crate::translate::common::patch`] reach the API server.
//!
//! Snapshots and contents take JSON merge patches (upstream's snapshot-controller ClusterRole grants `patch` on
//! both and on `volumesnapshots/status`); a claim's finalizer is changed with a guarded update (`persistentvolumeclaims`
//! has no `patch` there). Failures are recorded on the snapshot as the translate module says.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use sidecar_runtime::PlannedEvent;
use sidecar_runtime::time::now;
use sidecar_runtime::update::set_finalizer;
use snapshot_api::names::FINALIZER_PVC_AS_SOURCE;
use snapshot_api::{VolumeSnapshot, VolumeSnapshotContent};

use super::Shared;
use crate::translate::common::patch::{ContentPatch, SnapshotPatch, SnapshotStatusWrite};
use crate::translate::common::status_error::SnapshotFailure;

pub use sidecar_runtime::api_error::Retry;

pub use sidecar_runtime::api_error::api_error_text;

impl Shared {
    fn snapshots_api(&self, snapshot: &VolumeSnapshot) -> Api<VolumeSnapshot> {
        Api::namespaced(self.client.clone(), &snapshot.namespace().unwrap_or_default())
    }

    /// Writes `patch` to the snapshot; returns the snapshot as stored.
    pub(super) async fn patch_snapshot(
        &self,
        snapshot: &VolumeSnapshot,
        patch: &SnapshotPatch,
    ) -> Result<VolumeSnapshot, kube::Error> {
        let api = self.snapshots_api(snapshot);
        api.patch(&snapshot.name_any(), &PatchParams::default(), &Patch::Merge(patch.merge_patch())).await
    }

    /// Writes the snapshot's status; returns the snapshot as stored.
    pub(super) async fn write_status(
        &self,
        snapshot: &VolumeSnapshot,
        write: &SnapshotStatusWrite,
    ) -> Result<VolumeSnapshot, kube::Error> {
        let api = self.snapshots_api(snapshot);
        api.patch_status(&snapshot.name_any(), &PatchParams::default(), &Patch::Merge(write.merge_patch())).await
    }

    pub(super) async fn patch_content(
        &self,
        content: &VolumeSnapshotContent,
        patch: &ContentPatch,
    ) -> Result<VolumeSnapshotContent, kube::Error> {
        let api: Api<VolumeSnapshotContent> = Api::all(self.client.clone());
        api.patch(&content.name_any(), &PatchParams::default(), &Patch::Merge(patch.merge_patch())).await
    }

    /// Adds or removes `pvc-as-source-protection` on the claim.
    pub(super) async fn set_claim_finalizer(
        &self,
        claim: &PersistentVolumeClaim,
        wanted: bool,
    ) -> Result<(), kube::Error> {
        let api: Api<PersistentVolumeClaim> =
            Api::namespaced(self.client.clone(), &claim.namespace().unwrap_or_default());
        set_finalizer(&api, claim, FINALIZER_PVC_AS_SOURCE, wanted).await.map(|_| ())
    }

    pub(super) async fn record<K: kube::Resource<DynamicType = ()>>(&self, object: &K, event: &PlannedEvent) {
        self.events.record(object, event).await;
    }

    /// Records `failure` on the snapshot (status error and event, skipped when the same message is set already);
    /// `Err` when the sync must be retried.
    pub(super) async fn fail(&self, snapshot: &VolumeSnapshot, failure: SnapshotFailure) -> Result<(), Retry> {
        let recorded = failure.record_on(snapshot, now());
        if let Some(write) = &recorded.status
            && let Err(err) = self.write_status(snapshot, write).await
        {
            tracing::warn!(snapshot = %key(snapshot), error = %err, "cannot record the snapshot's error");
        }
        if let Some(event) = &recorded.event {
            self.record(snapshot, event).await;
        }
        match failure.error {
            Some(error) => Err(Retry(error)),
            None => Ok(()),
        }
    }
}

fn key(snapshot: &VolumeSnapshot) -> String {
    crate::translate::common::names::snapshot_key(snapshot)
}
