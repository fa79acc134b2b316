//! The I/O halves of the snapshot binaries: watches, queues, driver calls and writes. Every rule lives in
//! [`crate::translate`]; these modules read the caches, hand plain values to the rules and carry out what they say.
//!
//! - [`sidecar`]: csi-snapshotter's content controller.

pub mod sidecar;
