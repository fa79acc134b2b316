//! Names shared with the upstream snapshot controllers.

/// The API group of VolumeSnapshot, VolumeSnapshotContent and VolumeSnapshotClass.
pub const GROUP: &str = "snapshot.storage.k8s.io";
/// Annotation on a VolumeSnapshotContent that lets a restore change the volume mode of its source.
pub const ANN_ALLOW_VOLUME_MODE_CHANGE: &str = "snapshot.storage.kubernetes.io/allow-volume-mode-change";
