//! The provisioner's rules as pure functions: plain inputs (claims, classes, nodes, CSI messages, flags) to plain
//! outputs (decisions, CreateVolume requests, PersistentVolumes, refusals with the user-facing text). No I/O.
//!
//! A provisioning attempt, as the controller drives it:
//! 1. [`claim_filter::claim_decision`]: is the claim ours, and is it time?
//! 2. [`data_source::claim_data_source`], then [`create_volume::create_volume_plan`]: every check needing no read.
//! 3. The controller resolves the content source, then [`topology::accessibility_requirements`],
//!    [`secrets::secret_references`] (and reads the provisioner Secret), and reads the VolumeAttributesClass.
//! 4. [`create_volume::create_volume_request`], CreateVolume, and on failure [`refusal::create_volume_failure`].
//! 5. [`persistent_volume::persistent_volume`] for the answer.
//!
//! Around it, [`in_flight_entry`] says what the in-flight journal remembers of a claim during CreateVolume and what
//! recovery does with each entry, and [`in_flight`] what the provisioning-protection finalizer (the journal's
//! fallback) asks for (beyond upstream: no volume is leaked when the claim goes away mid-call); [`deletion`] decides what happens to a PersistentVolume.
//! [`node_deployment`] adds the rules of `--node-deployment`: which node's claims and volumes are this instance's.

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
pub mod names;
pub mod node_deployment;
pub mod parameters;
pub mod persistent_volume;
pub mod provisioner;
pub mod reference_grant;
pub mod refusal;
pub mod secrets;
pub mod snapshot_source;
pub mod topology;
