//! The group snapshot rules as pure functions: plain inputs (group snapshots, contents, classes, claims, volumes, CSI
//! answers, flags) to plain outputs (objects to write, CSI requests, decisions and events). No I/O.
//!
//! A dynamic group snapshot, in the order the two programs drive it:
//! 1. snapshot-controller: [`selection::select_volumes`] turns the label selector into the claims' volumes (every
//!    refusal an event naming the claim); without a class name, [`default_class::default_group_class`] picks the
//!    driver's default class.
//! 2. snapshot-controller: [`content::dynamic_content`] is the VolumeGroupSnapshotContent to create, with the
//!    deletion Secret of [`secrets::deletion_secret`].
//! 3. csi-snapshotter: [`create_request::create_group_snapshot_request`], CreateVolumeGroupSnapshot, and
//!    [`status::content_status_after_create`] for the answer.
//! 4. snapshot-controller: [`members`] gives each snapshot of the group its VolumeSnapshotContent and VolumeSnapshot,
//!    [`member_writes`] what to write to them; [`status::group_status`] carries the content's status to the group;
//!    [`status::needs_refresh`] keeps asking the driver until every member is ready (beyond upstream, which stops at
//!    the group's first answer).
//! 5. Deletion: [`deletion::group_deletion`] (snapshot-controller) and [`deletion::content_deletion`]
//!    (csi-snapshotter, with its DeleteVolumeGroupSnapshot request); a content left behind by a group snapshot that
//!    went before its finalizer was written goes by [`deletion::orphan_content_deletion`].
//!
//! A pre-provisioned group snapshot replaces steps 1–3: [`binding::bind_pre_provisioned`] binds it to the content it
//! names, and csi-snapshotter asks [`get_request::get_group_snapshot_request`] instead of creating
//! ([`status::driver_call`] says which call a content needs); step 4 makes no members for it
//! ([`members::controller_makes_members`]): its administrator creates them, owned by the group. Throughout, [`timing`] says which operations
//! `snapshot_controller_operation_total_seconds` times.
//!
//! Around the steps: [`queue_keys`] says which group snapshot a watched change concerns, [`filter`] which contents
//! csi-snapshotter handles, and [`patch`] holds every write of both loops as a value.

pub mod binding;
pub mod content;
pub mod crd_answer;
pub mod create_request;
pub mod default_class;
pub mod deletion;
pub mod filter;
pub mod get_request;
pub mod member_writes;
pub mod members;
pub mod names;
pub mod patch;
pub mod queue_keys;
pub mod secrets;
pub mod selection;
pub mod selector;
pub mod status;
pub mod timing;
