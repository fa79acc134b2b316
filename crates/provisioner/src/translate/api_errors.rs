//! What the user is told when a read or write of the API fails during a provisioning attempt, worded as upstream
//! words it. `error` is always the API's own text (the Status message), never an object's data.

use super::data_source::DataSource;
use super::refusal::{ProvisioningState, Refusal};

/// A data source that is not usable (yet): the cause, prefixed as upstream prefixes it.
pub fn data_source_refusal(mut refusal: Refusal, source: &DataSource) -> Refusal {
    refusal.message = format!(
        "error getting handle for DataSource Type {} by Name {}: {}",
        source.kind, source.name, refusal.message
    );
    refusal
}

/// The claim went away between the cache and the finalizer write: nothing was asked of the driver.
pub fn claim_gone(namespace: &str, name: &str) -> Refusal {
    Refusal::no_change(format!("claim {namespace}/{name} is gone"))
}

/// The claim being cloned went away before it could be protected.
pub fn clone_source_gone(source: &DataSource) -> Refusal {
    Refusal::no_change(format!("source claim {}/{} is gone", source.namespace, source.name))
}

pub fn grants_not_listed(namespace: &str, error: &str) -> Refusal {
    Refusal::no_change(format!("error listing ReferenceGrants in namespace {namespace}: {error}"))
}

pub fn snapshot_not_read(name: &str, error: &str) -> Refusal {
    Refusal::no_change(format!("error getting snapshot {name} from api server: {error}"))
}

pub fn snapshot_not_protected(name: &str, error: &str) -> Refusal {
    Refusal::no_change(format!("failed to add finalizer to snapshot {name}: {error}"))
}

/// The PV could not be created: the volume exists, so the attempt is retried whole (CreateVolume is idempotent).
pub fn volume_not_saved(volume: &str, error: &str) -> Refusal {
    Refusal::failed(ProvisioningState::InBackground, format!("error saving volume {volume}: {error}"))
}

/// The PV create met a PV of the same name that does not hold the new volume, and the volume was deleted (`error`:
/// why it was not). The attempt is over only when the volume is gone.
pub fn volume_deleted_for_pv_in_the_way(volume: &str, volume_id: &str, error: Option<&str>) -> Refusal {
    let prefix = format!("error saving volume {volume}: it already exists and does not hold volume {volume_id}");
    match error {
        None => Refusal::finished(format!("{prefix}; volume {volume_id} deleted")),
        Some(error) => Refusal::failed(
            ProvisioningState::InBackground,
            format!("{prefix}; deleting volume {volume_id} failed: {error}"),
        ),
    }
}

/// The PV create met a PV of the same name that names the new volume but is not the claim's live PV: the volume
/// is left to it.
pub fn volume_kept_by_pv_in_the_way(volume: &str, volume_id: &str) -> Refusal {
    Refusal::finished(format!(
        "error saving volume {volume}: it already exists, is not this claim's, and names volume {volume_id}: the volume \
         is left to it"
    ))
}

/// The cleanup of a deleted claim's volume cannot rebuild the request without its StorageClass.
pub fn cleanup_class_missing(namespace: &str, name: &str, class: &str) -> String {
    format!("cannot delete the volume of deleted claim {namespace}/{name}: storageClass \"{class}\" not found")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_read_as_upstream_and_keep_the_right_state() {
        let source = DataSource {
            kind: "VolumeSnapshot".into(),
            name: "snap".into(),
            api_group: "snapshot.storage.k8s.io".into(),
            namespace: "apps".into(),
        };
        let no_change = ProvisioningState::NoChange;
        // (case, refusal, message, state)
        let table = [
            (
                "data source",
                data_source_refusal(Refusal::no_change("not ready"), &source),
                "error getting handle for DataSource Type VolumeSnapshot by Name snap: not ready",
                no_change,
            ),
            ("claim gone", claim_gone("apps", "data"), "claim apps/data is gone", no_change),
            ("clone source gone", clone_source_gone(&source), "source claim apps/snap is gone", no_change),
            (
                "grants",
                grants_not_listed("other", "forbidden"),
                "error listing ReferenceGrants in namespace other: forbidden",
                no_change,
            ),
            (
                "snapshot read",
                snapshot_not_read("snap", "timeout"),
                "error getting snapshot snap from api server: timeout",
                no_change,
            ),
            (
                "snapshot protection",
                snapshot_not_protected("snap", "conflict"),
                "failed to add finalizer to snapshot snap: conflict",
                no_change,
            ),
            (
                "PV not saved: the volume exists",
                volume_not_saved("pvc-1", "quota"),
                "error saving volume pvc-1: quota",
                ProvisioningState::InBackground,
            ),
            (
                "PV in the way, volume deleted",
                volume_deleted_for_pv_in_the_way("pvc-1", "v2", None),
                "error saving volume pvc-1: it already exists and does not hold volume v2; volume v2 deleted",
                ProvisioningState::Finished,
            ),
            (
                "PV in the way, volume not deleted yet: it may still exist",
                volume_deleted_for_pv_in_the_way("pvc-1", "v2", Some("busy")),
                "error saving volume pvc-1: it already exists and does not hold volume v2; deleting volume v2 failed: busy",
                ProvisioningState::InBackground,
            ),
            (
                "PV in the way keeps the volume",
                volume_kept_by_pv_in_the_way("pvc-1", "v2"),
                "error saving volume pvc-1: it already exists, is not this claim's, and names volume v2: the volume is left \
                 to it",
                ProvisioningState::Finished,
            ),
        ];
        for (case, refusal, message, state) in table {
            assert_eq!(refusal.message, message, "{case}");
            assert_eq!(refusal.state, state, "{case}");
        }
        assert_eq!(
            cleanup_class_missing("apps", "data", "fast"),
            "cannot delete the volume of deleted claim apps/data: storageClass \"fast\" not found"
        );
    }
}
