//! Names shared with the upstream snapshot controllers.

/// The API group of VolumeSnapshot, VolumeSnapshotContent and VolumeSnapshotClass.
pub const GROUP: &str = "snapshot.storage.k8s.io";
/// Annotation on a VolumeSnapshotContent that lets a restore change the volume mode of its source.
pub const ANN_ALLOW_VOLUME_MODE_CHANGE: &str = "snapshot.storage.kubernetes.io/allow-volume-mode-change";

// The names below also appear on branch snap-translate, written identically, so that a merge keeps one copy.
/// The value of the being-created and being-deleted annotations.
pub const ANN_VALUE_YES: &str = "yes";
/// Annotations on a VolumeSnapshotContent naming the Secret DeleteSnapshot is called with.
pub const ANN_DELETION_SECRET_NAME: &str = "snapshot.storage.kubernetes.io/deletion-secret-name";
pub const ANN_DELETION_SECRET_NAMESPACE: &str = "snapshot.storage.kubernetes.io/deletion-secret-namespace";
/// Annotation on a member VolumeSnapshotContent carrying its group snapshot's handle (note `.k8s.io`).
pub const ANN_VOLUME_GROUP_SNAPSHOT_HANDLE: &str = "groupsnapshot.storage.k8s.io/volumeGroupSnapshotHandle";
/// Finalizer on a VolumeSnapshot that is a member of a VolumeGroupSnapshot.
pub const FINALIZER_VOLUME_SNAPSHOT_IN_GROUP: &str =
    "snapshot.storage.kubernetes.io/volumesnapshot-in-group-protection";
/// The prefix of VolumeSnapshotClass parameters meant for the sidecars rather than the driver.
pub const RESERVED_PARAMETER_PREFIX: &str = "csi.storage.k8s.io/";
/// Class parameters naming the Secret of CreateSnapshot and DeleteSnapshot.
pub const PARAM_SNAPSHOTTER_SECRET_NAME: &str = "csi.storage.k8s.io/snapshotter-secret-name";
pub const PARAM_SNAPSHOTTER_SECRET_NAMESPACE: &str = "csi.storage.k8s.io/snapshotter-secret-namespace";
/// Class parameters naming the Secret of ListSnapshots.
pub const PARAM_SNAPSHOTTER_LIST_SECRET_NAME: &str = "csi.storage.k8s.io/snapshotter-list-secret-name";
pub const PARAM_SNAPSHOTTER_LIST_SECRET_NAMESPACE: &str = "csi.storage.k8s.io/snapshotter-list-secret-namespace";
/// Group class parameters naming the Secret of CreateVolumeGroupSnapshot and DeleteVolumeGroupSnapshot.
pub const PARAM_GROUP_SNAPSHOTTER_SECRET_NAME: &str = "csi.storage.k8s.io/group-snapshotter-secret-name";
pub const PARAM_GROUP_SNAPSHOTTER_SECRET_NAMESPACE: &str = "csi.storage.k8s.io/group-snapshotter-secret-namespace";
/// Group class parameters naming the Secret of GetVolumeGroupSnapshot.
pub const PARAM_GROUP_SNAPSHOTTER_GET_SECRET_NAME: &str = "csi.storage.k8s.io/group-snapshotter-get-secret-name";
pub const PARAM_GROUP_SNAPSHOTTER_GET_SECRET_NAMESPACE: &str =
    "csi.storage.k8s.io/group-snapshotter-get-secret-namespace";

/// The API group of VolumeGroupSnapshot, VolumeGroupSnapshotContent and VolumeGroupSnapshotClass.
pub const GROUP_SNAPSHOT_GROUP: &str = "groupsnapshot.storage.k8s.io";
/// The `apiVersion` the controllers read and write group objects in (the CRDs store v1beta2, whose schema is the
/// same).
pub const GROUP_SNAPSHOT_API_VERSION: &str = "groupsnapshot.storage.k8s.io/v1";
/// Kind, as it appears in the owner references of member VolumeSnapshots.
pub const KIND_VOLUME_GROUP_SNAPSHOT: &str = "VolumeGroupSnapshot";
/// Annotation on a VolumeGroupSnapshotClass: `"true"` (exactly) makes it its driver's default group class.
pub const ANN_GROUP_IS_DEFAULT_CLASS: &str = "groupsnapshot.storage.kubernetes.io/is-default-class";
/// Annotation csi-snapshotter sets on a VolumeGroupSnapshotContent while a CreateVolumeGroupSnapshot may be in flight.
pub const ANN_VOLUME_GROUP_SNAPSHOT_BEING_CREATED: &str =
    "groupsnapshot.storage.kubernetes.io/volumegroupsnapshot-being-created";
/// Annotation the snapshot-controller sets on a VolumeGroupSnapshotContent once its group snapshot is being deleted.
pub const ANN_VOLUME_GROUP_SNAPSHOT_BEING_DELETED: &str =
    "groupsnapshot.storage.kubernetes.io/volumegroupsnapshot-being-deleted";
/// Annotations on a VolumeGroupSnapshotContent naming the Secret DeleteVolumeGroupSnapshot is called with.
pub const ANN_GROUP_DELETION_SECRET_NAME: &str = "groupsnapshot.storage.kubernetes.io/deletion-secret-name";
pub const ANN_GROUP_DELETION_SECRET_NAMESPACE: &str = "groupsnapshot.storage.kubernetes.io/deletion-secret-namespace";
/// Annotation upstream's conversion webhook keeps the v1beta2 `volumeSnapshotInfoList` in on a v1beta1 object.
pub const ANN_VOLUME_SNAPSHOT_INFO_LIST: &str = "groupsnapshot.storage.kubernetes.io/volume-snapshot-info-list";
/// Finalizer on a VolumeGroupSnapshot bound to its content (whatever the deletion policy).
pub const FINALIZER_VOLUME_GROUP_SNAPSHOT_BOUND: &str =
    "groupsnapshot.storage.kubernetes.io/volumegroupsnapshot-bound-protection";
/// Finalizer on a VolumeGroupSnapshotContent bound to a VolumeGroupSnapshot.
pub const FINALIZER_VOLUME_GROUP_SNAPSHOT_CONTENT_BOUND: &str =
    "groupsnapshot.storage.kubernetes.io/volumegroupsnapshotcontent-bound-protection";
/// CreateVolumeGroupSnapshot parameters added with `--extra-create-metadata`.
pub const PARAM_VOLUME_GROUP_SNAPSHOT_NAME: &str = "csi.storage.k8s.io/volumegroupsnapshot/name";
pub const PARAM_VOLUME_GROUP_SNAPSHOT_NAMESPACE: &str = "csi.storage.k8s.io/volumegroupsnapshot/namespace";
pub const PARAM_VOLUME_GROUP_SNAPSHOT_CONTENT_NAME: &str = "csi.storage.k8s.io/volumegroupsnapshotcontent/name";
/// The prefix of the VolumeGroupSnapshotContent a dynamic group snapshot gets: `groupsnapcontent-<group UID>`.
pub const DYNAMIC_GROUP_CONTENT_NAME_PREFIX: &str = "groupsnapcontent-";
