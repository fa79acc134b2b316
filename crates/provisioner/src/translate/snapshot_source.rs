//! Restoring from a VolumeSnapshot: the checks on the snapshot and its content (external-provisioner
//! `getSnapshotSource`), and when the snapshot's source-protection finalizer may go
//! (pkg/controller/snapshot_finalizer_controller.go).

use csi_client::proto::VolumeContentSource;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use snapshot_api::{VolumeSnapshot, VolumeSnapshotContent};

use super::data_source::{DataSource, refers_to, snapshot_content_source};
use super::names::{
    ANN_ALLOW_VOLUME_MODE_CHANGE, FINALIZER_SNAPSHOT_SOURCE_PROTECTION, KIND_VOLUME_SNAPSHOT, RESOURCE_STORAGE,
    SNAPSHOT_API_GROUP,
};
use super::refusal::Refusal;
use sidecar_runtime::quantity::quantity_bytes;

const PHASE_PENDING: &str = "Pending";

/// A restore that may go ahead.
#[derive(Clone, Debug, PartialEq)]
pub struct SnapshotRestore {
    pub content_source: VolumeContentSource,
    /// Set when the claim asks for more than the snapshot holds: the driver has to expand (logged, not refused).
    pub larger_than_snapshot: Option<String>,
}

/// The content source for restoring `source` into `claim`, after upstream's checks. `snapshot` and `content` are
/// what the API holds (None: not found); `provisioner_name` is the class's provisioner. A failed check leaves the
/// claim waiting: the snapshot may still get ready.
pub fn snapshot_restore(
    claim: &PersistentVolumeClaim,
    source: &DataSource,
    snapshot: Option<&VolumeSnapshot>,
    content: Option<&VolumeSnapshotContent>,
    provisioner_name: &str,
    prevent_volume_mode_conversion: bool,
) -> Result<SnapshotRestore, Refusal> {
    let refuse = |message: String| Err(Refusal::no_change(message));
    let name = &source.name;
    let not_bound = || refuse(format!("snapshot {name} not bound"));
    let Some(snapshot) = snapshot else {
        return refuse(format!(
            "error getting snapshot {name} from api server: volumesnapshots.snapshot.storage.k8s.io \"{name}\" not found"
        ));
    };
    // A snapshot being deleted may still serve a restore that began before (it then carries our finalizer):
    // refusing it would strand the volume CreateVolume may already have made.
    if snapshot.metadata.deletion_timestamp.is_some() && !has_source_protection(snapshot) {
        return refuse(format!("snapshot {name} is being deleted"));
    }
    let status = snapshot.status.as_ref();
    let Some(content_name) = status.and_then(|s| s.bound_volume_snapshot_content_name.as_deref()) else {
        return not_bound();
    };
    let Some(content) = content.filter(|c| c.metadata.name.as_deref() == Some(content_name)) else {
        return not_bound();
    };
    let reference = &content.spec.volume_snapshot_ref;
    if reference.uid != snapshot.metadata.uid
        || reference.namespace != snapshot.metadata.namespace
        || reference.name != snapshot.metadata.name
    {
        return not_bound();
    }
    if content.spec.driver != provisioner_name {
        return not_bound();
    }
    if status.and_then(|s| s.ready_to_use) != Some(true) {
        return refuse(format!("snapshot {name} is not Ready"));
    }
    let Some(handle) = content.status.as_ref().and_then(|s| s.snapshot_handle.as_deref()) else {
        return refuse(format!("snapshot handle {name} is not available"));
    };
    let mut larger_than_snapshot = None;
    if let Some(restore_size) = status.and_then(|s| s.restore_size.as_ref()) {
        let claim_name = claim.metadata.name.as_deref().unwrap_or_default();
        let snapshot_name = snapshot.metadata.name.as_deref().unwrap_or_default();
        let request = claim.spec.as_ref().and_then(|s| s.resources.as_ref()?.requests.as_ref()?.get(RESOURCE_STORAGE));
        let Some(requested) = request.and_then(|q| quantity_bytes(q).ok()) else {
            return refuse(format!(
                "error getting capacity for PVC {claim_name} when creating snapshot {snapshot_name}"
            ));
        };
        let size = quantity_bytes(restore_size).unwrap_or(0);
        if requested < size {
            return refuse(format!(
                "requested volume size {requested} is less than the size {size} for the source snapshot {snapshot_name}"
            ));
        }
        if requested > size {
            larger_than_snapshot = Some(format!(
                "requested volume size {requested} is greater than the size {size} for the source snapshot {snapshot_name}. Volume plugin needs to handle volume expansion."
            ));
        }
    }
    if prevent_volume_mode_conversion {
        check_volume_mode(claim, content)?;
    }
    Ok(SnapshotRestore { content_source: snapshot_content_source(handle), larger_than_snapshot })
}

