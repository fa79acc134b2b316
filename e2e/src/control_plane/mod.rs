//! The control plane the tests share and what they add to it: the cluster (`e2e/cluster.sh`), one namespace per
//! test, the API server's audit log, the API proxy that injects faults, and the CRDs tests install.

pub mod api_proxy;
pub mod audit;
pub mod cluster;
pub mod namespace;
pub mod reference_grant_crd;
pub mod snapshot_crds;
