//! The finalizers the snapshot-controller puts on VolumeSnapshots and on the claim a snapshot is cut from, and when
//! the claim's comes off (external-snapshotter pkg/common-controller/snapshot_controller.go:
//! checkandAddSnapshotFinalizers, ensurePVCFinalizer, checkandRemovePVCFinalizer). Their removal from a snapshot
//! during deletion is in [`super::deletion`].

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::ResourceExt;
use snapshot_api::names::{
    FINALIZER_PVC_AS_SOURCE, FINALIZER_VOLUME_SNAPSHOT_AS_SOURCE, FINALIZER_VOLUME_SNAPSHOT_BOUND,
};
use snapshot_api::{DeletionPolicy, VolumeSnapshot, VolumeSnapshotContent};

use super::dynamic_content::claim_finalizer_failed;
use super::names::{bound_content_name, is_ready};
use super::patch::{ClaimPatch, MetadataPatch, SnapshotPatch};
use super::reasons::{ERROR_PVC_FINALIZER, SNAPSHOT_FINALIZER_ERROR};
use super::status_error::SnapshotFailure;

/// The finalizers a snapshot not being deleted lacks. The as-source finalizer always; the bound finalizer
/// once the snapshot is bound and its content (`content`: the one [`super::binding`] accepted, if any) has the
/// Delete policy, because only then does deleting the snapshot reach the storage.
pub fn snapshot_finalizers(
    snapshot: &VolumeSnapshot,
    content: Option<&VolumeSnapshotContent>,
) -> Option<SnapshotPatch> {
    if snapshot.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let mut add = vec![FINALIZER_VOLUME_SNAPSHOT_AS_SOURCE];
    if bound_content_name(snapshot).is_some()
        && content.is_some_and(|c| c.spec.deletion_policy == DeletionPolicy::Delete)
    {
        add.push(FINALIZER_VOLUME_SNAPSHOT_BOUND);
    }
    MetadataPatch::finalizers(&snapshot.metadata, &add, &[])
        .map(|metadata| SnapshotPatch { metadata, ..Default::default() })
}

/// Finding the content or writing the snapshot's finalizers failed.
pub fn snapshot_finalizer_failed(error: &str) -> SnapshotFailure {
    SnapshotFailure::event_only(
        SNAPSHOT_FINALIZER_ERROR,
        format!("Failed to check and update snapshot: {error}"),
        error.to_string(),
    )
}

/// Before a dynamic content is created, the claim gets `pvc-as-source-protection`, so that it is not
/// deleted while the snapshot is being cut. `claim` is `None` when the lister does not have it. A claim already
/// being deleted without the finalizer cannot be protected any more: the content is not created.
pub fn claim_finalizer_before_create(
    snapshot: &VolumeSnapshot,
    claim: Option<&PersistentVolumeClaim>,
) -> Result<Option<ClaimPatch>, SnapshotFailure> {
    let Some(claim) = claim else {
        // Upstream's text, then which claim: "cannot get claim" alone does not say what to fix.
        let name = snapshot.spec.source.persistent_volume_claim_name.as_deref().unwrap_or_default();
        let error = format!("cannot get claim from snapshot: persistentvolumeclaims {name:?} not found");
        return Err(claim_finalizer_failed(&snapshot.name_any(), &error));
    };
    if claim.finalizers().iter().any(|f| f == FINALIZER_PVC_AS_SOURCE) {
        return Ok(None);
    }
    if claim.metadata.deletion_timestamp.is_some() {
        return Err(claim_finalizer_failed(
            &claim.name_any(),
            "cannot add finalizer on claim because it is being deleted",
        ));
    }
    Ok(MetadataPatch::finalizers(&claim.metadata, &[FINALIZER_PVC_AS_SOURCE], &[])
        .map(|metadata| ClaimPatch { metadata }))
}

/// Whether a snapshot of the namespace is still being cut from `claim`: it names the claim and is not
/// ready. Pre-provisioned snapshots never count; `skip` (the snapshot being deleted) does not either.
pub fn claim_in_use<'a>(
    claim: &PersistentVolumeClaim,
    snapshots: impl IntoIterator<Item = &'a VolumeSnapshot>,
    skip: Option<&VolumeSnapshot>,
) -> bool {
    let claim_name = claim.name_any();
    snapshots.into_iter().any(|snapshot| {
        let skipped = skip.is_some_and(|s| s.name_any() == snapshot.name_any());
        !skipped
            && snapshot.spec.source.persistent_volume_claim_name.as_deref() == Some(claim_name.as_str())
            && !is_ready(snapshot)
    })
}

/// The write that takes `pvc-as-source-protection` off the claim, when it has it and no snapshot of the
/// namespace (`snapshots`) is still being cut from it. Called on every sync of a dynamic snapshot
/// (`skip: None`) and before a snapshot's own finalizers come off (`skip: Some(that snapshot)`).
///
/// Known gap kept from upstream (#1305): a snapshot that never becomes ready keeps the claim pinned until it is
/// deleted.
pub fn claim_finalizer_removal<'a>(
    claim: &PersistentVolumeClaim,
    snapshots: impl IntoIterator<Item = &'a VolumeSnapshot>,
    skip: Option<&VolumeSnapshot>,
) -> Option<ClaimPatch> {
    if !claim.finalizers().iter().any(|f| f == FINALIZER_PVC_AS_SOURCE) || claim_in_use(claim, snapshots, skip) {
        return None;
    }
    MetadataPatch::finalizers(&claim.metadata, &[], &[FINALIZER_PVC_AS_SOURCE]).map(|metadata| ClaimPatch { metadata })
}

/// Taking `pvc-as-source-protection` off the claim failed. During a sync the sync goes on; before a snapshot's
/// finalizers come off it stops.
pub fn claim_finalizer_removal_failed(error: &str) -> SnapshotFailure {
    SnapshotFailure::event_only(
        ERROR_PVC_FINALIZER,
        "Error check and remove PVC Finalizer for VolumeSnapshot",
        error.to_string(),
    )
}

#[cfg(test)]
mod tests;
