//! Distributed provisioning (`--node-deployment`; external-provisioner `checkNode`, `becomeOwner` and the node check of
//! `Delete`, pkg/controller/controller.go): one provisioner per node next to the driver, each responsible only for
//! volumes of its own node.
//!
//! - The node's topology is what NodeGetInfo answered, served through a fixed Node and CSINode
//!   ([`NodeDeployment::local_node`], [`NodeDeployment::local_csi_node`]) so that no instance watches every Node.
//! - A claim whose selected node is this node is provisioned here; any other selected node is another instance's
//!   business ([`node_check`]).
//! - An Immediate claim has no selected node: the instances race to write theirs into it, after a jittered delay
//!   ([`ownership_delay`]), a capacity check ([`capacity_sufficient`]) and a topology check. The write is an Update
//!   carrying the resourceVersion, so of two writers one gets a Conflict and loses.
//! - A PV whose node affinity does not match this node is another instance's to delete ([`volume_is_local`]).

use std::time::Duration;

use csi_client::proto::{Topology, TopologyRequirement};
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::{CSINode, CSINodeDriver, CSINodeSpec, StorageClass};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use sidecar_runtime::node_affinity::term_matches;

use super::claim_filter::selected_node;
use super::names::{ANN_SELECTED_NODE, BINDING_WAIT_FOR_FIRST_CONSUMER};
pub use super::provisioner::NodeDeployment;
use super::provisioner::Provisioner;
use super::topology::{TopologyInput, TopologyPin, accessibility_requirements};

/// The poll interval while waiting (a hundredth of the base delay) never drops below this.
const MIN_POLL_INTERVAL: Duration = Duration::from_millis(10);

impl NodeDeployment {
    /// The Node the topology rules see for this instance: named after `NODE_NAME`, labelled with the segments.
    pub fn local_node(&self) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(self.node_name.clone()),
                labels: Some(self.topology.clone()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// The CSINode the topology rules see: the driver registered with the segments' keys.
    pub fn local_csi_node(&self, driver_name: &str) -> CSINode {
        CSINode {
            metadata: ObjectMeta { name: Some(self.node_name.clone()), ..Default::default() },
            spec: CSINodeSpec {
                drivers: vec![CSINodeDriver {
                    name: driver_name.to_string(),
                    node_id: self.node_id.clone(),
                    topology_keys: Some(self.topology.keys().cloned().collect()),
                    allocatable: None,
                }],
            },
        }
    }

    /// How often to look whether another instance took a claim while waiting: max(base/100, 10ms).
    pub fn poll_interval(&self) -> Duration {
        (self.base_delay / 100).max(MIN_POLL_INTERVAL)
    }
}

/// What node mode says about a claim the general rules would provision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeCheck {
    /// The claim's selected node is this node: provision it here.
    Provision,
    /// Immediate binding and no node yet: try to become its owner (`--node-deployment-immediate-binding`).
    Compete,
    /// Someone else's claim, or one this instance must not take; no event, no retry.
    NotOurs(String),
}

/// Node mode's verdict for a claim `claim_decision` would provision, given its selected node (`None` for
/// Immediate binding without one) and class. `provisioner.node_deployment` must be set.
pub fn node_check(selected_node: Option<&str>, class: &StorageClass, provisioner: &Provisioner) -> NodeCheck {
    let Some(local) = &provisioner.node_deployment else { return NodeCheck::Provision };
    match selected_node {
        Some(node) if node == local.node_name => NodeCheck::Provision,
        Some(node) => NodeCheck::NotOurs(format!("assigned to node {node:?}, not {:?}", local.node_name)),
        None if class.volume_binding_mode.as_deref() == Some(BINDING_WAIT_FOR_FIRST_CONSUMER) => {
            NodeCheck::NotOurs("waiting for a selected node".to_string())
        }
        None if !local.immediate_binding => {
            NodeCheck::NotOurs("Immediate binding is off (--node-deployment-immediate-binding=false)".to_string())
        }
        None => match allowed_topologies_compatible(class, provisioner, local) {
            Ok(()) => NodeCheck::Compete,
            Err(message) => NodeCheck::NotOurs(format!("allowedTopologies do not fit this node: {message}")),
        },
    }
}

