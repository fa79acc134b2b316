//! The `main`s of snapshot-controller, csi-snapshotter and csi-group-snapshotter, and the wiring of the last two
//! (`snapshotter::start`, `group_snapshotter::start`), which `csi-sidecars` runs too. They live apart from the
//! `snapshotter` and `group-snapshotter` crates because csi-snapshotter runs both loops (the group one behind
//! `--feature-gates=CSIVolumeGroupSnapshot=true`), and sidecar crates never depend on each other.

pub mod group_loop;
pub mod group_snapshotter;
pub mod snapshotter;
