//! Event reasons, exactly as upstream's snapshot-controller writes them (users and tools filter on them).

// Class resolution.
pub const GET_SNAPSHOT_CLASS_FAILED: &str = "GetSnapshotClassFailed";
pub const SET_DEFAULT_SNAPSHOT_CLASS_FAILED: &str = "SetDefaultSnapshotClassFailed";
// Validation of snapshots and contents, and finalizers on snapshots and claims.
pub const SNAPSHOT_VALIDATION_ERROR: &str = "SnapshotValidationError";
pub const CONTENT_VALIDATION_ERROR: &str = "ContentValidationError";
pub const SNAPSHOT_FINALIZER_ERROR: &str = "SnapshotFinalizerError";
pub const ERROR_PVC_FINALIZER: &str = "ErrorPVCFinalizer";
// Creation of a dynamic snapshot's content.
pub const SNAPSHOT_HANDLE_SET: &str = "SnapshotHandleSet";
pub const SNAPSHOT_PVC_SOURCE_MISSING: &str = "SnapshotPVCSourceMissing";
pub const SNAPSHOT_CONTENT_CREATION_FAILED: &str = "SnapshotContentCreationFailed";
pub const CREATE_SNAPSHOT_CONTENT_FAILED: &str = "CreateSnapshotContentFailed";
pub const CREATING_SNAPSHOT: &str = "CreatingSnapshot";
// Binding a snapshot to its content.
pub const SNAPSHOT_CONTENT_MISSING: &str = "SnapshotContentMissing";
pub const SNAPSHOT_CONTENT_MISMATCH: &str = "SnapshotContentMismatch";
pub const SNAPSHOT_CONTENT_MISBOUND: &str = "SnapshotContentMisbound";
pub const SNAPSHOT_BIND_FAILED: &str = "SnapshotBindFailed";
pub const SNAPSHOT_MISBOUND: &str = "SnapshotMisbound";
// The content's status carried to the snapshot.
pub const SNAPSHOT_STATUS_UPDATE_FAILED: &str = "SnapshotStatusUpdateFailed";
pub const SNAPSHOT_CREATED: &str = "SnapshotCreated";
pub const SNAPSHOT_READY: &str = "SnapshotReady";
// Deleting a snapshot.
pub const SNAPSHOT_DELETE_PENDING: &str = "SnapshotDeletePending";
pub const SNAPSHOT_CONTENT_OBJECT_DELETE_ERROR: &str = "SnapshotContentObjectDeleteError";
