//! Volume modification through VolumeAttributesClass (KEP-3751; external-resizer pkg/modifycontroller): which claim
//! updates matter ([`filter`]), the state machine ([`decide`]), the ControllerModifyVolume request ([`request`]) and
//! what its answer writes back ([`result`]), and the steps a sync carries out ([`steps`]).

pub mod decide;
pub mod filter;
pub mod request;
pub mod result;
pub mod steps;

#[cfg(test)]
mod tests;
