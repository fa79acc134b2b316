//! The `main`s of snapshot-controller and csi-snapshotter. They live apart from the `snapshotter` and
//! `group-snapshotter` crates because each binary runs both loops (the group one behind
//! `--feature-gates=CSIVolumeGroupSnapshot=true`), and sidecar crates never depend on each other.

pub mod group_loop;
