//! Every annotation, finalizer, label, StorageClass parameter key and event reason the provisioner reads or writes,
//! spelled exactly as upstream external-provisioner and its library spell them.

pub use sidecar_runtime::names::{
    ANN_CONTROLLER_MODIFY_SECRET_NAME, ANN_CONTROLLER_MODIFY_SECRET_NAMESPACE, PARAM_PV_NAME, PARAM_PVC_NAME,
    PARAM_PVC_NAMESPACE, RESERVED_PARAMETER_PREFIX, RESOURCE_STORAGE, VOLUME_MODE_BLOCK,
};

// ---- Claim annotations -------------------------------------------------------------------------------------------

/// The provisioner the cluster's PV controller asks to provision a claim.
pub const ANN_STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
/// The older spelling of [`ANN_STORAGE_PROVISIONER`], read when the new one is absent.
pub const ANN_BETA_STORAGE_PROVISIONER: &str = "volume.beta.kubernetes.io/storage-provisioner";
/// The CSI driver an in-tree claim or volume was migrated to.
pub const ANN_MIGRATED_TO: &str = "pv.kubernetes.io/migrated-to";
/// The node the scheduler picked for a WaitForFirstConsumer claim.
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// The Kubernetes 1.11 spelling of [`ANN_SELECTED_NODE`]; read for the node name only.
pub const ANN_ALPHA_SELECTED_NODE: &str = "volume.alpha.kubernetes.io/selected-node";
/// The legacy way to name a claim's StorageClass; it wins over `spec.storageClassName`.
pub const ANN_BETA_STORAGE_CLASS: &str = "volume.beta.kubernetes.io/storage-class";

// ---- PersistentVolume annotations and finalizers ----------------------------------------------------------------

/// Which provisioner created a volume (the StorageClass's `provisioner`).
pub const ANN_PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
/// Name of the provisioner secret, kept on the PV for DeleteVolume.
pub const ANN_PROVISIONER_DELETION_SECRET_NAME: &str = "volume.kubernetes.io/provisioner-deletion-secret-name";
/// Namespace of the provisioner secret, kept on the PV for DeleteVolume.
pub const ANN_PROVISIONER_DELETION_SECRET_NAMESPACE: &str =
    "volume.kubernetes.io/provisioner-deletion-secret-namespace";
/// Keeps a PV with reclaim policy Delete until the backend volume is deleted.
pub const FINALIZER_PV: &str = "external-provisioner.volume.kubernetes.io/finalizer";
/// Ours, beyond upstream: kept on a claim from just before CreateVolume until its PV exists or the volume is known to
/// be deleted, so that a provisioner restarted after a crash finds (and deletes) a volume whose claim went away.
pub const FINALIZER_PROVISIONING_PROTECTION: &str = "provisioner.storage.kubernetes.io/provisioning-protection";
/// Protects a claim that is the source of a clone in progress.
pub const FINALIZER_CLONE_PROTECTION: &str = "provisioner.storage.kubernetes.io/cloning-protection";
/// Protects a VolumeSnapshot that is the source of a restore in progress.
pub const FINALIZER_SNAPSHOT_SOURCE_PROTECTION: &str =
    "provisioner.storage.kubernetes.io/volumesnapshot-as-source-protection";
/// On a VolumeSnapshotContent: a restore may change the volume mode.
pub use snapshot_api::names::ANN_ALLOW_VOLUME_MODE_CHANGE;
/// `spec.csi.volumeAttributes` key naming the provisioner instance that created the volume.
pub const VOLUME_ATTRIBUTE_PROVISIONER_IDENTITY: &str = "storage.kubernetes.io/csiProvisionerIdentity";

// ---- StorageClass parameters ------------------------------------------------------------------------------------

pub const PARAM_FSTYPE: &str = "csi.storage.k8s.io/fstype";
pub const PARAM_SECRET_NAME: &str = "csi.storage.k8s.io/secret-name";
pub const PARAM_SECRET_NAMESPACE: &str = "csi.storage.k8s.io/secret-namespace";
pub const PARAM_PROVISIONER_SECRET_NAME: &str = "csi.storage.k8s.io/provisioner-secret-name";
pub const PARAM_PROVISIONER_SECRET_NAMESPACE: &str = "csi.storage.k8s.io/provisioner-secret-namespace";
pub const PARAM_CONTROLLER_PUBLISH_SECRET_NAME: &str = "csi.storage.k8s.io/controller-publish-secret-name";
pub const PARAM_CONTROLLER_PUBLISH_SECRET_NAMESPACE: &str = "csi.storage.k8s.io/controller-publish-secret-namespace";
pub const PARAM_NODE_STAGE_SECRET_NAME: &str = "csi.storage.k8s.io/node-stage-secret-name";
pub const PARAM_NODE_STAGE_SECRET_NAMESPACE: &str = "csi.storage.k8s.io/node-stage-secret-namespace";
pub const PARAM_NODE_PUBLISH_SECRET_NAME: &str = "csi.storage.k8s.io/node-publish-secret-name";
pub const PARAM_NODE_PUBLISH_SECRET_NAMESPACE: &str = "csi.storage.k8s.io/node-publish-secret-namespace";
pub const PARAM_CONTROLLER_EXPAND_SECRET_NAME: &str = "csi.storage.k8s.io/controller-expand-secret-name";
pub const PARAM_CONTROLLER_EXPAND_SECRET_NAMESPACE: &str = "csi.storage.k8s.io/controller-expand-secret-namespace";
pub const PARAM_NODE_EXPAND_SECRET_NAME: &str = "csi.storage.k8s.io/node-expand-secret-name";
pub const PARAM_NODE_EXPAND_SECRET_NAMESPACE: &str = "csi.storage.k8s.io/node-expand-secret-namespace";
pub const PARAM_CONTROLLER_MODIFY_SECRET_NAME: &str = "csi.storage.k8s.io/controller-modify-secret-name";
pub const PARAM_CONTROLLER_MODIFY_SECRET_NAMESPACE: &str = "csi.storage.k8s.io/controller-modify-secret-namespace";

