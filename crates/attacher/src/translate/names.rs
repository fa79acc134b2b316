//! Every upstream string the attacher writes or reads, spelled as external-attacher v4.13 spells it.

use sidecar_runtime::leader_election::sanitize_name;

/// The finalizer on VolumeAttachments and PVs: `external-attacher/<driver>`, the driver name sanitised as the Lease
/// name is (external-attacher pkg/controller/util.go, GetFinalizerName).
pub fn finalizer(driver: &str) -> String {
    format!("external-attacher/{}", sanitize_name(driver))
}

/// The node ID a VolumeAttachment was attached with, for detaching once the CSINode no longer lists the driver.
pub const NODE_ID_ANNOTATION: &str = "csi.alpha.kubernetes.io/node-id";

/// The CSI driver an in-tree PV is handed to (CSI migration).
pub const MIGRATED_TO_ANNOTATION: &str = "pv.kubernetes.io/migrated-to";

/// The work queues, by the `name` label of the workqueue metrics. Upstream has one VolumeAttachment queue,
/// `csi-attacher-va`; ours attaches from it and detaches from a queue of its own.
pub const ATTACH_QUEUE: &str = "csi-attacher-va";
pub const DETACH_QUEUE: &str = "csi-attacher-va-detach";
pub const VOLUME_QUEUE: &str = "csi-attacher-pv";

/// Sets `errorCode` of `status.attachError` to the gRPC code of a failed ControllerPublishVolume (GA, on).
pub const GATE_MUTABLE_CSI_NODE_ALLOCATABLE_COUNT: &str = "MutableCSINodeAllocatableCount";
pub const GATE_RELEASE_LEADER_ELECTION_ON_EXIT: &str = sidecar_runtime::RELEASE_LEADER_ELECTION_ON_EXIT;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finalizers_name_the_sanitised_driver() {
        // (driver, finalizer)
        let table = [
            ("hostpath.csi.k8s.io", "external-attacher/hostpath-csi-k8s-io"),
            ("ebs.csi.aws.com", "external-attacher/ebs-csi-aws-com"),
            ("odd_driver.", "external-attacher/odd-driver-X"),
        ];
        for (driver, want) in table {
            assert_eq!(finalizer(driver), want, "{driver}");
        }
    }
}
