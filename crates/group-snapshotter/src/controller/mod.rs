//! The I/O halves of the group rules: watches, queues and API writes that carry out what [`crate::translate`]
//! decides.
//!
//! - [`common`]: the snapshot-controller's group loop (run inside the snapshot-controller binary while the
//!   `CSIVolumeGroupSnapshot` gate is on, its default).
//! - [`sidecar`]: csi-snapshotter's group loop (and csi-group-snapshotter's, alone).

pub mod common;
pub mod sidecar;
