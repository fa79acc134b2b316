//! What the translation rules need to know about this provisioner: the driver, its capabilities, the flags.

use std::collections::BTreeMap;
use std::time::Duration;

use csi_client::capabilities::{ControllerCapabilities, ControllerCapability, PluginCapabilities, PluginService};

/// The provisioner's feature gates (`--feature-gates`), with upstream defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Features {
    /// `Topology`, GA.
    pub topology: bool,
    /// `VolumeAttributesClass`, GA.
    pub volume_attributes_class: bool,
    /// `CrossNamespaceVolumeDataSource`, alpha.
    pub cross_namespace_volume_data_source: bool,
}

impl Default for Features {
    fn default() -> Features {
        Features { topology: true, volume_attributes_class: true, cross_namespace_volume_data_source: false }
    }
}

/// The driver as discovered at startup plus the flags that shape requests and volumes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Provisioner {
    /// From GetPluginInfo; also the provisioner name claims and classes must carry.
    pub driver_name: String,
    /// The in-tree provisioner name this driver takes over (CSI migration), also accepted on claims and classes.
    pub migrated_in_tree_name: Option<String>,
    /// Written into every PV's volume attributes (see [`provisioner_identity`]).
    pub identity: String,
    /// `--volume-name-prefix`
    pub volume_name_prefix: String,
    /// `--volume-name-uuid-length`; -1 keeps the whole UID.
    pub volume_name_uuid_length: i64,
    /// `--default-fstype`
    pub default_fs_type: String,
    /// `--extra-create-metadata`
    pub extra_create_metadata: bool,
    /// `--controller-publish-readonly`
    pub controller_publish_readonly: bool,
    /// `--strict-topology`
    pub strict_topology: bool,
    /// `--immediate-topology`
    pub immediate_topology: bool,
    /// `--prevent-volume-mode-conversion`
    pub prevent_volume_mode_conversion: bool,
    pub plugin_capabilities: PluginCapabilities,
    pub controller_capabilities: ControllerCapabilities,
    pub features: Features,
    /// `--node-deployment`: this instance's node; `None` for the usual central deployment.
    pub node_deployment: Option<NodeDeployment>,
}

impl Provisioner {
    /// A provisioner for `driver_name` with every flag at its upstream default and no capabilities.
    pub fn new(driver_name: impl Into<String>) -> Provisioner {
        Provisioner {
            driver_name: driver_name.into(),
            migrated_in_tree_name: None,
            identity: String::new(),
            volume_name_prefix: "pvc".to_string(),
            volume_name_uuid_length: -1,
            default_fs_type: String::new(),
            extra_create_metadata: false,
            controller_publish_readonly: false,
            strict_topology: false,
            immediate_topology: true,
            prevent_volume_mode_conversion: true,
            plugin_capabilities: PluginCapabilities::default(),
            controller_capabilities: ControllerCapabilities::default(),
            features: Features::default(),
            node_deployment: None,
        }
    }

    /// The driver reports VOLUME_ACCESSIBILITY_CONSTRAINTS and the Topology gate is on: only then are CSINodes and
    /// Nodes watched and accessibility requirements sent.
    pub fn supports_topology(&self) -> bool {
        self.features.topology && self.plugin_capabilities.has(PluginService::VolumeAccessibilityConstraints)
    }

    pub fn has(&self, capability: ControllerCapability) -> bool {
        self.controller_capabilities.has(capability)
    }

    /// The driver name, or the in-tree name it migrates.
    pub fn is_known_provisioner(&self, name: &str) -> bool {
        name == self.driver_name || self.migrated_in_tree_name.as_deref() == Some(name)
    }
}

/// `<unix-millis>-<random 0..9999>-<driver>[-<node>]`, the identity upstream writes into each PV's volume attributes;
/// the node is appended in `--node-deployment` mode.
pub fn provisioner_identity(unix_millis: i64, random: u32, driver_name: &str, node_name: Option<&str>) -> String {
    let mut identity = format!("{unix_millis}-{}-{driver_name}", random % 10_000);
    if let Some(node) = node_name {
        identity.push('-');
        identity.push_str(node);
    }
    identity
}

/// This instance's node, from `NODE_NAME` and NodeGetInfo, and the `--node-deployment-*` flags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeDeployment {
    /// `NODE_NAME`: the Kubernetes node this instance serves, written as the claims' selected node.
    pub node_name: String,
    /// NodeGetInfo `node_id`.
    pub node_id: String,
    /// NodeGetInfo `accessible_topology` segments; empty when the driver reported none.
    pub topology: BTreeMap<String, String>,
    /// `--node-deployment-immediate-binding`
    pub immediate_binding: bool,
    /// `--node-deployment-base-delay`
    pub base_delay: Duration,
    /// `--node-deployment-max-delay`
    pub max_delay: Duration,
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn identity_format() {
        // (rule, millis, random, node, identity)
        let table = [
            ("9: millis-random-driver", 1_700_000_000_123, 42, None, "1700000000123-42-hostpath.csi.k8s.io"),
            ("70: node mode appends the node", 5, 9999, Some("node-1"), "5-9999-hostpath.csi.k8s.io-node-1"),
            ("9: random below 10000", 5, 12_345, None, "5-2345-hostpath.csi.k8s.io"),
        ];
        for (rule, millis, random, node, want) in table {
            assert_eq!(provisioner_identity(millis, random, "hostpath.csi.k8s.io", node), want, "{rule}");
        }
    }

    #[test]
    fn topology_needs_capability_and_gate() {
        let with = PluginCapabilities {
            services: BTreeSet::from([PluginService::ControllerService, PluginService::VolumeAccessibilityConstraints]),
            ..Default::default()
        };
        // (rule, capabilities, gate, supported)
        let table = [
            ("44: capability and gate", with.clone(), true, true),
            ("44: gate off", with, false, false),
            ("44: no capability", PluginCapabilities::default(), true, false),
        ];
        for (rule, caps, gate, want) in table {
            let mut p = Provisioner::new("d");
            p.plugin_capabilities = caps;
            p.features.topology = gate;
            assert_eq!(p.supports_topology(), want, "{rule}");
        }
    }
}
