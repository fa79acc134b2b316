//! csi-attacher: VolumeAttachments of its driver to ControllerPublishVolume and ControllerUnpublishVolume, as
//! upstream external-attacher v4.13 does them, with attach and detach in queues of their own.
//!
//! - [`translate`]: the pure rules. Plain inputs (VolumeAttachments, PVs, CSINodes, capabilities, flags, CSI
//!   answers) to plain outputs (decisions, CSI requests, writes as values). No I/O.
//! - [`controller`]: watches, the work queues, driver calls and writes that drive those rules.
//! - [`flags`]: the upstream command line; [`start`]: the wiring.

pub mod controller;
pub mod flags;
pub mod start;
pub mod translate;
