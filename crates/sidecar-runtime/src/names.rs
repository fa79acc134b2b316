//! Kubernetes and CSI names more than one sidecar reads or writes, spelled exactly as Kubernetes and upstream spell
//! them. A sidecar's own names stay in its `translate/names.rs`, which re-exports these.

/// On a PV: the Secret for ControllerModifyVolume, written by the provisioner and read by the resizer.
pub const ANN_CONTROLLER_MODIFY_SECRET_NAME: &str = "volume.kubernetes.io/controller-modify-secret-name";
pub const ANN_CONTROLLER_MODIFY_SECRET_NAMESPACE: &str = "volume.kubernetes.io/controller-modify-secret-namespace";
/// Class parameters under this prefix are for the sidecars, never for the driver.
pub const RESERVED_PARAMETER_PREFIX: &str = "csi.storage.k8s.io/";
/// Parameters added with `--extra-create-metadata` / `--extra-modify-metadata`.
pub const PARAM_PVC_NAME: &str = "csi.storage.k8s.io/pvc/name";
pub const PARAM_PVC_NAMESPACE: &str = "csi.storage.k8s.io/pvc/namespace";
pub const PARAM_PV_NAME: &str = "csi.storage.k8s.io/pv/name";
/// `spec.volumeMode` of a raw block volume.
pub const VOLUME_MODE_BLOCK: &str = "Block";
/// The resource name of a volume's size in `resources.requests`, `capacity` and `allocatedResources`.
pub const RESOURCE_STORAGE: &str = "storage";
