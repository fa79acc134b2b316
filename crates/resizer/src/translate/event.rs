//! Events the resizer records on a claim: type, upstream reason, upstream message.
//! The involved object is always the claim, as upstream.

pub use sidecar_runtime::events::{EventType, PlannedEvent as ClaimEvent};
