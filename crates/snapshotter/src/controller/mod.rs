//! The I/O halves of the two snapshot binaries: watches, queues, API writes and (for csi-snapshotter) driver calls
//! that carry out what [`crate::translate`] decides.
//!
//! - [`common`]: the snapshot-controller.
//! - [`sidecar`]: csi-snapshotter's content controller.

pub mod common;
pub mod sidecar;
