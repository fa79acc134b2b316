//! The snapshot-controller's rules (external-snapshotter pkg/common-controller) as pure functions: plain inputs
//! (snapshots, contents, classes, claims, volumes, flags) to plain outputs (decisions, objects to create, patches with
//! an `apply`, events with upstream's reasons and texts). No I/O.
//!
//! A VolumeSnapshot sync, as a controller drives it (each failure is a [`status_error::SnapshotFailure`]: record it
//! with `record_on`, which skips the write and event when the same message is already set, and retry when it says
//! so):
//! 1. [`finalizers::claim_finalizer_removal`] (skip: none) for a dynamic snapshot whose claim the lister has;
//!    a failed write is [`finalizers::claim_finalizer_removal_failed`] and the sync goes on.
//! 2. [`default_class::class_lookup`]: a named class missing from the lister is [`default_class::class_missing`]
//!    (a snapshot being deleted goes on, [`default_class::sync_continues_without_class`]); `Default` resolves the
//!    source volume ([`source_volume::source_volume`], [`source_volume::csi_source`]) then
//!    [`default_class::default_class`], whose patch is written; errors on the way are
//!    [`default_class::default_class_failed`].
//! 3. Being deleted: [`deletion::snapshot_deletion`] with the content under [`deletion::deletion_content_name`], and
//!    stop.
//! 4. [`validation::snapshot_source`].
//! 5. The content: [`binding::preprovisioned_content`] or [`binding::dynamic_content`] on the store's object under
//!    [`binding::expected_content_name`], then [`finalizers::snapshot_finalizers`] (failure:
//!    [`finalizers::snapshot_finalizer_failed`]).
//! 6. Ready and bound: [`binding::ready_snapshot_check`] on the bound content, and stop.
//! 7. Pre-provisioned: missing is [`binding::content_missing`]; else [`binding::bind_patch`], then
//!    [`status::snapshot_status`].
//! 8. Dynamic with a content: [`status::snapshot_status`]. Without: [`finalizers::claim_finalizer_before_create`],
//!    [`dynamic_content::dynamic_content`] (the class from step 2, the volume from [`source_volume`]), create it
//!    (AlreadyExists reuses it; other errors [`dynamic_content::create_failed`]),
//!    [`dynamic_content::creating_event`], then [`status::snapshot_status`] with the new content.
//!
//! A VolumeSnapshotContent sync is [`content_sync::content_sync`] with the snapshot under
//! [`content_sync::referenced_snapshot_key`].
//!
//! Which snapshots a watch event queues besides the object's own key: a deleted content its snapshot
//! ([`content_sync::snapshot_woken_by_deleted_content`]); beyond upstream, a class added or changed the snapshots
//! waiting for it ([`default_class::snapshots_woken_by_class`]).

pub mod binding;
pub mod content_sync;
pub mod default_class;
pub mod deletion;
pub mod dynamic_content;
pub mod finalizers;
pub mod names;
pub mod patch;
pub mod reasons;
pub mod secrets;
pub mod source_volume;
pub mod status;
pub mod status_error;
pub mod validation;

#[cfg(test)]
mod fixtures;
