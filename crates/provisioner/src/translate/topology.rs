//! Where a volume may be created (CreateVolume `accessibility_requirements`) and where it can be used (the PV's
//! `nodeAffinity`), as external-provisioner pkg/controller/topology.go computes them
//! (`GenerateAccessibilityRequirements`, `GenerateVolumeNodeAffinity`).

use std::collections::BTreeMap;
use std::fmt;

use csi_client::proto::{Topology, TopologyRequirement};
use k8s_openapi::api::core::v1::{
    Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, TopologySelectorTerm, VolumeNodeAffinity,
};
use k8s_openapi::api::storage::v1::CSINode;

use super::refusal::{ProvisioningState, Refusal, go_quoted};

/// Segments that must all hold (an AND of key = value), sorted by key.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopologyTerm(Vec<(String, String)>);

impl TopologyTerm {
    pub fn new(segments: impl IntoIterator<Item = (String, String)>) -> TopologyTerm {
        let mut segments: Vec<_> = segments.into_iter().collect();
        segments.sort();
        TopologyTerm(segments)
    }

    pub fn segments(&self) -> &[(String, String)] {
        &self.0
    }

    /// Upstream's order: shorter terms first, then segment by segment.
    fn compare(&self, other: &TopologyTerm) -> std::cmp::Ordering {
        self.0.len().cmp(&other.0.len()).then_with(|| self.0.cmp(&other.0))
    }

    /// Every segment of `self` is in `other`.
    fn is_subset_of(&self, other: &TopologyTerm) -> bool {
        self.0.iter().all(|segment| other.0.contains(segment))
    }

    fn to_csi(&self) -> Topology {
        Topology { segments: self.0.iter().cloned().collect() }
    }
}

/// Go's `%v` of a term: `[{key value} {key value}]`.
impl fmt::Display for TopologyTerm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(|(k, v)| format!("{{{k} {v}}}")).collect();
        write!(f, "[{}]", parts.join(" "))
    }
}

fn go_list<T: fmt::Display>(items: &[T]) -> String {
    let parts: Vec<String> = items.iter().map(ToString::to_string).collect();
    format!("[{}]", parts.join(" "))
}

fn go_map(map: &BTreeMap<String, String>) -> String {
    let parts: Vec<String> = map.iter().map(|(k, v)| format!("{k}:{v}")).collect();
    format!("map[{}]", parts.join(" "))
}

/// What one claim's topology was computed from, kept by the controller per claim UID so that retries send the same
/// requirements even when nodes change meanwhile (as upstream's `InMemoryStore`, external-provisioner
/// pkg/controller/cache.go). Start from `Default`; drop it on success, on a final error and on reschedule.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TopologyPin {
    pub topology_keys: Vec<String>,
    pub node_labels: BTreeMap<String, String>,
    pub requisite_terms: Vec<TopologyTerm>,
}

/// The cluster as the topology rules see it.
#[derive(Clone, Copy, Debug)]
pub struct TopologyInput<'a> {
    pub driver_name: &'a str,
    /// Hashed to spread the volumes of a StatefulSet (immediate binding).
    pub claim_name: &'a str,
    pub allowed_topologies: &'a [TopologySelectorTerm],
    /// `volume.kubernetes.io/selected-node`; empty means none.
    pub selected_node: Option<&'a str>,
    /// `--strict-topology`
    pub strict_topology: bool,
    /// `--immediate-topology`
    pub immediate_topology: bool,
    /// The CSINodes: which topology keys the driver registered on which node.
    pub csi_nodes: &'a [CSINode],
    pub nodes: &'a [Node],
}

/// The accessibility requirements for CreateVolume, or none: keys from the CSINodes, values from the Node labels, the
/// selected node's segment preferred (late binding) or a spread over the segments (immediate binding). Call only when
/// the driver supports topology. A missing CSINode for the selected node (the node was deleted) asks for a reschedule;
/// every other failure is `NoChange`. `pin` is read first and filled in as upstream's per-claim cache is.
pub fn accessibility_requirements(
    input: &TopologyInput<'_>,
    pin: &mut TopologyPin,
) -> Result<Option<TopologyRequirement>, Refusal> {
    requirements(input, pin).map_err(|error| match error {
        TopologyError::CsiNodeNotFound(node) => Refusal::failed(
            ProvisioningState::Reschedule,
            format!("failed to get selected CSINode {node}: csinode.storage.k8s.io {} not found", go_quoted(&node)),
        ),
        TopologyError::Other(message) => {
            Refusal::no_change(format!("error generating accessibility requirements: {message}"))
        }
    })
}

enum TopologyError {
    CsiNodeNotFound(String),
    Other(String),
}

impl From<String> for TopologyError {
    fn from(message: String) -> TopologyError {
        TopologyError::Other(message)
    }
}

