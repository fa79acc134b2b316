//! The snapshot-controller's rules (reference §3.1) as pure functions.
pub mod default_class;
pub mod names;
pub mod patch;
pub mod reasons;
pub mod source_volume;
pub mod status_error;

#[cfg(test)]
mod fixtures;
