//! The end-to-end harness.
//!
//! Every test talks to the real control plane that `e2e/cluster.sh` runs
//! (etcd, kube-apiserver, kube-controller-manager on loopback), starts real
//! plugin and sidecar processes, works in a namespace of its own, waits with
//! bounded timeouts, and on failure prints the logs of every process it started.

pub mod api_proxy;
pub mod attacher_world;
pub mod audit;
pub mod backend;
pub mod bench;
pub mod chaos;
mod cluster;
pub mod conformance;
pub mod csimock;
pub mod driver_world;
pub mod group_world;
pub mod helm;
mod http;
mod namespace;
pub mod node;
pub mod node_driver;
pub mod plugin_command;
mod process;
pub mod provisioner_world;
mod rbac;
mod reference_grant_crd;
pub mod resizer_world;
pub mod shipped;
pub mod sidecar_mode;
mod snapshot_crds;
pub mod snapshot_world;
pub mod upstream_manifests;
mod wait;

pub use cluster::{Cluster, clean_up, repo_root};
pub use http::{free_port, http_get, try_http_get};
pub use namespace::TestNamespace;
pub use process::{PLUGIN_NODE_ID, Process, Scenario, binary};
pub use rbac::{Rules, Sidecar, SidecarIdentity, account_kubeconfig, policy_rule};
pub use reference_grant_crd::install_reference_grant_crd;
pub use snapshot_crds::install_snapshot_crds;
pub use wait::{eventually, wait_for};

pub use shipped::SHIPPED_BINARIES;
