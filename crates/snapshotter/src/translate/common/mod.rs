//! The snapshot-controller's rules (reference §3.1) as pure functions.
pub mod binding;
pub mod default_class;
pub mod dynamic_content;
pub mod finalizers;
pub mod names;
pub mod patch;
pub mod reasons;
pub mod secrets;
pub mod source_volume;
pub mod status_error;
pub mod validation;

#[cfg(test)]
mod fixtures;
