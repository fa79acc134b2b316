//! Which group contents csi-snapshotter's group loop handles: those of its own CSI driver. Every other driver's
//! contents are left to that driver's csi-snapshotter.
//!
//! Upstream (external-snapshotter, pkg/sidecar-controller/snapshot_controller_base.go, `isDriverMatch`) also skips a
//! content without a source and one whose class names another driver; here only the content's own driver decides,
//! and a content without a source asks the driver nothing ([`super::status::driver_call`]).

use snapshot_api::VolumeGroupSnapshotContent;

/// Whether `content` belongs to the CSI driver named `driver`.
pub fn handled_by(content: &VolumeGroupSnapshotContent, driver: &str) -> bool {
    content.spec.driver == driver
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ObjectReference;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use snapshot_api::{DeletionPolicy, VolumeGroupSnapshotContentSource, VolumeGroupSnapshotContentSpec};

    use super::*;

    fn content(driver: &str) -> VolumeGroupSnapshotContent {
        VolumeGroupSnapshotContent {
            metadata: ObjectMeta { name: Some("groupsnapcontent-u".into()), ..Default::default() },
            spec: VolumeGroupSnapshotContentSpec {
                volume_group_snapshot_ref: ObjectReference::default(),
                deletion_policy: DeletionPolicy::Delete,
                driver: driver.into(),
                volume_group_snapshot_class_name: None,
                source: VolumeGroupSnapshotContentSource::default(),
            },
            status: None,
        }
    }

    #[test]
    fn only_the_drivers_own_contents_are_handled() {
        // (rule, content's driver, handled by hostpath.csi.k8s.io)
        let table = [
            ("the same driver", "hostpath.csi.k8s.io", true),
            ("another driver", "other.csi.k8s.io", false),
            ("names compare exactly", "Hostpath.csi.k8s.io", false),
            ("no driver", "", false),
        ];
        for (rule, driver, want) in table {
            assert_eq!(handled_by(&content(driver), "hostpath.csi.k8s.io"), want, "{rule}");
        }
    }
}
