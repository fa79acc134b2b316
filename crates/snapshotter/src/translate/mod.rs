//! The snapshot rules as pure functions: plain inputs (snapshots, contents, classes, claims, volumes, CSI answers,
//! flags) to plain outputs (decisions, objects and patches to write, CSI requests, events). No I/O.
//!
//! - [`common`]: the snapshot-controller's rules (reference §3.1).
//! - [`sidecar`]: csi-snapshotter's rules (reference §3.2).

pub mod common;
pub mod sidecar;
