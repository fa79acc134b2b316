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
