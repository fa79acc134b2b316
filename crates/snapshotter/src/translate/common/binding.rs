//! Which VolumeSnapshotContent belongs to a snapshot, and the checks that it really does (external-snapshotter
//! pkg/common-controller/snapshot_controller.go: getDynamicallyProvisionedContentFromStore,
//! getPreprovisionedContentFromStore, checkandBindSnapshotContent, syncReadySnapshot).
//!
//! A pre-provisioned snapshot names its content; a dynamic one owns `snapcontent-<uid>`. Either way the content must
//! be of the right kind (a snapshot handle for pre-provisioned, a volume handle for dynamic) and point back at the
//! snapshot; a pre-provisioned content may still have an empty UID, which [`bind_patch`] fills in.

use kube::ResourceExt;
use snapshot_api::{VolumeSnapshot, VolumeSnapshotContent};

use super::names::{
    bound_content_name, content_points_back, dynamic_content_name, parent_group_snapshot, snapshot_key,
};
use super::patch::ContentPatch;
use super::reasons::{
    SNAPSHOT_BIND_FAILED, SNAPSHOT_CONTENT_MISBOUND, SNAPSHOT_CONTENT_MISMATCH, SNAPSHOT_CONTENT_MISSING,
    SNAPSHOT_HANDLE_SET, SNAPSHOT_MISBOUND,
};
use super::status_error::SnapshotFailure;

/// The name of the content that belongs to the snapshot: the one it names, else `snapcontent-<uid>`.
pub fn expected_content_name(snapshot: &VolumeSnapshot) -> String {
    match snapshot.spec.source.volume_snapshot_content_name.as_deref() {
        Some(name) => name.to_string(),
        None => dynamic_content_name(snapshot),
    }
}

/// The name under which the snapshot's content is read from the store. A snapshot that names its content reads that
/// one, a group's or not (the members of a pre-provisioned group are such snapshots, made by its administrator; upstream:
/// external-snapshotter, pkg/common-controller/snapshot_controller.go, `syncUnreadySnapshot`, which takes a snapshot
/// naming a content as pre-provisioned before anything else). A dynamic group member's content is the one its group
/// made, named in the member's status (it is never created here: the group snapshotter writes that status right after
/// creating both), so there is none to read until then; any other snapshot's is [`expected_content_name`].
pub fn content_to_read(snapshot: &VolumeSnapshot) -> Option<String> {
    match (&snapshot.spec.source.volume_snapshot_content_name, parent_group_snapshot(snapshot)) {
        (None, Some(_)) => bound_content_name(snapshot).map(str::to_string),
        _ => Some(expected_content_name(snapshot)),
    }
}

/// The content read under [`content_to_read`] (`stored`), as the rule of the snapshot's kind accepts it: a
/// pre-provisioned snapshot's ([`preprovisioned_content`]), a group member's as its group bound it, or a dynamic
/// one's ([`dynamic_content`]). `preprovisioned`: the snapshot's source names a content.
pub fn accepted_content<'a>(
    snapshot: &VolumeSnapshot,
    preprovisioned: bool,
    stored: Option<&'a VolumeSnapshotContent>,
) -> Result<Option<&'a VolumeSnapshotContent>, SnapshotFailure> {
    if preprovisioned {
        preprovisioned_content(snapshot, stored)
    } else if parent_group_snapshot(snapshot).is_some() {
        Ok(stored)
    } else {
        dynamic_content(snapshot, stored)
    }
}

fn misbound(content_name: &str) -> SnapshotFailure {
    let message = format!("VolumeSnapshotContent [{content_name}] is bound to a different snapshot");
    SnapshotFailure::status_error(SNAPSHOT_CONTENT_MISBOUND, message.clone(), true, message)
}

/// The content a pre-provisioned snapshot names, found (or not) in the store. `Ok(None)` is "not there"
/// (see [`content_missing`]); a content that is dynamic, or points at another snapshot, is refused.
pub fn preprovisioned_content<'a>(
    snapshot: &VolumeSnapshot,
    content: Option<&'a VolumeSnapshotContent>,
) -> Result<Option<&'a VolumeSnapshotContent>, SnapshotFailure> {
    let Some(content) = content else { return Ok(None) };
    let name = content.name_any();
    if content.spec.source.snapshot_handle.is_none() {
        return Err(SnapshotFailure::status_error(
            SNAPSHOT_CONTENT_MISMATCH,
            "VolumeSnapshotContent is dynamically provisioned while expecting a pre-provisioned one",
            true,
            format!(
                "snapshot {} expects a pre-provisioned VolumeSnapshotContent {name} but gets a dynamically provisioned one",
                snapshot_key(snapshot)
            ),
        ));
    }
    let reference = &content.spec.volume_snapshot_ref;
    let uid = reference.uid.as_deref().unwrap_or_default();
    if reference.name.as_deref().unwrap_or_default() != snapshot.name_any()
        || reference.namespace.as_deref().unwrap_or_default() != snapshot.namespace().unwrap_or_default()
        || (!uid.is_empty() && uid != snapshot.uid().unwrap_or_default())
    {
        return Err(misbound(&name));
    }
    Ok(Some(content))
}

