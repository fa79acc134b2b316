//! Every annotation, condition type, status value, event reason, feature gate and parameter key the resizer reads or
//! writes, spelled exactly as upstream external-resizer and Kubernetes spell them.

pub use sidecar_runtime::RELEASE_LEADER_ELECTION_ON_EXIT as GATE_RELEASE_LEADER_ELECTION_ON_EXIT;
pub use sidecar_runtime::names::{
    ANN_CONTROLLER_MODIFY_SECRET_NAME, ANN_CONTROLLER_MODIFY_SECRET_NAMESPACE, PARAM_PV_NAME, PARAM_PVC_NAME,
    PARAM_PVC_NAMESPACE, RESOURCE_STORAGE, VOLUME_MODE_BLOCK,
};

// ---- Annotations --------------------------------------------------------------------------------------------------

/// On a claim: the CSI driver KCM hands an in-tree (migrated) claim to. Read, never written (KCM's expand controller
/// writes it).
pub const ANN_STORAGE_RESIZER: &str = "volume.kubernetes.io/storage-resizer";
/// On a PV: the claim's `status.capacity` before a controller expansion that still needs the node step
/// (AnnotateFsResize); removed once the claim's capacity reaches the PV's.
pub const ANN_PRE_RESIZE_CAPACITY: &str = "volume.alpha.kubernetes.io/pre-resize-capacity";
/// On a claim: `"true"` tells kubelet the driver finished the expansion in the controller, so it skips the node step.
pub const ANN_NODE_EXPANSION_NOT_REQUIRED: &str = "volume.kubernetes.io/node-expansion-not-required";

// ---- Claim condition types ----------------------------------------------------------------------------------------

/// Written by the resizer while the controller step runs.
pub const CONDITION_RESIZING: &str = "Resizing";
/// Written by the resizer when the node step (kubelet) remains.
pub const CONDITION_FILE_SYSTEM_RESIZE_PENDING: &str = "FileSystemResizePending";
/// Written by the resizer after a final ControllerExpandVolume error.
pub const CONDITION_CONTROLLER_RESIZE_ERROR: &str = "ControllerResizeError";
/// Written by kubelet; the resizer drops it when it restarts an expansion.
pub const CONDITION_NODE_RESIZE_ERROR: &str = "NodeResizeError";
/// Written by the resizer while a modification is under way.
pub const CONDITION_MODIFYING_VOLUME: &str = "ModifyingVolume";
/// Written by the resizer after a failed ControllerModifyVolume; reason = the gRPC code name.
pub const CONDITION_MODIFY_VOLUME_ERROR: &str = "ModifyVolumeError";

/// The condition types that belong to expansion; the others are left alone by expansion writes.
pub const RESIZE_CONDITIONS: [&str; 4] = [
    CONDITION_RESIZING,
    CONDITION_FILE_SYSTEM_RESIZE_PENDING,
    CONDITION_CONTROLLER_RESIZE_ERROR,
    CONDITION_NODE_RESIZE_ERROR,
];

pub const CONDITION_TRUE: &str = "True";

// ---- status.allocatedResourceStatuses["storage"] -----------------------------------------------------------------

pub const CONTROLLER_RESIZE_IN_PROGRESS: &str = "ControllerResizeInProgress";
pub const CONTROLLER_RESIZE_INFEASIBLE: &str = "ControllerResizeInfeasible";
pub const NODE_RESIZE_PENDING: &str = "NodeResizePending";
/// Written by kubelet, read by the resizer.
pub const NODE_RESIZE_IN_PROGRESS: &str = "NodeResizeInProgress";
/// Written by kubelet, read by the resizer.
pub const NODE_RESIZE_INFEASIBLE: &str = "NodeResizeInfeasible";

// ---- status.modifyVolumeStatus.status ----------------------------------------------------------------------------

pub const MODIFY_PENDING: &str = "Pending";
pub const MODIFY_IN_PROGRESS: &str = "InProgress";
pub const MODIFY_INFEASIBLE: &str = "Infeasible";

// ---- Events (involved object: the claim) ------------------------------------------------------------------------

/// Normal, before each ControllerExpandVolume attempt.
pub const EVENT_RESIZING: &str = "Resizing";
/// Warning: an expansion failed, or an offline-only driver's volume is in use.
pub const EVENT_VOLUME_RESIZE_FAILED: &str = "VolumeResizeFailed";
/// Normal: the expansion is complete without a node step.
pub const EVENT_VOLUME_RESIZE_SUCCESSFUL: &str = "VolumeResizeSuccessful";
/// Normal: the controller step is done and kubelet must finish.
pub const EVENT_FILE_SYSTEM_RESIZE_REQUIRED: &str = "FileSystemResizeRequired";
/// Normal, before ControllerModifyVolume to a newly validated class.
pub const EVENT_VOLUME_MODIFY: &str = "VolumeModify";
/// Warning: a modification failed, or its class does not exist.
pub const EVENT_VOLUME_MODIFY_FAILED: &str = "VolumeModifyFailed";
/// Normal: the modification is done.
pub const EVENT_VOLUME_MODIFY_SUCCESSFUL: &str = "VolumeModifySuccessful";
/// Normal: the claim's class was cleared while a modification was shown as under way.
pub const EVENT_VOLUME_MODIFY_CANCELED: &str = "VolumeModifyCanceled";
/// Event source component; upstream appends ` <driver name>`.
pub const EVENT_COMPONENT: &str = "external-resizer";

// ---- Feature gates (--feature-gates) ------------------------------------------------------------------------------

/// Beta, on by default: the pre-resize-capacity annotation on PVs.
pub const GATE_ANNOTATE_FS_RESIZE: &str = "AnnotateFsResize";
/// GA, on by default (turned off when the storage.k8s.io/v1 VolumeAttributesClass API is missing).
pub const GATE_VOLUME_ATTRIBUTES_CLASS: &str = "VolumeAttributesClass";

// ---- ControllerModifyVolume mutable_parameters added by --extra-modify-metadata ------------------------------------

// ---- Kubernetes values --------------------------------------------------------------------------------------------

pub const CLAIM_BOUND: &str = "Bound";
pub use csi_client::access_modes::{
    ACCESS_READ_ONLY_MANY, ACCESS_READ_WRITE_MANY, ACCESS_READ_WRITE_ONCE, ACCESS_READ_WRITE_ONCE_POD,
};
pub const POD_SUCCEEDED: &str = "Succeeded";
pub const POD_FAILED: &str = "Failed";
