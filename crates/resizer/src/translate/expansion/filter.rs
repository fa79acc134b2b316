//! Which claim updates the expansion controller looks at (external-resizer pkg/controller/controller.go, updatePVC).
//! Adds always queue the claim; deletes forget it.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::translate::claim::{annotation, requested_size, resize_status, status_capacity};
use crate::translate::names::ANN_STORAGE_RESIZER;
use sidecar_runtime::quantity::quantity_bytes;

/// Whether an update of a claim queues it for expansion.
/// A smaller request counts too: lowering it is how a user recovers from a failed expansion.
pub fn claim_update_needs_sync(old: &PersistentVolumeClaim, new: &PersistentVolumeClaim) -> bool {
    bytes(requested_size(new)) != bytes(requested_size(old))
        || annotation(old, ANN_STORAGE_RESIZER) != annotation(new, ANN_STORAGE_RESIZER)
        || old.metadata.resource_version == new.metadata.resource_version
        || bytes(status_capacity(new)) > bytes(status_capacity(old))
        || resize_status(old) != resize_status(new)
}

/// A missing or unreadable size reads as zero, as Go's map lookup of a `Quantity` does.
fn bytes(quantity: Option<&Quantity>) -> i64 {
    quantity.and_then(|q| quantity_bytes(q).ok()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::{
        PersistentVolumeClaimSpec, PersistentVolumeClaimStatus, VolumeResourceRequirements,
    };

    use super::*;

    fn claim(
        version: &str,
        request: &str,
        capacity: &str,
        status: &str,
        resizer: Option<&str>,
    ) -> PersistentVolumeClaim {
        let mut claim = PersistentVolumeClaim::default();
        claim.metadata.resource_version = Some(version.into());
        claim.metadata.labels = None;
        claim.metadata.annotations =
            resizer.map(|r| BTreeMap::from([("volume.kubernetes.io/storage-resizer".to_string(), r.to_string())]));
        claim.spec = Some(PersistentVolumeClaimSpec {
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([("storage".into(), Quantity(request.into()))])),
                ..Default::default()
            }),
            ..Default::default()
        });
        claim.status = Some(PersistentVolumeClaimStatus {
            capacity: Some(BTreeMap::from([("storage".into(), Quantity(capacity.into()))])),
            allocated_resource_statuses: (!status.is_empty())
                .then(|| BTreeMap::from([("storage".into(), status.to_string())])),
            ..Default::default()
        });
        claim
    }

    #[test]
    fn updates_that_queue_a_claim() {
        let base = claim("1", "1Gi", "1Gi", "", None);
        // (rule, new claim, queued)
        let table = [
            ("request grew", claim("2", "2Gi", "1Gi", "", None), true),
            ("request shrank (recovery from a failed expansion)", claim("2", "512Mi", "1Gi", "", None), true),
            ("resizer annotation changed", claim("2", "1Gi", "1Gi", "", Some("ebs.csi.aws.com")), true),
            ("resync (same resourceVersion)", claim("1", "1Gi", "1Gi", "", None), true),
            ("capacity grew", claim("2", "1Gi", "2Gi", "", None), true),
            ("capacity shrank: ignored", claim("2", "1Gi", "512Mi", "", None), false),
            ("resize status changed", claim("2", "1Gi", "1Gi", "NodeResizePending", None), true),
            ("any other change is ignored", claim("2", "1Gi", "1Gi", "", None), false),
        ];
        for (rule, new, want) in table {
            assert_eq!(claim_update_needs_sync(&base, &new), want, "{rule}");
        }
    }
}