fn requirements(
    input: &TopologyInput<'_>,
    pin: &mut TopologyPin,
) -> Result<Option<TopologyRequirement>, TopologyError> {
    let selected = input.selected_node.filter(|n| !n.is_empty());
    let mut selected_term = TopologyTerm::default();
    let mut keys = Vec::new();
    let mut requisite = Vec::new();

    if let Some(node) = selected {
        keys = if pin.topology_keys.is_empty() {
            let csi_node = input
                .csi_nodes
                .iter()
                .find(|n| n.metadata.name.as_deref() == Some(node))
                .ok_or_else(|| TopologyError::CsiNodeNotFound(node.to_string()))?;
            let found = driver_topology_keys(csi_node, input.driver_name);
            if !found.is_empty() {
                pin.topology_keys = found.clone();
            }
            found
        } else {
            pin.topology_keys.clone()
        };
        if keys.is_empty() {
            return Err(format!("no topology key found for node {node}").into());
        }
        selected_term = selected_node_term(input, node, &keys, pin)?;

        if input.strict_topology {
            if !input.allowed_topologies.is_empty() {
                let allowed = flatten(input.allowed_topologies);
                if !allowed.iter().any(|t| t.is_subset_of(&selected_term)) {
                    return Err(format!(
                        "selected node '{}' topology '{selected_term}' is not in allowed topologies: {}",
                        go_quoted(node),
                        go_list(&allowed)
                    )
                    .into());
                }
            }
            requisite.push(selected_term.clone());
        }
    }

    if requisite.is_empty() {
        if !input.allowed_topologies.is_empty() {
            requisite = flatten(input.allowed_topologies);
        } else {
            if selected.is_none() && !input.immediate_topology {
                return Ok(None);
            }
            requisite = aggregate(input, selected, &keys, pin)?;
            if requisite.is_empty() {
                return Err("no available topology found".to_string().into());
            }
        }
    }
    // allowedTopologies made only of empty terms: behave as without topology.
    if requisite.is_empty() {
        return Ok(None);
    }
    requisite.sort_by(TopologyTerm::compare);
    requisite.dedup();

    let preferred = match selected {
        None => {
            let (hash, index) = stateful_set_spread(input.claim_name);
            let first = (hash.wrapping_add(index) % requisite.len() as u32) as usize;
            rotated(&requisite, first)
        }
        Some(_) if input.strict_topology => requisite.clone(),
        Some(node) => match requisite.iter().position(|t| t.is_subset_of(&selected_term)) {
            Some(first) => rotated(&requisite, first),
            None => {
                return Err(format!(
                    "topology {selected_term} from selected node {} is not in requisite: {}",
                    go_quoted(node),
                    go_list(&requisite)
                )
                .into());
            }
        },
    };
    Ok(Some(TopologyRequirement {
        requisite: requisite.iter().map(TopologyTerm::to_csi).collect(),
        preferred: preferred.iter().map(TopologyTerm::to_csi).collect(),
    }))
}

fn rotated(terms: &[TopologyTerm], first: usize) -> Vec<TopologyTerm> {
    terms[first..].iter().chain(&terms[..first]).cloned().collect()
}

/// The topology keys a CSINode lists for the driver.
pub fn driver_topology_keys(csi_node: &CSINode, driver_name: &str) -> Vec<String> {
    csi_node
        .spec
        .drivers
        .iter()
        .find(|d| d.name == driver_name)
        .and_then(|d| d.topology_keys.clone())
        .unwrap_or_default()
}

fn node_labels(node: &Node) -> BTreeMap<String, String> {
    node.metadata.labels.clone().unwrap_or_default()
}

/// The term of `labels` for `keys`, or `None` when a key is missing.
fn term_of(labels: &BTreeMap<String, String>, keys: &[String]) -> Option<TopologyTerm> {
    keys.iter()
        .map(|k| labels.get(k).map(|v| (k.clone(), v.clone())))
        .collect::<Option<Vec<_>>>()
        .map(TopologyTerm::new)
}

/// The selected node's segment: from the pinned labels when they have every key, else from the Node's labels.
fn selected_node_term(
    input: &TopologyInput<'_>,
    node: &str,
    keys: &[String],
    pin: &mut TopologyPin,
) -> Result<TopologyTerm, String> {
    if !pin.node_labels.is_empty()
        && let Some(term) = term_of(&pin.node_labels, keys)
    {
        return Ok(term);
    }
    let mismatch = |labels: &BTreeMap<String, String>| {
        format!(
            "topology labels from selected node {} does not match topology keys from CSINode {}",
            go_map(labels),
            go_list(keys)
        )
    };
    let Some(found) = input.nodes.iter().find(|n| n.metadata.name.as_deref() == Some(node)) else {
        return Err(mismatch(&pin.node_labels));
    };
    let labels = node_labels(found);
    if !labels.is_empty() {
        pin.node_labels = labels.clone();
    }
    term_of(&labels, keys).ok_or_else(|| mismatch(&labels))
}

