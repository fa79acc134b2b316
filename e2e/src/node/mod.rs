//! The node-backed cluster (`CLUSTER_NODE=1`): our images as pods on one kubelet (`pods`), hostpath-plugin with
//! our sidecars installed by the charts or by manifests (`driver`), and upstream's driver manifests with only the
//! images swapped (`upstream_manifests`).

pub mod driver;
pub mod pods;
pub mod upstream_manifests;
