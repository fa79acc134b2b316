//! The members of a dynamic group snapshot, made once csi-snapshotter has written the driver's answer into the
//! group content's status: per `volumeSnapshotInfoList` entry one VolumeSnapshotContent and one VolumeSnapshot
//! ([`crate::translate::members::member`]), created under their derived names (a run that died half-way finds
//! them again), bound to each other, and given the entry's status. Later runs only refresh what changed.
//!
//! The snapshot-controller's single-snapshot loop then treats each member like a pre-provisioned snapshot: it
//! never cuts one (the content carries the group's handle), it carries the content's status over.

use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use snapshot_api::{
    VolumeGroupSnapshot, VolumeGroupSnapshotContent, VolumeSnapshot, VolumeSnapshotContent, VolumeSnapshotInfo,
};

use super::Shared;
use super::writes::{Retry, create_or_get};
use crate::translate::member_writes::member_writes;
use crate::translate::members::{Member, member, volume_for_handle};

/// Every member of the group, made or refreshed. Any error stops the pass: the group is synced again.
pub(super) async fn ensure_members(
    shared: &Shared,
    group: &VolumeGroupSnapshot,
    content: &VolumeGroupSnapshotContent,
) -> Result<(), Retry> {
    let Some(status) = content.status.as_ref() else { return Ok(()) };
    let Some(group_handle) = status.volume_group_snapshot_handle.as_deref() else { return Ok(()) };
    // The volumes of the members' handles, in one pass that rebuilds each cached volume once.
    let infos = status.volume_snapshot_info_list.iter().flatten();
    let handles: Vec<&str> = infos.clone().map(|info| info.volume_handle.as_deref().unwrap_or_default()).collect();
    let driver = &content.spec.driver;
    let volumes = shared.stores.volumes.filter(|v| handles.iter().any(|h| volume_for_handle([v], driver, h).is_some()));
    for info in infos {
        let handle = info.volume_handle.as_deref().unwrap_or_default();
        let volume = volume_for_handle(volumes.iter().map(|v| &**v), &content.spec.driver, handle);
        let wanted = member(group, content, info, volume).map_err(|e| Retry(e.to_string()))?;
        ensure_member(shared, info, group_handle, wanted).await?;
    }
    Ok(())
}

async fn ensure_member(
    shared: &Shared,
    info: &VolumeSnapshotInfo,
    group_handle: &str,
    wanted: Member,
) -> Result<(), Retry> {
    let namespace = wanted.snapshot.namespace().unwrap_or_default();
    let contents: Api<VolumeSnapshotContent> = Api::all(shared.client.clone());
    let snapshots: Api<VolumeSnapshot> = Api::namespaced(shared.client.clone(), &namespace);
    let content = match shared.stores.content(&wanted.content.name_any()) {
        Some(content) => (*content).clone(),
        None => create_or_get(&contents, &wanted.content).await?,
    };
    let snapshot = match shared.stores.snapshot(&namespace, &wanted.snapshot.name_any()) {
        Some(snapshot) => (*snapshot).clone(),
        None => create_or_get(&snapshots, &wanted.snapshot).await?,
    };
    let writes = member_writes(&wanted, &content, &snapshot, info, group_handle);
    let params = PatchParams::default();
    if let Some(patch) = writes.content_ref {
        contents.patch(&content.name_any(), &params, &Patch::Merge(patch.merge_patch())).await?;
    }
    if let Some(patch) = writes.content_status {
        contents.patch_status(&content.name_any(), &params, &Patch::Merge(patch.merge_patch())).await?;
    }
    if let Some(patch) = writes.snapshot_status {
        snapshots.patch_status(&snapshot.name_any(), &params, &Patch::Merge(patch.merge_patch())).await?;
    }
    Ok(())
}
