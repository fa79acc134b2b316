//! The `main`s of snapshot-controller, csi-snapshotter and csi-group-snapshotter, and the little that joins the
//! `snapshotter` and `group-snapshotter` crates (sidecar crates never depend on each other): csi-snapshotter and
//! snapshot-controller each run a loop of `snapshotter` with, behind `CSIVolumeGroupSnapshot`, one of
//! `group-snapshotter` beside it under the same Lease; csi-group-snapshotter reads csi-snapshotter's flags.
//! Each crate's own `start` builds its loops; this crate only puts them side by side.

pub mod group_snapshotter;
pub mod snapshot_controller;
pub mod snapshotter;
