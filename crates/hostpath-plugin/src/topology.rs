//! Topology: every volume lives on the node that serves it, named by one segment
//! `topology.hostpath.csi/node = <node id>`.

use std::collections::HashMap;

use csi_client::proto::{Topology, TopologyRequirement};
use tonic::Status;

/// The plugin's only topology key.
pub const NODE_KEY: &str = "topology.hostpath.csi/node";

/// The topology of this node (and of every volume it creates).
pub fn node_topology(node_id: &str) -> Topology {
    Topology { segments: HashMap::from([(NODE_KEY.to_string(), node_id.to_string())]) }
}

/// Whether `topology` describes this node: every segment it names must be this plugin's key with this
/// node's ID, since the plugin cannot satisfy keys it does not know.
pub fn is_this_node(topology: &Topology, node_id: &str) -> bool {
    topology.segments.iter().all(|(key, value)| key == NODE_KEY && value == node_id)
}

/// CreateVolume's accessibility requirements: when the caller lists requisite or preferred topologies,
/// one of them must be this node, or the volume cannot be provisioned here (RESOURCE_EXHAUSTED, which
/// tells a CO to try elsewhere).
pub fn check_requirement(requirement: Option<&TopologyRequirement>, node_id: &str) -> Result<(), Status> {
    let Some(requirement) = requirement else { return Ok(()) };
    let listed: Vec<&Topology> = requirement.requisite.iter().chain(&requirement.preferred).collect();
    if listed.is_empty() || listed.iter().any(|t| is_this_node(t, node_id)) {
        return Ok(());
    }
    Err(Status::resource_exhausted(format!(
        "volume can only be provisioned on node {node_id:?} ({NODE_KEY}={node_id}), which the accessibility requirements do not include"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topology(pairs: &[(&str, &str)]) -> Topology {
        Topology { segments: pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect() }
    }

    #[test]
    fn checks_requirements() {
        let here = topology(&[(NODE_KEY, "n1")]);
        let there = topology(&[(NODE_KEY, "n2")]);
        let zone = topology(&[("topology.kubernetes.io/zone", "a")]);
        let requirement =
            |requisite: Vec<Topology>, preferred: Vec<Topology>| TopologyRequirement { requisite, preferred };
        let cases: Vec<(Option<TopologyRequirement>, bool)> = vec![
            (None, true),
            (Some(requirement(vec![], vec![])), true),
            (Some(requirement(vec![here.clone()], vec![])), true),
            (Some(requirement(vec![there.clone(), here.clone()], vec![there.clone()])), true),
            (Some(requirement(vec![], vec![here.clone()])), true),
            (Some(requirement(vec![topology(&[])], vec![])), true),
            (Some(requirement(vec![there.clone()], vec![])), false),
            (Some(requirement(vec![], vec![there.clone()])), false),
            (Some(requirement(vec![zone], vec![])), false),
            (Some(requirement(vec![topology(&[(NODE_KEY, "n1"), ("rack", "r1")])], vec![])), false),
        ];
        for (requirement, ok) in cases {
            let got = check_requirement(requirement.as_ref(), "n1");
            assert_eq!(got.is_ok(), ok, "{requirement:?}");
            if let Err(status) = got {
                assert_eq!(status.code(), tonic::Code::ResourceExhausted);
            }
        }
    }
}
