//! csi-external-health-monitor-controller: the health of a CSI driver's volumes reported on their claims, as upstream
//! external-health-monitor v0.18's controller does it (events `VolumeConditionAbnormal` and `VolumeConditionNormal`),
//! read through CSI v1.13's volume health calls, and written to the claim's `status.healthStatus` where the API
//! server keeps it.
//!
//! - [`translate`]: the pure rules. Plain inputs (PVs, claims, capabilities, CSI answers, what was reported before) to
//!   plain outputs (the mode, the events, the status write). No I/O.
//! - [`controller`]: watches, the queue or the listing task, driver calls and writes that drive those rules.
//! - [`flags`]: the upstream command line; [`start`]: the wiring.

pub mod controller;
pub mod flags;
pub mod start;
pub mod translate;
