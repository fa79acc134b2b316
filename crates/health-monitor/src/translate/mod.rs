//! The health monitor's rules, pure. One check of a volume, in the order the workers take them:
//!
//! 1. [`mode`]: at start, from the driver's capabilities, whether health is listed or asked per volume.
//! 2. [`filter`]: which PVs are monitored (this driver's, bound) and which claim their reports go to.
//! 3. [`health`]: the driver's VolumeHealth as conditions, and what the check reports: the event, and the
//!    `status.healthStatus` write ([`patch`]) while the API server keeps it.
//! 4. [`names`]: upstream's reasons, texts, Lease and queue names.

pub mod filter;
pub mod health;
pub mod mode;
pub mod names;
pub mod patch;