/// The content a pre-provisioned snapshot names does not exist (yet); retried.
pub fn content_missing(snapshot: &VolumeSnapshot) -> SnapshotFailure {
    SnapshotFailure::status_error(
        SNAPSHOT_CONTENT_MISSING,
        "VolumeSnapshotContent is missing",
        true,
        format!(
            "snapshot {} requests an non-existing content {}",
            snapshot_key(snapshot),
            expected_content_name(snapshot)
        ),
    )
}

/// The write that binds a pre-provisioned content: `volumeSnapshotRef.uid` and, when the snapshot names a
/// class, `volumeSnapshotClassName`. `None` when both are set already.
pub fn bind_patch(
    snapshot: &VolumeSnapshot,
    content: &VolumeSnapshotContent,
) -> Result<Option<ContentPatch>, SnapshotFailure> {
    let reference = &content.spec.volume_snapshot_ref;
    let uid = reference.uid.as_deref().unwrap_or_default();
    let snapshot_uid = snapshot.uid().unwrap_or_default();
    if reference.name.as_deref().unwrap_or_default() != snapshot.name_any() || (!uid.is_empty() && uid != snapshot_uid)
    {
        let error = format!(
            "Could not bind snapshot {} and content {}, the VolumeSnapshotRef does not match",
            snapshot.name_any(),
            content.name_any()
        );
        return Err(SnapshotFailure::status_error(
            SNAPSHOT_BIND_FAILED,
            format!("Snapshot failed to bind VolumeSnapshotContent, {error}"),
            true,
            format!(
                "snapshot {} is bound, but VolumeSnapshotContent {} is not bound to the VolumeSnapshot correctly, {error}",
                snapshot_key(snapshot),
                content.name_any()
            ),
        ));
    }
    if !uid.is_empty() && content.spec.volume_snapshot_class_name.is_some() {
        return Ok(None);
    }
    Ok(Some(ContentPatch {
        snapshot_uid: Some(snapshot_uid),
        class_name: snapshot.spec.volume_snapshot_class_name.clone(),
        ..Default::default()
    }))
}

/// A content found under the dynamic name must be dynamic and point back at this snapshot, UID included
/// (a dynamic content is created with it).
pub fn dynamic_content<'a>(
    snapshot: &VolumeSnapshot,
    content: Option<&'a VolumeSnapshotContent>,
) -> Result<Option<&'a VolumeSnapshotContent>, SnapshotFailure> {
    let Some(content) = content else { return Ok(None) };
    let name = content.name_any();
    if content.spec.source.volume_handle.is_none() {
        return Err(SnapshotFailure::status_error(
            SNAPSHOT_CONTENT_MISMATCH,
            format!("VolumeSnapshotContent {name} is pre-provisioned while expecting a dynamically provisioned one"),
            true,
            format!(
                "snapshot {} expects a dynamically provisioned VolumeSnapshotContent {name} but gets a pre-provisioned one",
                snapshot_key(snapshot)
            ),
        ));
    }
    if !content_points_back(snapshot, content) {
        return Err(misbound(&name));
    }
    if content.spec.source.snapshot_handle.is_some() {
        let key = snapshot_key(snapshot);
        return Err(SnapshotFailure::status_error(
            SNAPSHOT_HANDLE_SET,
            format!("Snapshot handle should not be set in content {key} for dynamic provisioning"),
            true,
            format!("snapshotHandle should not be set in the content for dynamic provisioning for snapshot {key}"),
        ));
    }
    Ok(Some(content))
}

/// A ready, bound snapshot whose content is gone or no longer points back (upstream's syncReadySnapshot). Recorded
/// without a retry.
pub fn ready_snapshot_check(
    snapshot: &VolumeSnapshot,
    content: Option<&VolumeSnapshotContent>,
) -> Result<(), SnapshotFailure> {
    let failure = |reason, message: &str| SnapshotFailure {
        error: None,
        ..SnapshotFailure::status_error(reason, message, true, String::new())
    };
    match content {
        None => Err(failure(SNAPSHOT_CONTENT_MISSING, "VolumeSnapshotContent is missing")),
        Some(content) if !content_points_back(snapshot, content) => {
            Err(failure(SNAPSHOT_MISBOUND, "VolumeSnapshotContent is not bound to the VolumeSnapshot correctly"))
        }
        Some(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests;
