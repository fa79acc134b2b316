//! The event reasons of the group rules, spelled as upstream's (external-snapshotter's common and sidecar
//! controllers), and the API names they use.

pub use snapshot_api::names::{
    ANN_DELETION_SECRET_NAME, ANN_DELETION_SECRET_NAMESPACE, ANN_GROUP_DELETION_SECRET_NAME,
    ANN_GROUP_DELETION_SECRET_NAMESPACE, ANN_GROUP_IS_DEFAULT_CLASS, ANN_VALUE_YES,
    ANN_VOLUME_GROUP_SNAPSHOT_BEING_CREATED, ANN_VOLUME_GROUP_SNAPSHOT_BEING_DELETED, ANN_VOLUME_GROUP_SNAPSHOT_HANDLE,
    DYNAMIC_GROUP_CONTENT_NAME_PREFIX, FINALIZER_VOLUME_SNAPSHOT_AS_SOURCE, FINALIZER_VOLUME_SNAPSHOT_BOUND,
    FINALIZER_VOLUME_SNAPSHOT_CONTENT_BOUND, FINALIZER_VOLUME_SNAPSHOT_IN_GROUP, GROUP_SNAPSHOT_API_VERSION,
    KIND_VOLUME_GROUP_SNAPSHOT,
};

/// The `apiVersion` and kind of member VolumeSnapshots, as their contents' `volumeSnapshotRef` names them.
pub use snapshot_api::names::{API_VERSION as SNAPSHOT_API_VERSION, KIND_VOLUME_SNAPSHOT};
/// Member object names: `snapshot-<hash>` and `snapcontent-<hash>`, the hash of the group's UID and the volume
/// handle (upstream since v8.3).
pub const MEMBER_SNAPSHOT_NAME_PREFIX: &str = "snapshot-";
pub use snapshot_api::names::DYNAMIC_CONTENT_NAME_PREFIX as MEMBER_CONTENT_NAME_PREFIX;

// ---- Events on a VolumeGroupSnapshot (snapshot-controller) ------------------------------------------------------

/// Warning: no single default class for the driver.
pub const EVENT_SET_DEFAULT_CLASS_FAILED: &str = "SetDefaultGroupSnapshotClassFailed";
/// Warning: a claim of the group cannot be snapshotted (not bound, volume missing or misbound, selector empty).
pub const EVENT_CONTENT_CREATION_FAILED: &str = "GroupSnapshotContentCreationFailed";
/// Warning: a claim's volume is not a CSI volume, or belongs to another driver than the class's.
pub const EVENT_CREATE_CONTENT_FAILED: &str = "CreateGroupSnapshotContentFailed";
/// Normal: the content exists and waits for the driver.
pub const EVENT_CREATING_GROUP_SNAPSHOT: &str = "CreatingGroupSnapshot";
/// Normal: the first time the group snapshot has a creation time.
pub const EVENT_GROUP_SNAPSHOT_CREATED: &str = "GroupSnapshotCreated";
/// Normal: the first time the group snapshot is ready to use.
pub const EVENT_GROUP_SNAPSHOT_READY: &str = "GroupSnapshotReady";
/// Warning: a member is the data source of a claim still being restored, so the group waits.
pub const EVENT_SNAPSHOT_DELETE_PENDING: &str = "SnapshotDeletePending";

// ---- Events on a VolumeGroupSnapshotContent (csi-snapshotter) ---------------------------------------------------

/// Warning: CreateVolumeGroupSnapshot failed, or could not be asked.
pub const EVENT_GROUP_SNAPSHOT_CREATION_FAILED: &str = "GroupSnapshotCreationFailed";
/// Warning: DeleteVolumeGroupSnapshot failed, or could not be asked.
pub const EVENT_GROUP_SNAPSHOT_DELETE_ERROR: &str = "GroupSnapshotDeleteError";

/// Warning: the class the group snapshot names does not exist.
pub const EVENT_GET_CLASS_FAILED: &str = "GetGroupSnapshotClassFailed";
/// Warning: the content the group snapshot is bound to points at another group snapshot.
pub const EVENT_CONTENT_MISBOUND: &str = "GroupSnapshotContentMisbound";
/// Warning: a member VolumeSnapshot could not be deleted with its group.
pub const EVENT_SNAPSHOT_DELETE_ERROR: &str = "SnapshotDeleteError";
/// Warning: the group's content could not be deleted.
pub const EVENT_CONTENT_DELETE_ERROR: &str = "GroupSnapshotContentObjectDeleteError";
/// Warning: the pre-provisioned content a group snapshot names does not exist.
pub const EVENT_CONTENT_MISSING: &str = "GroupSnapshotContentMissing";
/// Warning: the content a pre-provisioned group snapshot names is a dynamic one.
pub const EVENT_CONTENT_MISMATCH: &str = "GroupSnapshotContentMismatch";
/// Warning: the pre-provisioned content could not be bound (its UID or class not written).
pub const EVENT_BIND_FAILED: &str = "GroupSnapshotBindFailed";

// ---- Events on a VolumeGroupSnapshotContent (csi-snapshotter), continued ------------------------------------------

/// Warning: GetVolumeGroupSnapshot of a pre-provisioned content failed, or could not be asked.
pub const EVENT_CONTENT_CHECK_FAILED: &str = "GroupSnapshotContentCheckandUpdateFailed";
