//! Names shared with the upstream snapshot controllers: the wire strings the snapshot-controller, csi-snapshotter,
//! the group snapshotter and external-provisioner read from each other's objects, so they must match upstream
//! byte for byte.

/// The API group of VolumeSnapshot, VolumeSnapshotContent and VolumeSnapshotClass.
pub const GROUP: &str = "snapshot.storage.k8s.io";
/// The `apiVersion` of the snapshot objects.
pub const API_VERSION: &str = "snapshot.storage.k8s.io/v1";
/// Kinds, as they appear in object references and claim data sources.
pub const KIND_VOLUME_SNAPSHOT: &str = "VolumeSnapshot";
pub const KIND_VOLUME_SNAPSHOT_CONTENT: &str = "VolumeSnapshotContent";
/// The `apiVersion` and kind of the ownerReference that makes a VolumeSnapshot a member of a VolumeGroupSnapshot.
pub const GROUP_SNAPSHOT_API_VERSION: &str = "groupsnapshot.storage.k8s.io/v1";
pub const KIND_VOLUME_GROUP_SNAPSHOT: &str = "VolumeGroupSnapshot";

/// Annotation on a VolumeSnapshotContent that lets a restore change the volume mode of its source.
pub const ANN_ALLOW_VOLUME_MODE_CHANGE: &str = "snapshot.storage.kubernetes.io/allow-volume-mode-change";
/// Annotation on a VolumeSnapshotClass: `"true"` (exactly) makes it its driver's default class.
pub const ANN_IS_DEFAULT_CLASS: &str = "snapshot.storage.kubernetes.io/is-default-class";
/// Annotation csi-snapshotter sets on a VolumeSnapshotContent while a CreateSnapshot may be in flight.
pub const ANN_VOLUME_SNAPSHOT_BEING_CREATED: &str = "snapshot.storage.kubernetes.io/volumesnapshot-being-created";
/// Annotation the snapshot-controller sets on a VolumeSnapshotContent once its VolumeSnapshot is being deleted.
pub const ANN_VOLUME_SNAPSHOT_BEING_DELETED: &str = "snapshot.storage.kubernetes.io/volumesnapshot-being-deleted";
/// The value of the being-created and being-deleted annotations.
pub const ANN_VALUE_YES: &str = "yes";
/// Annotations on a VolumeSnapshotContent naming the Secret DeleteSnapshot is called with.
pub const ANN_DELETION_SECRET_NAME: &str = "snapshot.storage.kubernetes.io/deletion-secret-name";
pub const ANN_DELETION_SECRET_NAMESPACE: &str = "snapshot.storage.kubernetes.io/deletion-secret-namespace";
/// Annotation on a member VolumeSnapshotContent carrying its group snapshot's handle (note `.k8s.io`).
pub const ANN_VOLUME_GROUP_SNAPSHOT_HANDLE: &str = "groupsnapshot.storage.k8s.io/volumeGroupSnapshotHandle";
/// Label on a VolumeSnapshotContent naming the node whose csi-snapshotter handles it (distributed snapshotting).
pub const LABEL_MANAGED_BY: &str = "snapshot.storage.kubernetes.io/managed-by";

/// Finalizer on a VolumeSnapshot while it may be the data source of a claim being restored.
pub const FINALIZER_VOLUME_SNAPSHOT_AS_SOURCE: &str =
    "snapshot.storage.kubernetes.io/volumesnapshot-as-source-protection";
/// Finalizer on a VolumeSnapshot bound to a content whose deletion policy is Delete.
pub const FINALIZER_VOLUME_SNAPSHOT_BOUND: &str = "snapshot.storage.kubernetes.io/volumesnapshot-bound-protection";
/// Finalizer on a VolumeSnapshot that is a member of a VolumeGroupSnapshot.
pub const FINALIZER_VOLUME_SNAPSHOT_IN_GROUP: &str =
    "snapshot.storage.kubernetes.io/volumesnapshot-in-group-protection";
/// Finalizer on a VolumeSnapshotContent bound to a VolumeSnapshot.
pub const FINALIZER_VOLUME_SNAPSHOT_CONTENT_BOUND: &str =
    "snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection";
/// Finalizer on a PersistentVolumeClaim while a snapshot of it is being cut.
pub const FINALIZER_PVC_AS_SOURCE: &str = "snapshot.storage.kubernetes.io/pvc-as-source-protection";

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
/// CreateSnapshot parameters added with `--extra-create-metadata`.
pub const PARAM_VOLUME_SNAPSHOT_NAME: &str = "csi.storage.k8s.io/volumesnapshot/name";
pub const PARAM_VOLUME_SNAPSHOT_NAMESPACE: &str = "csi.storage.k8s.io/volumesnapshot/namespace";
pub const PARAM_VOLUME_SNAPSHOT_CONTENT_NAME: &str = "csi.storage.k8s.io/volumesnapshotcontent/name";

/// The prefix of the VolumeSnapshotContent a dynamic VolumeSnapshot gets: `snapcontent-<snapshot UID>`.
pub const DYNAMIC_CONTENT_NAME_PREFIX: &str = "snapcontent-";

/// The reserved keys removed from the parameters sent to the driver; any other reserved key is an error.
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
/// CreateVolumeGroupSnapshot parameters added with `--extra-create-metadata`.
pub const PARAM_VOLUME_GROUP_SNAPSHOT_NAME: &str = "csi.storage.k8s.io/volumegroupsnapshot/name";
pub const PARAM_VOLUME_GROUP_SNAPSHOT_NAMESPACE: &str = "csi.storage.k8s.io/volumegroupsnapshot/namespace";
pub const PARAM_VOLUME_GROUP_SNAPSHOT_CONTENT_NAME: &str = "csi.storage.k8s.io/volumegroupsnapshotcontent/name";

/// The API group of VolumeGroupSnapshot, VolumeGroupSnapshotContent and VolumeGroupSnapshotClass.
pub const GROUP_SNAPSHOT_GROUP: &str = "groupsnapshot.storage.k8s.io";
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
/// The prefix of the VolumeGroupSnapshotContent a dynamic group snapshot gets: `groupsnapcontent-<group UID>`.
pub const DYNAMIC_GROUP_CONTENT_NAME_PREFIX: &str = "groupsnapcontent-";
