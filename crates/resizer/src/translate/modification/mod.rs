//! Volume modification through VolumeAttributesClass (reference §4, KEP-3751): which claim updates matter
//! ([`filter`]), the state machine ([`decide`]), the ControllerModifyVolume request ([`request`]) and what its answer
//! writes back ([`result`]).

pub mod decide;
pub mod filter;
pub mod request;
pub mod result;
pub mod steps;

#[cfg(test)]
mod tests;
