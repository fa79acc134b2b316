//! The pure parts of `make chaos` (e2e/src/bin/chaos): which faults the plugin injects, how big a run is, which
//! claims each group snapshot takes, and the invariants checked once everything is quiet, and
//! which sidecar process made each call the plugin served. The binary does the I/O;
//! these modules decide and count.

pub mod calls;
pub mod fault_plan;
pub mod group_plan;
pub mod invariants;
pub mod sizes;
