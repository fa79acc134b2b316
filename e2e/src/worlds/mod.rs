//! One test setting per sidecar: a namespace, a plugin under a driver name of its own, the sidecars under test
//! and helpers over the objects they serve. `driver` is what every world starts with; `backend` reads the plugin
//! as a storage backend.

pub mod attacher;
pub mod backend;
pub mod driver;
pub mod group;
pub mod provisioner;
pub mod resizer;
pub mod snapshot;
