//! csi-provisioner.
//!
//! - [`translate`]: the pure rules: which claims to provision, the CreateVolume request built from a claim and its
//!   StorageClass, the PersistentVolume written from the answer, what a PV's reclaim policy asks for. No I/O.
//! - [`controller`]: watches, queues, CSI calls and API writes that drive those rules.
//! - [`flags`]: the upstream command line.
pub mod controller;
pub mod flags;
pub mod start;
pub mod translate;
