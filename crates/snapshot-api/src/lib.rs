//! The snapshot API the sidecars read and write: `snapshot.storage.k8s.io/v1` VolumeSnapshot,
//! VolumeSnapshotContent and VolumeSnapshotClass, and `groupsnapshot.storage.k8s.io/v1` VolumeGroupSnapshot,
//! VolumeGroupSnapshotContent and VolumeGroupSnapshotClass, with their CustomResourceDefinitions.
//!
//! The types follow the upstream v1 schema field for field (JSON names, required fields, enums, CEL rules, printer
//! columns, short names), so that objects written by the upstream controllers read back unchanged and the CRDs
//! generated from them (`cargo run -p snapshot-api --bin snapshot-crds`) can replace the upstream ones.

pub mod crds;
pub mod names;
mod snapshot_error;
mod volume_group_snapshot;
mod volume_group_snapshot_class;
mod volume_group_snapshot_content;
mod volume_snapshot;
mod volume_snapshot_class;
mod volume_snapshot_content;

pub use snapshot_error::SnapshotError;
pub use volume_group_snapshot::{
    VolumeGroupSnapshot, VolumeGroupSnapshotSource, VolumeGroupSnapshotSpec, VolumeGroupSnapshotStatus,
};
pub use volume_group_snapshot_class::{VolumeGroupSnapshotClass, VolumeGroupSnapshotClassFields};
pub use volume_group_snapshot_content::{
    GroupSnapshotHandles, VolumeGroupSnapshotContent, VolumeGroupSnapshotContentSource, VolumeGroupSnapshotContentSpec,
    VolumeGroupSnapshotContentStatus, VolumeSnapshotInfo,
};
pub use volume_snapshot::{VolumeSnapshot, VolumeSnapshotSource, VolumeSnapshotSpec, VolumeSnapshotStatus};
pub use volume_snapshot_class::{VolumeSnapshotClass, VolumeSnapshotClassFields};
pub use volume_snapshot_content::{
    DeletionPolicy, VolumeSnapshotContent, VolumeSnapshotContentSource, VolumeSnapshotContentSpec,
    VolumeSnapshotContentStatus,
};
