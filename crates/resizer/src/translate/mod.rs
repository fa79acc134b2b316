//! The resizer's rules as pure functions. No I/O.
//!
//! One sync of a claim, as the controller drives it:
//! 1. [`capabilities`]: at startup, which jobs the driver allows.
//! 2. [`watch_filter`]: which watched change queues which claim.
//! 3. [`expansion`]: filter, decide, steps, request, result for ControllerExpandVolume.
//! 4. [`modification`]: filter, decide, steps, request, result for ControllerModifyVolume.
//!
//! Around them: [`steps`] (a sync's writes, events and logs as a list of values, and how a failed write is reported),
//! [`claim`] (what a claim and its volume say), [`conditions`], [`patch`] (the writes: strategic merge patches of a
//! claim's status and of a PV), [`call_failure`] (how a failed call is worded), [`memory`] (the controller's per-claim
//! memory as plain facts), [`secret_ref`], [`quantity`] and [`names`] (every upstream string).

pub mod call_failure;
pub mod capabilities;
pub mod claim;
pub mod conditions;
pub mod expansion;
pub mod memory;
pub mod modification;
pub mod names;
pub mod patch;
pub mod quantity;
pub mod secret_ref;
pub mod steps;
pub mod watch_filter;
