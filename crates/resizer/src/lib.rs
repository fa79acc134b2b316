//! csi-resizer: the pure rules of volume expansion (ControllerExpandVolume) and volume modification through
//! VolumeAttributesClass (ControllerModifyVolume), as upstream external-resizer applies them
//! (../shared/reference/external-resizer.md §3 and §4). Plain inputs (claims, volumes, classes, capabilities, flags,
//! the controller's per-claim memory as plain facts) to plain outputs (actions, CSI requests, patches, events).
//! No I/O, except in [`controller`] (watches, the work queue, driver calls and writes) and [`flags`].
//!
//! - [`capabilities`]: which jobs the driver allows at startup.
//! - [`expansion`]: filter, decide, request, result for ControllerExpandVolume.
//! - [`modification`]: filter, decide, request, result for ControllerModifyVolume.
//! - [`patch`]: the writes (strategic merge patches of a claim's status and of a PV).
//! - [`names`]: every upstream string.

pub mod call_failure;
pub mod capabilities;
pub mod claim;
pub mod conditions;
pub mod controller;
pub mod event;
pub mod expansion;
pub mod flags;
pub mod memory;
pub mod modification;
pub mod names;
pub mod patch;
pub mod quantity;
pub mod secret_ref;