/// Every segment in the cluster for the driver's keys, from the nodes where the driver registered them (external-
/// provisioner v6.4.0 pkg/controller/topology.go, aggregateTopologies). Late binding: the selected node's keys, over
/// the nodes whose registration covers them. Immediate binding: each distinct key set the driver registered, over the
/// nodes whose registration covers that set, so that a cluster whose nodes report different granularities offers
/// every one of them; a CSINode without keys for the driver is skipped, not an empty key set. A node is never
/// reported under keys the driver did not register on it, whatever labels it carries.
fn aggregate(
    input: &TopologyInput<'_>,
    selected: Option<&str>,
    selected_keys: &[String],
    pin: &mut TopologyPin,
) -> Result<Vec<TopologyTerm>, String> {
    if let Some(node) = selected
        && selected_keys.is_empty()
    {
        return Err(format!("no topology key found on CSINode {node}"));
    }
    if !pin.requisite_terms.is_empty() {
        return Ok(pin.requisite_terms.clone());
    }
    let registered = registered_topology_keys(input);
    let terms = match selected {
        None => {
            let key_sets = distinct_key_sets(input);
            if key_sets.is_empty() {
                // The driver has registered keys on no node yet.
                return Ok(Vec::new());
            }
            let terms: Vec<TopologyTerm> =
                key_sets.iter().flat_map(|keys| terms_for_keys(input, keys, &registered)).collect();
            if terms.is_empty() {
                let sets: Vec<String> = key_sets.iter().map(|keys| go_list(keys)).collect();
                return Err(format!("topologyKeys {} were not found on any nodes", go_list(&sets)));
            }
            terms
        }
        Some(_) => {
            let terms = terms_for_keys(input, selected_keys, &registered);
            if terms.is_empty() {
                return Err(format!("topologyKeys {} were not found on any nodes", go_list(selected_keys)));
            }
            terms
        }
    };
    pin.requisite_terms = terms.clone();
    Ok(terms)
}

/// The topology keys the driver registered on each node (by CSINode name); nodes where it registered none are left
/// out (upstream's `registeredTopologyKeys`).
fn registered_topology_keys<'a>(input: &TopologyInput<'a>) -> BTreeMap<&'a str, Vec<String>> {
    input
        .csi_nodes
        .iter()
        .filter_map(|csi_node| {
            let keys = driver_topology_keys(csi_node, input.driver_name);
            (!keys.is_empty()).then(|| (csi_node.metadata.name.as_deref().unwrap_or_default(), keys))
        })
        .collect()
}

/// The distinct key sets the driver registered, each sorted, in order (upstream's `distinctTopologyKeySets`).
fn distinct_key_sets(input: &TopologyInput<'_>) -> Vec<Vec<String>> {
    let sets: std::collections::BTreeSet<Vec<String>> = input
        .csi_nodes
        .iter()
        .map(|csi_node| {
            let mut keys = driver_topology_keys(csi_node, input.driver_name);
            keys.sort();
            keys
        })
        .filter(|keys| !keys.is_empty())
        .collect();
    sets.into_iter().collect()
}

/// One term per node labelled with every key of `keys` whose registration covers them (upstream's
/// `aggregateTopologiesForKeys`).
fn terms_for_keys(
    input: &TopologyInput<'_>,
    keys: &[String],
    registered: &BTreeMap<&str, Vec<String>>,
) -> Vec<TopologyTerm> {
    input
        .nodes
        .iter()
        .filter(|node| {
            let name = node.metadata.name.as_deref().unwrap_or_default();
            registered.get(name).is_some_and(|own| keys.iter().all(|key| own.contains(key)))
        })
        .filter_map(|node| term_of(&node_labels(node), keys))
        .collect()
}

/// allowedTopologies as a list of terms: each selector term's OR of values is distributed over its AND of keys.
fn flatten(allowed: &[TopologySelectorTerm]) -> Vec<TopologyTerm> {
    let mut out = Vec::new();
    for selector in allowed {
        let mut terms: Vec<Vec<(String, String)>> = Vec::new();
        for requirement in selector.match_label_expressions.iter().flatten() {
            let mut next = Vec::new();
            for value in &requirement.values {
                let segment = (requirement.key.clone(), value.clone());
                if terms.is_empty() {
                    next.push(vec![segment]);
                } else {
                    for term in &terms {
                        let mut extended = term.clone();
                        extended.push(segment.clone());
                        next.push(extended);
                    }
                }
            }
            // A requirement without values leaves no terms, and the next one starts afresh (as upstream).
            terms = next;
        }
        out.extend(terms.into_iter().map(TopologyTerm::new));
    }
    out
}

