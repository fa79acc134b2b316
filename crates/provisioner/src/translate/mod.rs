//! The provisioner's rules as pure functions: plain inputs (claims, classes, nodes, CSI messages, flags) to plain
//! outputs (decisions, CreateVolume requests, PersistentVolumes, refusals with the user-facing text). No I/O.
//!
//! A provisioning attempt, as the controller drives it:
//! 1. [`claim_filter::claim_decision`]: is the claim ours, and is it time? ([`migration`] first turns an in-tree
//!    class into its CSI form.)
//! 2. [`prepare::Preparation`]: what to read before CreateVolume, in upstream's order, and the rules between the
//!    reads ([`data_source`], [`create_volume`], [`reference_grant`], [`snapshot_source`], [`clone_source`],
//!    [`topology`], [`secrets`]), ending in the CreateVolume request.
//! 3. CreateVolume, and on failure [`refusal::create_volume_failure`].
//! 4. [`persistent_volume::persistent_volume`] for the answer; a PV of that name already there is looked at with
//!    [`pv_in_the_way`] (does it hold the new volume, or must the volume go?).
//!
//! Around it, [`in_flight_entry`] says what the in-flight journal remembers of a claim during CreateVolume and what
//! recovery does with each entry, and [`in_flight`] what the provisioning-protection finalizer (the journal's
//! fallback) asks for (beyond upstream: no volume is leaked when the claim goes away mid-call); [`deletion`]
//! decides what happens to a PersistentVolume. [`node_deployment`] adds the rules of `--node-deployment`: which
//! node's claims and volumes are this instance's. [`watch_keys`] says which watch change queues which key, and
//! [`capacity`] which CSIStorageCapacity objects should exist.

pub mod access_modes;
pub mod api_errors;
pub mod capacity;
pub mod claim_filter;
pub mod clone_source;
pub mod create_volume;
pub mod data_source;
pub mod deletion;
pub mod in_flight;
pub mod in_flight_entry;
pub mod migration;
pub mod names;
pub mod node_deployment;
pub mod parameters;
pub mod persistent_volume;
pub mod prepare;
pub mod provisioner;
pub mod pv_in_the_way;
pub mod reference_grant;
pub mod refusal;
pub mod secrets;
pub mod snapshot_source;
pub mod topology;
pub mod watch_keys;
