//! csi-resizer: volume expansion (ControllerExpandVolume) and volume modification through VolumeAttributesClass
//! (ControllerModifyVolume), as upstream external-resizer (kubernetes-csi/external-resizer) does them.
//!
//! - [`translate`]: the pure rules. Plain inputs (claims, volumes, classes, capabilities, flags, the controller's
//!   per-claim memory as plain facts) to plain outputs (actions, CSI requests, patches, events). No I/O.
//! - [`controller`]: watches, the work queue, driver calls and writes that drive those rules.
//! - [`flags`]: the upstream command line.

pub mod controller;
pub mod flags;
pub mod start;
pub mod translate;