/// The class's allowedTopologies admit this node: the requirements for a volume on this node can be built from
/// them, as upstream finds out. Without topology support or allowedTopologies, every node fits.
fn allowed_topologies_compatible(
    class: &StorageClass,
    provisioner: &Provisioner,
    local: &NodeDeployment,
) -> Result<(), String> {
    let allowed = class.allowed_topologies.as_deref().unwrap_or_default();
    if allowed.is_empty() || !provisioner.supports_topology() {
        return Ok(());
    }
    let (csi_nodes, nodes) = ([local.local_csi_node(&provisioner.driver_name)], [local.local_node()]);
    let input = TopologyInput {
        driver_name: &provisioner.driver_name,
        claim_name: "",
        allowed_topologies: allowed,
        selected_node: Some(&local.node_name),
        strict_topology: provisioner.strict_topology,
        immediate_topology: provisioner.immediate_topology,
        csi_nodes: &csi_nodes,
        nodes: &nodes,
    };
    accessibility_requirements(&input, &mut TopologyPin::default()).map(drop).map_err(|refusal| refusal.message)
}

/// Whether this instance looks after the in-flight volume of a claim carrying the provisioning finalizer (see
/// [`super::in_flight`]): in node mode only the instance of the claim's selected node, which provisioned it; any
/// other would create and delete a volume on its own node while recovering.
pub fn tends_in_flight_volume(claim: &PersistentVolumeClaim, provisioner: &Provisioner) -> bool {
    provisioner
        .node_deployment
        .as_ref()
        .is_none_or(|local| selected_node(claim).as_deref() == Some(local.node_name.as_str()))
}

/// Where a claim stands in the ownership race, read from the latest cached copy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Contest {
    /// No node selected and not bound: still to be taken.
    Open,
    /// Another instance's node is selected: it won.
    Taken(String),
    /// This node is selected already.
    Mine,
    /// The claim is bound to a volume: nothing to own.
    Bound,
}

/// The claim's state in the race. Only `volume.kubernetes.io/selected-node` counts, as upstream reads it.
pub fn contest(claim: &PersistentVolumeClaim, node_name: &str) -> Contest {
    if claim.spec.as_ref().and_then(|s| s.volume_name.as_deref()).is_some_and(|v| !v.is_empty()) {
        return Contest::Bound;
    }
    let selected = claim.metadata.annotations.as_ref().and_then(|a| a.get(ANN_SELECTED_NODE));
    match selected.map(String::as_str) {
        None | Some("") => Contest::Open,
        Some(node) if node == node_name => Contest::Mine,
        Some(node) => Contest::Taken(node.to_string()),
    }
}

/// The claim with this node written as its selected node; it keeps the cached resourceVersion, so the Update
/// fails with Conflict if anyone changed the claim since.
pub fn claim_selecting(claim: &PersistentVolumeClaim, node_name: &str) -> PersistentVolumeClaim {
    let mut claim = claim.clone();
    claim.metadata.annotations.get_or_insert_default().insert(ANN_SELECTED_NODE.to_string(), node_name.to_string());
    claim
}

/// How long to wait before trying to own a claim: `base × 2^attempts` capped at `max`, minus `jitter × base`
/// (never negative), as upstream's jittered rate limiter. `attempts` counts earlier tries at this claim without a
/// decision (a Conflict, too little capacity); `jitter` is a random number in [0, 1). The first try waits a random
/// time in (0, base].
pub fn ownership_delay(base: Duration, max: Duration, attempts: u32, jitter: f64) -> Duration {
    let factor = 2u32.checked_pow(attempts).unwrap_or(u32::MAX);
    let backoff = base.checked_mul(factor).unwrap_or(max).min(max);
    backoff.saturating_sub(base.mul_f64(jitter.clamp(0.0, 1.0)))
}

/// The topologies to ask GetCapacity about: each requisite topology, or once without one.
pub fn capacity_topologies(requirement: Option<&TopologyRequirement>) -> Vec<Option<Topology>> {
    match requirement {
        Some(r) if !r.requisite.is_empty() => r.requisite.iter().cloned().map(Some).collect(),
        _ => vec![None],
    }
}

/// Whether one of the answers has room for `required_bytes`; a claim asking for nothing always fits.
pub fn capacity_sufficient(required_bytes: i64, available: &[i64]) -> bool {
    required_bytes <= 0 || available.iter().any(|a| required_bytes <= *a)
}