/// `--prevent-volume-mode-conversion`: a restore into another volume mode needs the content's
/// `snapshot.storage.kubernetes.io/allow-volume-mode-change` annotation. Only a claim that states its mode is held to
/// it, as upstream does.
fn check_volume_mode(claim: &PersistentVolumeClaim, content: &VolumeSnapshotContent) -> Result<(), Refusal> {
    let claim_mode = claim.spec.as_ref().and_then(|s| s.volume_mode.as_deref());
    let (Some(source_mode), Some(claim_mode)) = (content.spec.source_volume_mode.as_deref(), claim_mode) else {
        return Ok(());
    };
    if source_mode == claim_mode {
        return Ok(());
    }
    let namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
    let claim_name = claim.metadata.name.as_deref().unwrap_or_default();
    let content_name = content.metadata.name.as_deref().unwrap_or_default();
    let denied = |why: String| {
        Err(Refusal::no_change(format!(
            "requested volume {namespace}/{claim_name} modifies the mode of the source volume but does not have permission to do so. {why}"
        )))
    };
    match content.metadata.annotations.as_ref().and_then(|a| a.get(ANN_ALLOW_VOLUME_MODE_CHANGE)) {
        None => denied(format!(
            "{ANN_ALLOW_VOLUME_MODE_CHANGE} annotation is not present on snapshotcontent {content_name}"
        )),
        Some(value) => match go_parse_bool(value) {
            Some(true) => Ok(()),
            Some(false) => {
                denied(format!("{ANN_ALLOW_VOLUME_MODE_CHANGE} is set to false on snapshotcontent {content_name}"))
            }
            None => denied(format!(
                "failed to convert {ANN_ALLOW_VOLUME_MODE_CHANGE} annotation value to boolean with error: strconv.ParseBool: parsing \"{value}\": invalid syntax"
            )),
        },
    }
}

/// Go's `strconv.ParseBool`.
fn go_parse_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Whether the snapshot carries the source-protection finalizer.
pub fn has_source_protection(snapshot: &VolumeSnapshot) -> bool {
    snapshot.metadata.finalizers.iter().flatten().any(|f| f == FINALIZER_SNAPSHOT_SOURCE_PROTECTION)
}

/// Whether `claim` restores from the VolumeSnapshot `namespace/name`.
pub fn restores_from(claim: &PersistentVolumeClaim, namespace: &str, name: &str) -> bool {
    refers_to(claim, KIND_VOLUME_SNAPSHOT, SNAPSHOT_API_GROUP, namespace, name)
}

/// Whether a snapshot's source protection may go (also the orphan sweep's test): no claim that is still Pending (or has
/// no phase yet) restores from it.
pub fn source_protection_releasable<'a>(
    snapshot: &VolumeSnapshot,
    claims: impl IntoIterator<Item = &'a PersistentVolumeClaim>,
) -> bool {
    if !has_source_protection(snapshot) {
        return false;
    }
    let namespace = snapshot.metadata.namespace.as_deref().unwrap_or_default();
    let name = snapshot.metadata.name.as_deref().unwrap_or_default();
    !claims.into_iter().any(|claim| {
        let pending =
            claim.status.as_ref().and_then(|s| s.phase.as_deref()).is_none_or(|p| p.is_empty() || p == PHASE_PENDING);
        pending && restores_from(claim, namespace, name)
    })
}

#[cfg(test)]
mod tests;
