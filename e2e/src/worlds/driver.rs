//! What every sidecar world starts with: a namespace, a plugin (the hostpath-plugin, or the one `E2E_PLUGIN_COMMAND`
//! names: crate::processes::plugin_command) under a driver name of its own, and the
//! ServiceAccount the world's sidecars run as (crate::processes::rbac).
//!
//! Sidecars watch the whole cluster; a driver name per test (`<namespace>.csi.e2e` unless the test needs a name
//! that means something) keeps each test's objects to its own processes.

use std::path::{Path, PathBuf};

use crate::control_plane::cluster::Cluster;
use crate::control_plane::namespace::TestNamespace;
use crate::processes::plugin_command::PluginRequest;
use crate::processes::rbac::{Sidecar, SidecarIdentity};
use crate::processes::scenario::{Process, Scenario};

/// The parts of a world that do not depend on the sidecar.
pub struct DriverWorld {
    pub client: kube::Client,
    pub ns: TestNamespace,
    pub scenario: Scenario,
    pub driver: String,
    pub socket: PathBuf,
    pub plugin: Process,
    pub identity: SidecarIdentity,
}

impl DriverWorld {
    /// Creates the namespace `e2e-<prefix>-…`, starts the plugin (with `plugin_args`) and makes the identity of
    /// `sidecar` with upstream's rules.
    pub async fn start(sidecar: Sidecar, prefix: &str, driver: Option<&str>, plugin_args: &[&str]) -> DriverWorld {
        let client = Cluster::shared().client().await;
        let ns = TestNamespace::create(&client, prefix).await;
        let derived_driver = format!("{}.csi.e2e", ns.name());
        let mut scenario = Scenario::new(&format!("{}-{prefix}", sidecar.account()));
        let request =
            PluginRequest { derived_driver: &derived_driver, required_driver: driver, hostpath_args: plugin_args };
        let (plugin, socket, driver) = scenario.plugin("hostpath-plugin", &request);
        let identity = SidecarIdentity::create(&client, ns.name(), sidecar, scenario.dir()).await;
        DriverWorld { client, ns, scenario, driver, socket, plugin, identity }
    }

    pub fn ns(&self) -> &str {
        self.ns.name()
    }

    /// csictl against this world's plugin, its JSON answer (`null` for a call that prints nothing).
    pub fn csictl(&self, args: &[&str]) -> serde_json::Value {
        csictl_at(&self.socket, args)
    }
}

/// csictl against the plugin at `socket`, its JSON answer (`null` for a call that prints nothing).
pub fn csictl_at(socket: &Path, args: &[&str]) -> serde_json::Value {
    let endpoint = format!("unix://{}", socket.display());
    let output = std::process::Command::new(crate::processes::scenario::binary("csictl"))
        .args(["--endpoint", &endpoint, "-o", "json"])
        .args(args)
        .output()
        .expect("run csictl");
    assert!(output.status.success(), "csictl {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    if output.stdout.iter().all(u8::is_ascii_whitespace) {
        return serde_json::Value::Null;
    }
    serde_json::from_slice(&output.stdout).expect("csictl prints JSON")
}
