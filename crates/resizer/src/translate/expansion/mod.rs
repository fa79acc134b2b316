//! Volume expansion (external-resizer pkg/controller): which claim updates matter ([`filter`]), which pods keep claims
//! in use ([`in_use`]), what one sync does ([`decide`]), in-tree PVs served through CSI migration ([`migration`]), the
//! ControllerExpandVolume request ([`request`]) and what its answer writes back ([`result`]), and the steps a sync
//! carries out ([`steps`]).

pub mod decide;
pub mod filter;
pub mod in_use;
pub mod migration;
pub mod request;
pub mod result;
pub mod steps;

#[cfg(test)]
mod tests;
