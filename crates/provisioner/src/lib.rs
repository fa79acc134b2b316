//! csi-provisioner.
//!
//! - [`translate`]: the pure rules: which claims to provision, the CreateVolume request built from a claim and its
//!   StorageClass, and the PersistentVolume written from the answer. No I/O.
pub mod translate;
