//! The snapshot rules as pure functions: plain inputs (snapshots, contents, classes, claims, volumes, CSI answers,
//! flags) to plain outputs (decisions, objects and patches to write, CSI requests, events). No I/O.
//!
//! - [`common`]: the snapshot-controller's rules (external-snapshotter pkg/common-controller).
//! - [`sidecar`]: csi-snapshotter's rules (external-snapshotter pkg/sidecar-controller).

pub mod common;
pub mod sidecar;