/// Every reserved key the provisioner understands and removes before CreateVolume; any other reserved key is refused.
pub const RESERVED_PARAMETERS: [&str; 17] = [
    PARAM_FSTYPE,
    PARAM_SECRET_NAME,
    PARAM_SECRET_NAMESPACE,
    PARAM_PROVISIONER_SECRET_NAME,
    PARAM_PROVISIONER_SECRET_NAMESPACE,
    PARAM_CONTROLLER_PUBLISH_SECRET_NAME,
    PARAM_CONTROLLER_PUBLISH_SECRET_NAMESPACE,
    PARAM_NODE_STAGE_SECRET_NAME,
    PARAM_NODE_STAGE_SECRET_NAMESPACE,
    PARAM_NODE_PUBLISH_SECRET_NAME,
    PARAM_NODE_PUBLISH_SECRET_NAMESPACE,
    PARAM_CONTROLLER_EXPAND_SECRET_NAME,
    PARAM_CONTROLLER_EXPAND_SECRET_NAMESPACE,
    PARAM_NODE_EXPAND_SECRET_NAME,
    PARAM_NODE_EXPAND_SECRET_NAMESPACE,
    PARAM_CONTROLLER_MODIFY_SECRET_NAME,
    PARAM_CONTROLLER_MODIFY_SECRET_NAMESPACE,
];

/// Deprecated fstype key (matched case-insensitively); honoured, passed through to the driver.
pub const DEPRECATED_PARAM_FSTYPE: &str = "fstype";
pub const DEPRECATED_PARAM_PROVISIONER_SECRET_NAME: &str = "csiProvisionerSecretName";
pub const DEPRECATED_PARAM_PROVISIONER_SECRET_NAMESPACE: &str = "csiProvisionerSecretNamespace";
pub const DEPRECATED_PARAM_CONTROLLER_PUBLISH_SECRET_NAME: &str = "csiControllerPublishSecretName";
pub const DEPRECATED_PARAM_CONTROLLER_PUBLISH_SECRET_NAMESPACE: &str = "csiControllerPublishSecretNamespace";
pub const DEPRECATED_PARAM_NODE_STAGE_SECRET_NAME: &str = "csiNodeStageSecretName";
pub const DEPRECATED_PARAM_NODE_STAGE_SECRET_NAMESPACE: &str = "csiNodeStageSecretNamespace";
pub const DEPRECATED_PARAM_NODE_PUBLISH_SECRET_NAME: &str = "csiNodePublishSecretName";
pub const DEPRECATED_PARAM_NODE_PUBLISH_SECRET_NAMESPACE: &str = "csiNodePublishSecretNamespace";

// ---- Data sources -----------------------------------------------------------------------------------------------

pub const KIND_VOLUME_SNAPSHOT: &str = "VolumeSnapshot";
pub use snapshot_api::names::GROUP as SNAPSHOT_API_GROUP;
pub const KIND_PERSISTENT_VOLUME_CLAIM: &str = "PersistentVolumeClaim";

// ---- Kubernetes enum values -------------------------------------------------------------------------------------

pub const BINDING_WAIT_FOR_FIRST_CONSUMER: &str = "WaitForFirstConsumer";
pub use csi_client::access_modes::{
    ACCESS_READ_ONLY_MANY, ACCESS_READ_WRITE_MANY, ACCESS_READ_WRITE_ONCE, ACCESS_READ_WRITE_ONCE_POD,
};

// ---- Events -----------------------------------------------------------------------------------------------------

/// Normal, before each attempt; also "Assuming an external populator will provision the volume".
pub const EVENT_PROVISIONING: &str = "Provisioning";
/// Warning, with the error text.
pub const EVENT_PROVISIONING_FAILED: &str = "ProvisioningFailed";
/// Normal, `Successfully provisioned volume <pv>`.
pub const EVENT_PROVISIONING_SUCCEEDED: &str = "ProvisioningSucceeded";
/// Warning on the PV when DeleteVolume fails.
pub const EVENT_VOLUME_FAILED_DELETE: &str = "VolumeFailedDelete";
/// Normal on the PV while its deletion waits for a detach (sig-storage-lib-external-provisioner v13.1,
/// `VolumeInUseError`).
pub const EVENT_VOLUME_DELETE: &str = "VolumeDelete";
/// Reason of the Warning on a claim whose CreateVolume answered, in the usual order of things, on a claim that was
/// deleted meanwhile and whose volume could not be deleted yet (ours, beyond upstream).
pub const EVENT_PROVISIONING_CLEANUP_FAILED: &str = "ProvisioningCleanupFailed";
/// Reason of the Warning on the in-flight journal's Lease about an entry that cannot be the provisioner's own
/// (forged, damaged, or of a claim the journal never takes), dropped with nothing deleted (ours, beyond upstream).
pub const EVENT_IN_FLIGHT_ENTRY_REJECTED: &str = "InFlightEntryRejected";
/// Event source component of the provisioner's own events (library events use `<driver>_<host>_<uuid>`).
pub const EVENT_COMPONENT: &str = "external-provisioner";