/// Whether the PV can be used on this node, i.e. this instance created it and deletes it: its required node affinity
/// matches a node labelled with this node's segments. No affinity, or no topology from the driver, matches.
pub fn volume_is_local(volume: &PersistentVolume, local: &NodeDeployment) -> bool {
    let required = volume.spec.as_ref().and_then(|s| s.node_affinity.as_ref()).and_then(|a| a.required.as_ref());
    let Some(required) = required else { return true };
    if local.topology.is_empty() {
        return true;
    }
    required.node_selector_terms.iter().any(|term| term_matches(term, &local.topology, &local.node_name))
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use csi_client::capabilities::{PluginCapabilities, PluginService};
    use k8s_openapi::api::core::v1::{
        NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PersistentVolumeClaimSpec, PersistentVolumeSpec,
        TopologySelectorLabelRequirement, TopologySelectorTerm, VolumeNodeAffinity,
    };

    use super::*;

    const DRIVER: &str = "hostpath.csi.k8s.io";
    const KEY: &str = "topology.hostpath.csi/node";
    const ZONE: &str = "topology.kubernetes.io/zone";

    fn local(immediate_binding: bool) -> NodeDeployment {
        NodeDeployment {
            node_name: "node-a".into(),
            node_id: "id-a".into(),
            topology: BTreeMap::from([(KEY.into(), "node-a".into()), (ZONE.into(), "z1".into())]),
            immediate_binding,
            base_delay: Duration::from_secs(20),
            max_delay: Duration::from_secs(60),
        }
    }

    fn provisioner(local: Option<NodeDeployment>, topology: bool) -> Provisioner {
        let mut p = Provisioner::new(DRIVER);
        if topology {
            p.plugin_capabilities = PluginCapabilities {
                services: BTreeSet::from([PluginService::VolumeAccessibilityConstraints]),
                ..Default::default()
            };
        }
        p.node_deployment = local;
        p
    }

    fn class(mode: Option<&str>, allowed: &[(&str, &[&str])]) -> StorageClass {
        StorageClass {
            metadata: ObjectMeta { name: Some("fast".into()), ..Default::default() },
            provisioner: DRIVER.into(),
            volume_binding_mode: mode.map(str::to_string),
            allowed_topologies: (!allowed.is_empty()).then(|| {
                vec![TopologySelectorTerm {
                    match_label_expressions: Some(
                        allowed
                            .iter()
                            .map(|(k, values)| TopologySelectorLabelRequirement {
                                key: k.to_string(),
                                values: values.iter().map(|v| v.to_string()).collect(),
                            })
                            .collect(),
                    ),
                }]
            }),
            ..Default::default()
        }
    }

    #[test]
    fn which_claims_this_node_takes() {
        let immediate = class(Some("Immediate"), &[]);
        let late = class(Some("WaitForFirstConsumer"), &[]);
        let not_ours = |text: &str| NodeCheck::NotOurs(text.to_string());
        // (rule, selected node, class, provisioner, verdict)
        let table = [
            (
                "71: late binding on this node",
                Some("node-a"),
                &late,
                provisioner(Some(local(true)), true),
                NodeCheck::Provision,
            ),
            (
                "71: late binding on another node",
                Some("node-b"),
                &late,
                provisioner(Some(local(true)), true),
                not_ours("assigned to node \"node-b\", not \"node-a\""),
            ),
            (
                "71: late binding without a node waits",
                None,
                &late,
                provisioner(Some(local(true)), true),
                not_ours("waiting for a selected node"),
            ),
            (
                "72: Immediate owned by this node",
                Some("node-a"),
                &immediate,
                provisioner(Some(local(true)), true),
                NodeCheck::Provision,
            ),
            (
                "72: Immediate owned by another node",
                Some("node-b"),
                &immediate,
                provisioner(Some(local(true)), true),
                not_ours("assigned to node \"node-b\", not \"node-a\""),
            ),
            (
                "72: Immediate without owner: compete",
                None,
                &immediate,
                provisioner(Some(local(true)), true),
                NodeCheck::Compete,
            ),
            (
                "72: unset binding mode is Immediate",
                None,
                &class(None, &[]),
                provisioner(Some(local(true)), true),
                NodeCheck::Compete,
            ),
            (
                "72: --node-deployment-immediate-binding=false leaves Immediate claims alone",
                None,
                &immediate,
                provisioner(Some(local(false)), true),
                not_ours("Immediate binding is off (--node-deployment-immediate-binding=false)"),
            ),
            (
                "72: allowedTopologies including this node's zone",
                None,
                &class(Some("Immediate"), &[(ZONE, &["z2", "z1"])]),
                provisioner(Some(local(true)), true),
                NodeCheck::Compete,
            ),
            (
                "72: allowedTopologies excluding this node",
                None,
                &class(Some("Immediate"), &[(KEY, &["node-b"])]),
                provisioner(Some(local(true)), true),
                not_ours(
                    "allowedTopologies do not fit this node: error generating accessibility requirements: topology [{topology.hostpath.csi/node node-a} {topology.kubernetes.io/zone z1}] from selected node \"node-a\" is not in requisite: [[{topology.hostpath.csi/node node-b}]]",
                ),
            ),
            (
                "72: allowedTopologies ignored without topology support",
                None,
                &class(Some("Immediate"), &[(KEY, &["node-b"])]),
                provisioner(Some(local(true)), false),
                NodeCheck::Compete,
            ),
            (
                "central deployment: always provision",
                Some("node-b"),
                &late,
                provisioner(None, true),
                NodeCheck::Provision,
            ),
        ];
        for (rule, selected, class, provisioner, want) in table {
            assert_eq!(node_check(selected, class, &provisioner), want, "{rule}");
        }
    }

    #[test]
    fn strict_topology_checks_allowed_topologies_too() {
        let mut p = provisioner(Some(local(true)), true);
        p.strict_topology = true;
        let fits = class(Some("Immediate"), &[(ZONE, &["z1"])]);
        let misses = class(Some("Immediate"), &[(ZONE, &["z9"])]);
        assert_eq!(node_check(None, &fits, &p), NodeCheck::Compete, "72: strict, zone allowed");
        assert!(matches!(node_check(None, &misses, &p), NodeCheck::NotOurs(_)), "72: strict, zone not allowed");
    }

    #[test]
    fn local_topology_objects() {
        let local = local(true);
        let node = local.local_node();
        assert_eq!(node.metadata.name.as_deref(), Some("node-a"));
        assert_eq!(node.metadata.labels, Some(local.topology.clone()), "70: labels are the NodeGetInfo segments");
        let csi_node = local.local_csi_node(DRIVER);
        assert_eq!(csi_node.metadata.name.as_deref(), Some("node-a"));
        let driver = &csi_node.spec.drivers[0];
        assert_eq!((driver.name.as_str(), driver.node_id.as_str()), (DRIVER, "id-a"));
        assert_eq!(driver.topology_keys, Some(vec![KEY.to_string(), ZONE.to_string()]), "70: keys of the segments");
    }

    fn claim(selected: Option<&str>, volume: Option<&str>) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("data".into()),
                resource_version: Some("42".into()),
                annotations: selected.map(|n| BTreeMap::from([(ANN_SELECTED_NODE.to_string(), n.to_string())])),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec { volume_name: volume.map(str::to_string), ..Default::default() }),
            ..Default::default()
        }
    }

    #[test]
    fn ownership_race_state() {
        // (rule, claim, state)
        let table = [
            ("72: no annotation is open", claim(None, None), Contest::Open),
            ("72: an empty annotation is open", claim(Some(""), None), Contest::Open),
            ("72: another node won", claim(Some("node-b"), None), Contest::Taken("node-b".into())),
            ("72: this node is selected", claim(Some("node-a"), None), Contest::Mine),
            ("72: a bound claim needs no owner", claim(None, Some("pv-1")), Contest::Bound),
        ];
        for (rule, claim, want) in table {
            assert_eq!(contest(&claim, "node-a"), want, "{rule}");
        }
        // (rule, claim, node mode, tends the in-flight volume)
        let in_flight = [
            ("central deployment tends every claim", claim(Some("node-b"), None), None, true),
            ("node mode: the selected node's instance", claim(Some("node-a"), None), Some(local(true)), true),
            ("node mode: another node's claim", claim(Some("node-b"), None), Some(local(true)), false),
            ("node mode: no node selected", claim(None, None), Some(local(true)), false),
        ];
        for (rule, claim, local, want) in in_flight {
            assert_eq!(tends_in_flight_volume(&claim, &provisioner(local, true)), want, "{rule}");
        }
        let updated = claim_selecting(&claim(None, None), "node-a");
        assert_eq!(contest(&updated, "node-a"), Contest::Mine);
        assert_eq!(updated.metadata.resource_version.as_deref(), Some("42"), "72: the Update is conditional");
    }

    #[test]
    fn delays() {
        let s = Duration::from_secs;
        let ms = Duration::from_millis;
        // (rule, base, max, attempts, jitter, delay)
        let table = [
            ("72: first try without jitter waits base", s(20), s(60), 0, 0.0, s(20)),
            ("72: first try waits base minus jitter", s(20), s(60), 0, 0.25, s(15)),
            ("72: full jitter on the first try is no wait", s(20), s(60), 0, 1.0, s(0)),
            ("72: second try doubles", s(20), s(60), 1, 0.5, s(30)),
            ("72: backoff capped at max", s(20), s(60), 5, 0.0, s(60)),
            ("72: huge attempt counts stay capped", s(20), s(60), 200, 0.5, s(50)),
            ("72: jitter beyond the backoff floors at zero", s(20), s(10), 0, 0.9, s(0)),
            ("72: sub-second base", ms(1000), ms(2000), 1, 0.5, ms(1500)),
        ];
        for (rule, base, max, attempts, jitter, want) in table {
            assert_eq!(ownership_delay(base, max, attempts, jitter), want, "{rule}");
        }
        let mut l = local(true);
        assert_eq!(l.poll_interval(), ms(200), "72: base/100");
        l.base_delay = ms(500);
        assert_eq!(l.poll_interval(), ms(10), "72: at least 10ms");
    }

    #[test]
    fn capacity() {
        // (rule, required, available answers, sufficient)
        let table: [(&str, i64, &[i64], bool); 5] = [
            ("72: fits", 10, &[10], true),
            ("72: too little", 11, &[10], false),
            ("72: one topology with room is enough", 11, &[5, 20], true),
            ("72: a zero-size claim always fits", 0, &[0], true),
            ("72: no answers, no room", 1, &[], false),
        ];
        for (rule, required, available, want) in table {
            assert_eq!(capacity_sufficient(required, available), want, "{rule}");
        }
        let topology = |v: &str| Topology { segments: [(KEY.to_string(), v.to_string())].into() };
        assert_eq!(capacity_topologies(None), vec![None], "72: once without topology");
        let requirement = TopologyRequirement { requisite: vec![topology("a"), topology("b")], preferred: vec![] };
        assert_eq!(capacity_topologies(Some(&requirement)), vec![Some(topology("a")), Some(topology("b"))]);
    }

    /// A node selector term as (key, operator, values) requirements.
    type Term<'a> = Vec<(&'a str, &'a str, &'a [&'a str])>;

    fn volume(terms: Option<Vec<Term<'_>>>) -> PersistentVolume {
        let affinity = terms.map(|terms| VolumeNodeAffinity {
            required: Some(NodeSelector {
                node_selector_terms: terms
                    .into_iter()
                    .map(|exprs| NodeSelectorTerm {
                        match_expressions: Some(
                            exprs
                                .into_iter()
                                .map(|(key, op, values)| NodeSelectorRequirement {
                                    key: key.into(),
                                    operator: op.into(),
                                    values: Some(values.iter().map(|v| v.to_string()).collect()),
                                })
                                .collect(),
                        ),
                        match_fields: None,
                    })
                    .collect(),
            }),
        });
        PersistentVolume {
            spec: Some(PersistentVolumeSpec { node_affinity: affinity, ..Default::default() }),
            ..Default::default()
        }
    }

    #[test]
    fn which_volumes_this_node_deletes() {
        let mut without_topology = local(true);
        without_topology.topology.clear();
        // (rule, volume, node, local)
        let table = [
            ("63: affinity to this node", volume(Some(vec![vec![(KEY, "In", &["node-a"])]])), local(true), true),
            ("63: affinity to another node", volume(Some(vec![vec![(KEY, "In", &["node-b"])]])), local(true), false),
            (
                "63: expressions of a term are ANDed",
                volume(Some(vec![vec![(KEY, "In", &["node-a"]), (ZONE, "In", &["z2"])]])),
                local(true),
                false,
            ),
            (
                "63: terms are ORed",
                volume(Some(vec![vec![(KEY, "In", &["node-b"])], vec![(ZONE, "In", &["z1"])]])),
                local(true),
                true,
            ),
            ("63: NotIn", volume(Some(vec![vec![(KEY, "NotIn", &["node-b"])]])), local(true), true),
            ("63: Exists", volume(Some(vec![vec![(ZONE, "Exists", &[])]])), local(true), true),
            ("63: DoesNotExist", volume(Some(vec![vec![(ZONE, "DoesNotExist", &[])]])), local(true), false),
            ("63: an empty term matches nothing", volume(Some(vec![vec![]])), local(true), false),
            ("63: no affinity: accessible everywhere", volume(None), local(true), true),
            (
                "63: no topology from the driver: every volume",
                volume(Some(vec![vec![(KEY, "In", &["node-b"])]])),
                without_topology,
                true,
            ),
        ];
        for (rule, volume, local, want) in table {
            assert_eq!(volume_is_local(&volume, &local), want, "{rule}");
        }
    }
}