/// The FNV-1 hash of the claim name's StatefulSet part and the replica ordinal, so that the replicas of a StatefulSet
/// start at different zones while the claims of one replica agree (upstream's `getPVCNameHashAndIndexOffset`).
fn stateful_set_spread(claim_name: &str) -> (u32, u32) {
    let mut hashed = claim_name;
    let mut index = 0;
    if let Some(dash) = claim_name.rfind('-') {
        let ordinal = &claim_name[dash + 1..];
        if !ordinal.is_empty()
            && ordinal.bytes().all(|b| b.is_ascii_digit())
            && let Ok(n) = ordinal.parse::<u32>()
        {
            index = n;
            hashed = &claim_name[..dash];
            if let Some(dash) = hashed.rfind('-') {
                hashed = &hashed[dash + 1..];
            }
        }
    }
    let hash = hashed.bytes().fold(0x811c_9dc5u32, |h, b| h.wrapping_mul(0x0100_0193) ^ u32::from(b));
    (hash, index)
}

/// The PV's node affinity from CreateVolume's `accessible_topology`: one term per topology, one `In [value]` expression
/// per segment. Empty topologies are skipped; none left means no affinity.
pub fn volume_node_affinity(accessible_topology: &[Topology]) -> Option<VolumeNodeAffinity> {
    let terms: Vec<NodeSelectorTerm> = accessible_topology
        .iter()
        .filter(|t| !t.segments.is_empty())
        .map(|t| {
            let mut segments: Vec<_> = t.segments.iter().collect();
            segments.sort();
            NodeSelectorTerm {
                match_expressions: Some(
                    segments
                        .into_iter()
                        .map(|(key, value)| NodeSelectorRequirement {
                            key: key.clone(),
                            operator: "In".to_string(),
                            values: Some(vec![value.clone()]),
                        })
                        .collect(),
                ),
                match_fields: None,
            }
        })
        .collect();
    if terms.is_empty() {
        return None;
    }
    Some(VolumeNodeAffinity { required: Some(NodeSelector { node_selector_terms: terms }) })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::TopologySelectorLabelRequirement;
    use k8s_openapi::api::storage::v1::{CSINodeDriver, CSINodeSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    const DRIVER: &str = "hostpath.csi.k8s.io";
    const ZONE: &str = "topology.kubernetes.io/zone";
    const RACK: &str = "example.com/rack";

    fn csi_node(name: &str, keys: &[&str]) -> CSINode {
        CSINode {
            metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
            spec: CSINodeSpec {
                drivers: vec![
                    CSINodeDriver {
                        name: "other.csi".into(),
                        topology_keys: Some(vec!["other".into()]),
                        ..Default::default()
                    },
                    CSINodeDriver {
                        name: DRIVER.into(),
                        topology_keys: Some(keys.iter().map(|k| k.to_string()).collect()),
                        ..Default::default()
                    },
                ],
            },
        }
    }

    fn node(name: &str, labels: &[(&str, &str)]) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn allowed(terms: &[&[(&str, &[&str])]]) -> Vec<TopologySelectorTerm> {
        terms
            .iter()
            .map(|exprs| TopologySelectorTerm {
                match_label_expressions: Some(
                    exprs
                        .iter()
                        .map(|(key, values)| TopologySelectorLabelRequirement {
                            key: key.to_string(),
                            values: values.iter().map(|v| v.to_string()).collect(),
                        })
                        .collect(),
                ),
            })
            .collect()
    }

    fn term(segments: &[(&str, &str)]) -> TopologyTerm {
        TopologyTerm::new(segments.iter().map(|(k, v)| (k.to_string(), v.to_string())))
    }

    /// Requisite and preferred as lists of terms, for readable rows.
    fn terms_of(requirement: &TopologyRequirement) -> (Vec<TopologyTerm>, Vec<TopologyTerm>) {
        let conv = |list: &[Topology]| -> Vec<TopologyTerm> {
            list.iter().map(|t| TopologyTerm::new(t.segments.iter().map(|(k, v)| (k.clone(), v.clone())))).collect()
        };
        (conv(&requirement.requisite), conv(&requirement.preferred))
    }

    struct Cluster {
        csi_nodes: Vec<CSINode>,
        nodes: Vec<Node>,
    }

    fn three_zones() -> Cluster {
        Cluster {
            csi_nodes: vec![csi_node("n1", &[ZONE]), csi_node("n2", &[ZONE]), csi_node("n3", &[ZONE])],
            nodes: vec![
                node("n1", &[(ZONE, "z1")]),
                node("n2", &[(ZONE, "z2")]),
                node("n3", &[(ZONE, "z3")]),
                node("n4", &[("unrelated", "x")]),
            ],
        }
    }

    type Expect = Result<Option<(Vec<TopologyTerm>, Vec<TopologyTerm>)>, (ProvisioningState, String)>;

    struct Row {
        rule: &'static str,
        cluster: Cluster,
        allowed: Vec<TopologySelectorTerm>,
        selected: Option<&'static str>,
        strict: bool,
        immediate: bool,
        claim: &'static str,
        want: Expect,
    }

    fn run(row: &Row, pin: &mut TopologyPin) -> Expect {
        let input = TopologyInput {
            driver_name: DRIVER,
            claim_name: row.claim,
            allowed_topologies: &row.allowed,
            selected_node: row.selected,
            strict_topology: row.strict,
            immediate_topology: row.immediate,
            csi_nodes: &row.cluster.csi_nodes,
            nodes: &row.cluster.nodes,
        };
        accessibility_requirements(&input, pin).map(|r| r.as_ref().map(terms_of)).map_err(|e| (e.state, e.message))
    }

    fn zones(list: &[&str]) -> Vec<TopologyTerm> {
        list.iter().map(|z| term(&[(ZONE, z)])).collect()
    }

    #[test]
    fn requirement_rules() {
        use ProvisioningState::*;
        let z = |list: &[&str]| zones(list);
        let rows = vec![
            Row {
                rule: "strict: requisite = preferred = the selected node's segment",
                cluster: three_zones(),
                allowed: vec![],
                selected: Some("n2"),
                strict: true,
                immediate: true,
                claim: "c",
                want: Ok(Some((z(&["z2"]), z(&["z2"])))),
            },
            Row {
                rule: "strict: the segment must lie within allowedTopologies",
                cluster: three_zones(),
                allowed: allowed(&[&[(ZONE, &["z1", "z3"])]]),
                selected: Some("n2"),
                strict: true,
                immediate: true,
                claim: "c",
                want: Err((NoChange, "error generating accessibility requirements: selected node '\"n2\"' topology '[{topology.kubernetes.io/zone z2}]' is not in allowed topologies: [[{topology.kubernetes.io/zone z1}] [{topology.kubernetes.io/zone z3}]]".into())),
            },
            Row {
                rule: "strict within allowedTopologies",
                cluster: three_zones(),
                allowed: allowed(&[&[(ZONE, &["z1", "z2"])]]),
                selected: Some("n2"),
                strict: true,
                immediate: true,
                claim: "c",
                want: Ok(Some((z(&["z2"]), z(&["z2"])))),
            },
            Row {
                rule: "late binding: requisite = cluster aggregate, preferred starts at the selected segment",
                cluster: three_zones(),
                allowed: vec![],
                selected: Some("n2"),
                strict: false,
                immediate: false,
                claim: "c",
                want: Ok(Some((z(&["z1", "z2", "z3"]), z(&["z2", "z3", "z1"])))),
            },
            Row {
                rule: "late binding: requisite = flattened allowedTopologies",
                cluster: three_zones(),
                allowed: allowed(&[&[(ZONE, &["z3", "z2"])]]),
                selected: Some("n2"),
                strict: false,
                immediate: true,
                claim: "c",
                want: Ok(Some((z(&["z2", "z3"]), z(&["z2", "z3"])))),
            },
            Row {
                rule: "selected segment not in requisite → error",
                cluster: three_zones(),
                allowed: allowed(&[&[(ZONE, &["z1"])]]),
                selected: Some("n2"),
                strict: false,
                immediate: true,
                claim: "c",
                want: Err((NoChange, "error generating accessibility requirements: topology [{topology.kubernetes.io/zone z2}] from selected node \"n2\" is not in requisite: [[{topology.kubernetes.io/zone z1}]]".into())),
            },
            Row {
                rule: "flattening distributes OR over AND, terms sorted",
                cluster: Cluster {
                    csi_nodes: vec![csi_node("n1", &[ZONE, RACK])],
                    nodes: vec![node("n1", &[(ZONE, "z1"), (RACK, "r2")])],
                },
                allowed: allowed(&[&[(ZONE, &["z1", "z2"]), (RACK, &["r1", "r2"])]]),
                selected: Some("n1"),
                strict: false,
                immediate: true,
                claim: "c",
                want: Ok(Some((
                    vec![
                        term(&[(RACK, "r1"), (ZONE, "z1")]),
                        term(&[(RACK, "r1"), (ZONE, "z2")]),
                        term(&[(RACK, "r2"), (ZONE, "z1")]),
                        term(&[(RACK, "r2"), (ZONE, "z2")]),
                    ],
                    vec![
                        term(&[(RACK, "r2"), (ZONE, "z1")]),
                        term(&[(RACK, "r2"), (ZONE, "z2")]),
                        term(&[(RACK, "r1"), (ZONE, "z1")]),
                        term(&[(RACK, "r1"), (ZONE, "z2")]),
                    ],
                ))),
            },
            Row {
                rule: "requisite sorted and de-duplicated",
                cluster: Cluster {
                    csi_nodes: vec![csi_node("a", &[ZONE]), csi_node("b", &[ZONE]), csi_node("c", &[ZONE])],
                    nodes: vec![
                        node("a", &[(ZONE, "z2")]),
                        node("b", &[(ZONE, "z1")]),
                        node("c", &[(ZONE, "z2")]),
                    ],
                },
                allowed: vec![],
                selected: Some("a"),
                strict: false,
                immediate: true,
                claim: "c",
                want: Ok(Some((z(&["z1", "z2"]), z(&["z2", "z1"])))),
            },
            Row {
                rule: "selected node's CSINode missing → reschedule",
                cluster: three_zones(),
                allowed: vec![],
                selected: Some("gone"),
                strict: false,
                immediate: true,
                claim: "c",
                want: Err((Reschedule, "failed to get selected CSINode gone: csinode.storage.k8s.io \"gone\" not found".into())),
            },
            Row {
                rule: "selected node has no keys for the driver",
                cluster: Cluster { csi_nodes: vec![csi_node("n1", &[])], nodes: vec![node("n1", &[(ZONE, "z1")])] },
                allowed: vec![],
                selected: Some("n1"),
                strict: false,
                immediate: true,
                claim: "c",
                want: Err((NoChange, "error generating accessibility requirements: no topology key found for node n1".into())),
            },
            Row {
                rule: "selected node lacks a label for a key",
                cluster: Cluster {
                    csi_nodes: vec![csi_node("n1", &[ZONE, RACK])],
                    nodes: vec![node("n1", &[(ZONE, "z1"), ("kubernetes.io/hostname", "n1")])],
                },
                allowed: vec![],
                selected: Some("n1"),
                strict: false,
                immediate: true,
                claim: "c",
                want: Err((NoChange, "error generating accessibility requirements: topology labels from selected node map[kubernetes.io/hostname:n1 topology.kubernetes.io/zone:z1] does not match topology keys from CSINode [topology.kubernetes.io/zone example.com/rack]".into())),
            },
            Row {
                rule: "selected Node object missing (CSINode present) is NoChange",
                cluster: Cluster { csi_nodes: vec![csi_node("n1", &[ZONE])], nodes: vec![] },
                allowed: vec![],
                selected: Some("n1"),
                strict: false,
                immediate: true,
                claim: "c",
                want: Err((NoChange, "error generating accessibility requirements: topology labels from selected node map[] does not match topology keys from CSINode [topology.kubernetes.io/zone]".into())),
            },
            Row {
                rule: "immediate: requisite = cluster aggregate, preferred rotated by the claim-name hash",
                cluster: three_zones(),
                allowed: vec![],
                selected: None,
                strict: false,
                immediate: true,
                claim: "data-web-1",
                want: Ok(Some((z(&["z1", "z2", "z3"]), rotated(&z(&["z1", "z2", "z3"]), spread_start("data-web-1", 3))))),
            },
            Row {
                rule: "immediate: requisite = allowedTopologies",
                cluster: three_zones(),
                allowed: allowed(&[&[(ZONE, &["z9"])]]),
                selected: None,
                strict: false,
                immediate: false,
                claim: "c",
                want: Ok(Some((z(&["z9"]), z(&["z9"])))),
            },
            Row {
                rule: "immediate, --immediate-topology=false, no allowedTopologies → no requirements",
                cluster: three_zones(),
                allowed: vec![],
                selected: None,
                strict: false,
                immediate: false,
                claim: "c",
                want: Ok(None),
            },
            Row {
                rule: "allowedTopologies of empty terms → no requirements",
                cluster: three_zones(),
                allowed: vec![TopologySelectorTerm { match_label_expressions: None }],
                selected: None,
                strict: false,
                immediate: true,
                claim: "c",
                want: Ok(None),
            },
            Row {
                rule: "no CSINode has keys → no available topology",
                cluster: Cluster { csi_nodes: vec![csi_node("n1", &[])], nodes: vec![node("n1", &[(ZONE, "z1")])] },
                allowed: vec![],
                selected: None,
                strict: false,
                immediate: true,
                claim: "c",
                want: Err((NoChange, "error generating accessibility requirements: no available topology found".into())),
            },
            Row {
                rule: "keys found but no node carries them",
                cluster: Cluster { csi_nodes: vec![csi_node("n1", &[ZONE])], nodes: vec![node("n1", &[("other", "x")])] },
                allowed: vec![],
                selected: None,
                strict: false,
                immediate: true,
                claim: "c",
                want: Err((NoChange, "error generating accessibility requirements: topologyKeys [[topology.kubernetes.io/zone]] were not found on any nodes".into())),
            },
            Row {
                rule: "aggregate only counts nodes with every key",
                cluster: Cluster {
                    csi_nodes: vec![csi_node("n1", &[ZONE, RACK])],
                    nodes: vec![
                        node("n1", &[(ZONE, "z1"), (RACK, "r1")]),
                        node("n2", &[(ZONE, "z2")]),
                    ],
                },
                allowed: vec![],
                selected: Some("n1"),
                strict: false,
                immediate: true,
                claim: "c",
                want: Ok(Some((vec![term(&[(RACK, "r1"), (ZONE, "z1")])], vec![term(&[(RACK, "r1"), (ZONE, "z1")])]))),
            },
            Row {
                rule: "immediate: each registered key set aggregated on its own, over the nodes that registered it",
                cluster: Cluster {
                    csi_nodes: vec![csi_node("n1", &[ZONE]), csi_node("n2", &[RACK, ZONE])],
                    nodes: vec![node("n1", &[(ZONE, "z1"), (RACK, "r9")]), node("n2", &[(ZONE, "z2"), (RACK, "r2")])],
                },
                allowed: vec![],
                selected: None,
                strict: false,
                immediate: true,
                claim: "c",
                want: Ok(Some((
                    vec![term(&[(ZONE, "z1")]), term(&[(ZONE, "z2")]), term(&[(RACK, "r2"), (ZONE, "z2")])],
                    rotated(
                        &[term(&[(ZONE, "z1")]), term(&[(ZONE, "z2")]), term(&[(RACK, "r2"), (ZONE, "z2")])],
                        spread_start("c", 3),
                    ),
                ))),
            },
            Row {
                rule: "immediate: a node where the driver is not registered is left out, whatever its labels",
                cluster: Cluster {
                    csi_nodes: vec![csi_node("n1", &[ZONE]), csi_node("n2", &[ZONE])],
                    nodes: vec![node("n1", &[(ZONE, "z1")]), node("n2", &[(ZONE, "z2")]), node("n5", &[(ZONE, "z5")])],
                },
                allowed: vec![],
                selected: None,
                strict: false,
                immediate: true,
                claim: "c",
                want: Ok(Some((z(&["z1", "z2"]), rotated(&z(&["z1", "z2"]), spread_start("c", 2))))),
            },
            Row {
                rule: "immediate: a CSINode without keys for the driver is skipped, not an empty key set",
                cluster: Cluster {
                    csi_nodes: vec![csi_node("n0", &[]), csi_node("n1", &[ZONE])],
                    nodes: vec![node("n0", &[(ZONE, "z0")]), node("n1", &[(ZONE, "z1")])],
                },
                allowed: vec![],
                selected: None,
                strict: false,
                immediate: true,
                claim: "c",
                want: Ok(Some((z(&["z1"]), z(&["z1"])))),
            },
            Row {
                rule: "immediate: a node registered with finer keys counts for the coarser key set too",
                cluster: Cluster {
                    csi_nodes: vec![csi_node("n1", &[ZONE]), csi_node("n2", &[ZONE, RACK])],
                    nodes: vec![node("n1", &[("other", "x")]), node("n2", &[(ZONE, "z2")])],
                },
                allowed: vec![],
                selected: None,
                strict: false,
                immediate: true,
                claim: "c",
                want: Ok(Some((z(&["z2"]), z(&["z2"])))),
            },
            Row {
                rule: "late binding: only nodes whose registration covers the selected node's keys",
                cluster: Cluster {
                    csi_nodes: vec![csi_node("n1", &[ZONE]), csi_node("n2", &[ZONE, RACK]), csi_node("n3", &[RACK])],
                    nodes: vec![
                        node("n1", &[(ZONE, "z1")]),
                        node("n2", &[(ZONE, "z2"), (RACK, "r2")]),
                        node("n3", &[(ZONE, "z3"), (RACK, "r3")]),
                        node("n4", &[(ZONE, "z4")]),
                    ],
                },
                allowed: vec![],
                selected: Some("n1"),
                strict: false,
                immediate: true,
                claim: "c",
                want: Ok(Some((z(&["z1", "z2"]), z(&["z1", "z2"])))),
            },
            Row {
                rule: "immediate: no registered node carries its keys: each key set named",
                cluster: Cluster {
                    csi_nodes: vec![csi_node("n1", &[ZONE]), csi_node("n2", &[RACK, ZONE])],
                    nodes: vec![node("n1", &[("other", "x")]), node("n2", &[(RACK, "r2")]), node("n3", &[(ZONE, "z3")])],
                },
                allowed: vec![],
                selected: None,
                strict: false,
                immediate: true,
                claim: "c",
                want: Err((NoChange, "error generating accessibility requirements: topologyKeys [[example.com/rack topology.kubernetes.io/zone] [topology.kubernetes.io/zone]] were not found on any nodes".into())),
            },
        ];
        for row in &rows {
            assert_eq!(run(row, &mut TopologyPin::default()), row.want, "{}", row.rule);
        }
    }

    fn spread_start(claim: &str, len: u32) -> usize {
        let (hash, index) = stateful_set_spread(claim);
        (hash.wrapping_add(index) % len) as usize
    }

    #[test]
    fn stateful_set_replicas_spread() {
        // (rule, claim name, hashed part, ordinal)
        let table = [
            ("ClaimName-StatefulSet-N hashes the StatefulSet name", "data-web-2", "web", 2),
            ("Name-N hashes Name", "web-7", "web", 7),
            ("no ordinal hashes the whole name", "my-claim", "my-claim", 0),
            ("a sign is not an ordinal", "web-+1", "web-+1", 0),
            ("leading zeros are an ordinal", "db-web-007", "web", 7),
            ("ordinal beyond u32 is not an ordinal", "web-99999999999", "web-99999999999", 0),
            ("no dash", "plain", "plain", 0),
        ];
        for (rule, claim, hashed, ordinal) in table {
            let (hash, index) = stateful_set_spread(claim);
            let (want_hash, _) = stateful_set_spread_of_exact(hashed);
            assert_eq!((hash, index), (want_hash, ordinal), "{rule}");
        }
        // FNV-1 (32 bit) test vectors, as Go's hash/fnv New32.
        assert_eq!(stateful_set_spread_of_exact("").0, 0x811c9dc5);
        assert_eq!(stateful_set_spread_of_exact("a").0, 0x050c5d7e);
        assert_eq!(stateful_set_spread_of_exact("foobar").0, 0x31f0b262);

        // Consecutive replicas of one StatefulSet start at consecutive zones; claims of one replica agree.
        let starts: Vec<usize> = (0..3).map(|i| spread_start(&format!("data-web-{i}"), 3)).collect();
        assert_eq!(starts[1], (starts[0] + 1) % 3, "replicas spread");
        assert_eq!(starts[2], (starts[0] + 2) % 3, "replicas spread");
        assert_eq!(spread_start("logs-web-1", 3), starts[1], "claims of one replica share a zone");
    }

    /// The hash of a string taken as is (no StatefulSet heuristics): names without a dash hash whole.
    fn stateful_set_spread_of_exact(text: &str) -> (u32, u32) {
        (text.bytes().fold(0x811c_9dc5u32, |h, b| h.wrapping_mul(0x0100_0193) ^ u32::from(b)), 0)
    }

    #[test]
    fn retries_send_the_same_requirements() {
        let mut row = Row {
            rule: "pinned inputs survive node changes",
            cluster: three_zones(),
            allowed: vec![],
            selected: Some("n2"),
            strict: false,
            immediate: true,
            claim: "c",
            want: Ok(None),
        };
        let mut pin = TopologyPin::default();
        let first = run(&row, &mut pin);
        assert_eq!(pin.topology_keys, vec![ZONE.to_string()], "keys pinned");
        assert_eq!(pin.node_labels.get(ZONE).map(String::as_str), Some("z2"), "labels pinned");
        assert_eq!(pin.requisite_terms.len(), 3, "aggregate pinned");

        // Node n1 loses its zone, the CSINode of n2 goes away and n2 is relabelled: nothing changes for this claim.
        row.cluster = Cluster {
            csi_nodes: vec![csi_node("n1", &[ZONE])],
            nodes: vec![node("n1", &[]), node("n2", &[(ZONE, "z9")]), node("n3", &[(ZONE, "z3")])],
        };
        assert_eq!(run(&row, &mut pin), first, "{}", row.rule);

        // Pinned labels lacking a key are refreshed from the Node (upstream #1485).
        let mut stale = TopologyPin { node_labels: BTreeMap::from([("x".into(), "y".into())]), ..Default::default() };
        row.cluster = three_zones();
        assert_eq!(run(&row, &mut stale), first, "incomplete pinned labels are refreshed");
        assert_eq!(stale.node_labels.get(ZONE).map(String::as_str), Some("z2"));
    }

    #[test]
    fn node_affinity_from_accessible_topology() {
        let topo = |pairs: &[(&str, &str)]| Topology {
            segments: pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        };
        let expr = |k: &str, v: &str| NodeSelectorRequirement {
            key: k.into(),
            operator: "In".into(),
            values: Some(vec![v.into()]),
        };
        // (rule, accessible topology, affinity terms)
        type Row = (&'static str, Vec<Topology>, Option<Vec<Vec<NodeSelectorRequirement>>>);
        let table: Vec<Row> = vec![
            ("no topology, no affinity", vec![], None),
            (
                "one term per topology, one In per segment",
                vec![topo(&[(ZONE, "z1"), (RACK, "r1")]), topo(&[(ZONE, "z2")])],
                Some(vec![vec![expr(RACK, "r1"), expr(ZONE, "z1")], vec![expr(ZONE, "z2")]]),
            ),
            ("empty topologies skipped", vec![topo(&[]), topo(&[(ZONE, "z1")])], Some(vec![vec![expr(ZONE, "z1")]])),
            ("only empty topologies → no affinity", vec![topo(&[])], None),
        ];
        for (rule, accessible, want) in table {
            let got = volume_node_affinity(&accessible).map(|a| {
                a.required.unwrap().node_selector_terms.into_iter().map(|t| t.match_expressions.unwrap()).collect()
            });
            assert_eq!(got, want, "{rule}");
        }
    }
}
