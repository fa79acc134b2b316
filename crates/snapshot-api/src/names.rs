//! Names shared with the upstream snapshot controllers.

/// The API group of VolumeSnapshot, VolumeSnapshotContent and VolumeSnapshotClass.
pub const GROUP: &str = "snapshot.storage.k8s.io";
/// Annotation on a VolumeSnapshotContent that lets a restore change the volume mode of its source.
pub const ANN_ALLOW_VOLUME_MODE_CHANGE: &str = "snapshot.storage.kubernetes.io/allow-volume-mode-change";

// Finalizers (reference §8). Each one keeps an object until the controller that owns the step has cleaned up.

/// On a VolumeSnapshot, while a claim may still be restored from it.
pub const FINALIZER_VOLUME_SNAPSHOT_AS_SOURCE: &str =
    "snapshot.storage.kubernetes.io/volumesnapshot-as-source-protection";
/// On a VolumeSnapshot bound to a content with the `Delete` policy, until that content is gone.
pub const FINALIZER_VOLUME_SNAPSHOT_BOUND: &str = "snapshot.storage.kubernetes.io/volumesnapshot-bound-protection";
/// On a VolumeSnapshot that is a member of a group snapshot.
pub const FINALIZER_VOLUME_SNAPSHOT_IN_GROUP: &str =
    "snapshot.storage.kubernetes.io/volumesnapshot-in-group-protection";
/// On a bound VolumeSnapshotContent, until csi-snapshotter has deleted the storage snapshot (or let it be).
pub const FINALIZER_VOLUME_SNAPSHOT_CONTENT_BOUND: &str =
    "snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection";
/// On a claim while a VolumeSnapshot of it is being taken.
pub const FINALIZER_PVC_AS_SOURCE: &str = "snapshot.storage.kubernetes.io/pvc-as-source-protection";

// Annotations and labels (reference §8); the values of the two "being" annotations are exactly "yes".

/// On a VolumeSnapshotClass: the default class of its driver when the value is exactly `"true"`.
pub const ANN_IS_DEFAULT_CLASS: &str = "snapshot.storage.kubernetes.io/is-default-class";
/// On a VolumeSnapshotContent, written by csi-snapshotter before CreateSnapshot and removed once the driver has
/// answered with a snapshot id or a final error: while it is there the content must not be deleted, because a snapshot
/// may exist that nobody knows the id of.
pub const ANN_VOLUME_SNAPSHOT_BEING_CREATED: &str = "snapshot.storage.kubernetes.io/volumesnapshot-being-created";
/// On a VolumeSnapshotContent, written by the snapshot-controller when its VolumeSnapshot is being deleted: the signal
/// for csi-snapshotter to delete the storage snapshot.
pub const ANN_VOLUME_SNAPSHOT_BEING_DELETED: &str = "snapshot.storage.kubernetes.io/volumesnapshot-being-deleted";
/// The value of the two annotations above.
pub const ANN_VALUE_YES: &str = "yes";
/// On a VolumeSnapshotContent: the Secret for DeleteSnapshot (and CreateSnapshot), resolved when the content was made.
pub const ANN_DELETION_SECRET_NAME: &str = "snapshot.storage.kubernetes.io/deletion-secret-name";
/// Namespace of that Secret.
pub const ANN_DELETION_SECRET_NAMESPACE: &str = "snapshot.storage.kubernetes.io/deletion-secret-namespace";
/// Label on a VolumeSnapshotContent with distributed snapshotting: the node whose csi-snapshotter handles it.
pub const LABEL_MANAGED_BY: &str = "snapshot.storage.kubernetes.io/managed-by";
/// On a VolumeSnapshotContent that is a member of a group snapshot (note the `.k8s.io` domain, as upstream spells it).
pub const ANN_VOLUME_GROUP_SNAPSHOT_HANDLE: &str = "groupsnapshot.storage.k8s.io/volumeGroupSnapshotHandle";

// VolumeSnapshotClass parameters under the reserved `csi.storage.k8s.io/` prefix (reference §3.2 item 2c, §8).

/// Every class parameter under this prefix is for the sidecars, never for the driver.
pub const RESERVED_PARAMETER_PREFIX: &str = "csi.storage.k8s.io/";
/// The Secret of CreateSnapshot and DeleteSnapshot.
pub const PARAM_SNAPSHOTTER_SECRET_NAME: &str = "csi.storage.k8s.io/snapshotter-secret-name";
pub const PARAM_SNAPSHOTTER_SECRET_NAMESPACE: &str = "csi.storage.k8s.io/snapshotter-secret-namespace";
/// The Secret of ListSnapshots.
pub const PARAM_SNAPSHOTTER_LIST_SECRET_NAME: &str = "csi.storage.k8s.io/snapshotter-list-secret-name";
pub const PARAM_SNAPSHOTTER_LIST_SECRET_NAMESPACE: &str = "csi.storage.k8s.io/snapshotter-list-secret-namespace";
/// The Secret of CreateVolumeGroupSnapshot and DeleteVolumeGroupSnapshot.
pub const PARAM_GROUP_SNAPSHOTTER_SECRET_NAME: &str = "csi.storage.k8s.io/group-snapshotter-secret-name";
pub const PARAM_GROUP_SNAPSHOTTER_SECRET_NAMESPACE: &str = "csi.storage.k8s.io/group-snapshotter-secret-namespace";
/// The Secret of GetVolumeGroupSnapshot.
pub const PARAM_GROUP_SNAPSHOTTER_GET_SECRET_NAME: &str = "csi.storage.k8s.io/group-snapshotter-get-secret-name";
pub const PARAM_GROUP_SNAPSHOTTER_GET_SECRET_NAMESPACE: &str =
    "csi.storage.k8s.io/group-snapshotter-get-secret-namespace";
/// The reserved keys that are removed from the parameters sent to the driver; any other reserved key is an error.
pub const RESERVED_PARAMETERS: [&str; 8] = [
    PARAM_SNAPSHOTTER_SECRET_NAME,
    PARAM_SNAPSHOTTER_SECRET_NAMESPACE,
    PARAM_SNAPSHOTTER_LIST_SECRET_NAME,
    PARAM_SNAPSHOTTER_LIST_SECRET_NAMESPACE,
    PARAM_GROUP_SNAPSHOTTER_SECRET_NAME,
    PARAM_GROUP_SNAPSHOTTER_SECRET_NAMESPACE,
    PARAM_GROUP_SNAPSHOTTER_GET_SECRET_NAME,
    PARAM_GROUP_SNAPSHOTTER_GET_SECRET_NAMESPACE,
];

// Parameters added with `--extra-create-metadata`.

pub const PARAM_VOLUME_SNAPSHOT_NAME: &str = "csi.storage.k8s.io/volumesnapshot/name";
pub const PARAM_VOLUME_SNAPSHOT_NAMESPACE: &str = "csi.storage.k8s.io/volumesnapshot/namespace";
pub const PARAM_VOLUME_SNAPSHOT_CONTENT_NAME: &str = "csi.storage.k8s.io/volumesnapshotcontent/name";
pub const PARAM_VOLUME_GROUP_SNAPSHOT_NAME: &str = "csi.storage.k8s.io/volumegroupsnapshot/name";
pub const PARAM_VOLUME_GROUP_SNAPSHOT_NAMESPACE: &str = "csi.storage.k8s.io/volumegroupsnapshot/namespace";
pub const PARAM_VOLUME_GROUP_SNAPSHOT_CONTENT_NAME: &str = "csi.storage.k8s.io/volumegroupsnapshotcontent/name";
