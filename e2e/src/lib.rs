//! The end-to-end harness.
//!
//! Every test talks to the real control plane that `e2e/cluster.sh` runs
//! (etcd, kube-apiserver, kube-controller-manager on loopback), starts real
//! plugin and sidecar processes, works in a namespace of its own, waits with
//! bounded timeouts, and on failure prints the logs of every process it started.
//!
//! - [`control_plane`]: the cluster, test namespaces, the audit log, the API proxy, the CRDs tests install;
//! - [`processes`]: the plugin and sidecar processes a test starts, the identities they run as, what ships;
//! - [`worlds`]: one sidecar's test setting each (driver, plugin, sidecars, the objects they serve);
//! - [`node`]: the node-backed cluster, the driver pods on it and upstream's manifests;
//! - [`charts`]: the Helm charts installed as a user installs them;
//! - [`kubernetes_suites`]: Kubernetes' own e2e.test suites run against our sidecars;
//! - [`chaos`]: the fault plans and invariants of `make chaos` (the binary is `src/bin/chaos`);
//! - [`http`], [`wait`]: small helpers every part uses.
//!
//! The benchmark (`make bench`) is the binary `src/bin/csi-bench`, its report included.

pub mod chaos;
pub mod charts;
pub mod control_plane;
pub mod http;
pub mod kubernetes_suites;
pub mod node;
pub mod processes;
pub mod wait;
pub mod worlds;
