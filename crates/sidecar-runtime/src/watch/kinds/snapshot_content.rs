//! A VolumeSnapshotContent as a cache holds it: every field but `metadata.managedFields`.

use std::sync::Arc;

use snapshot_api::{
    DeletionPolicy, VolumeSnapshotContent, VolumeSnapshotContentSource, VolumeSnapshotContentSpec,
    VolumeSnapshotContentStatus,
};

use super::meta::SlimMeta;
use super::volume::Reference;
use super::{Cached, Key};
use crate::watch::strings::{shared, shared_opt, string, text};

#[derive(Debug, Clone, PartialEq)]
pub struct SlimSnapshotContent {
    meta: SlimMeta,
    snapshot_ref: Reference,
    deletion_policy: DeletionPolicy,
    driver: Arc<str>,
    class_name: Option<Arc<str>>,
    source_volume_handle: Option<Box<str>>,
    source_snapshot_handle: Option<Box<str>>,
    source_volume_mode: Option<Arc<str>>,
    status: Option<Status>,
}

#[derive(Debug, Clone, PartialEq)]
struct Status {
    snapshot_handle: Option<Box<str>>,
    creation_time: Option<i64>,
    restore_size: Option<i64>,
    ready_to_use: Option<bool>,
    /// The error and the group snapshot handle.
    rest: Option<Box<VolumeSnapshotContentStatus>>,
}

impl Cached for VolumeSnapshotContent {
    type Slim = SlimSnapshotContent;

    fn slim(&self) -> SlimSnapshotContent {
        let VolumeSnapshotContentSpec {
            volume_snapshot_ref,
            deletion_policy,
            driver,
            volume_snapshot_class_name,
            source: VolumeSnapshotContentSource { volume_handle, snapshot_handle },
            source_volume_mode,
        } = &self.spec;
        SlimSnapshotContent {
            meta: SlimMeta::of(&self.metadata),
            snapshot_ref: Reference::of(volume_snapshot_ref),
            deletion_policy: *deletion_policy,
            driver: shared(driver),
            class_name: shared_opt(volume_snapshot_class_name),
            source_volume_handle: text(volume_handle),
            source_snapshot_handle: text(snapshot_handle),
            source_volume_mode: shared_opt(source_volume_mode),
            status: self.status.as_ref().map(Status::of),
        }
    }

    fn read(held: &Arc<SlimSnapshotContent>) -> Arc<VolumeSnapshotContent> {
        let spec = VolumeSnapshotContentSpec {
            volume_snapshot_ref: held.snapshot_ref.full(),
            deletion_policy: held.deletion_policy,
            driver: held.driver.to_string(),
            volume_snapshot_class_name: string(&held.class_name),
            source: VolumeSnapshotContentSource {
                volume_handle: string(&held.source_volume_handle),
                snapshot_handle: string(&held.source_snapshot_handle),
            },
            source_volume_mode: string(&held.source_volume_mode),
        };
        Arc::new(VolumeSnapshotContent {
            metadata: held.meta.full(),
            spec,
            status: held.status.as_ref().map(Status::full),
        })
    }

    fn key(held: &SlimSnapshotContent) -> Key<'_> {
        held.meta.key()
    }
}

impl Status {
    fn of(status: &VolumeSnapshotContentStatus) -> Status {
        let VolumeSnapshotContentStatus {
            snapshot_handle,
            creation_time,
            restore_size,
            ready_to_use,
            error,
            volume_group_snapshot_handle,
        } = status;
        let rest = VolumeSnapshotContentStatus {
            error: error.clone(),
            volume_group_snapshot_handle: volume_group_snapshot_handle.clone(),
            ..Default::default()
        };
        Status {
            snapshot_handle: text(snapshot_handle),
            creation_time: *creation_time,
            restore_size: *restore_size,
            ready_to_use: *ready_to_use,
            rest: (rest != VolumeSnapshotContentStatus::default()).then(|| Box::new(rest)),
        }
    }

    fn full(&self) -> VolumeSnapshotContentStatus {
        let rest = self.rest.as_deref().cloned().unwrap_or_default();
        VolumeSnapshotContentStatus {
            snapshot_handle: string(&self.snapshot_handle),
            creation_time: self.creation_time,
            restore_size: self.restore_size,
            ready_to_use: self.ready_to_use,
            ..rest
        }
    }
}
