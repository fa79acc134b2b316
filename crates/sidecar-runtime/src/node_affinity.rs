//! Whether a node is one a NodeSelector (a PersistentVolume's required node affinity) admits, as Kubernetes reads it
//! (k8s.io/component-helpers scheduling/corev1/nodeaffinity, `MatchNodeSelectorTerms`): the terms are ORed and the
//! requirements of a term ANDed; a term without requirements, or with one that is not valid, matches nothing;
//! `matchFields` knows `metadata.name` alone.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};

/// The only field a `matchFields` requirement may name.
const NODE_NAME_FIELD: &str = "metadata.name";

/// Whether `node` satisfies one of the selector's terms.
pub fn node_matches(selector: &NodeSelector, node: &Node) -> bool {
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let name = node.metadata.name.as_deref().unwrap_or_default();
    selector.node_selector_terms.iter().any(|term| term_matches(term, &labels, name))
}

/// Whether a node with `labels` and `node_name` satisfies the term.
pub fn term_matches(term: &NodeSelectorTerm, labels: &BTreeMap<String, String>, node_name: &str) -> bool {
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if expressions.is_empty() && fields.is_empty() {
        return false;
    }
    let name = BTreeMap::from([(NODE_NAME_FIELD.to_string(), node_name.to_string())]);
    expressions.iter().all(|r| requirement_matches(r, labels))
        && fields.iter().all(|r| {
            r.key == NODE_NAME_FIELD && matches!(r.operator.as_str(), "In" | "NotIn") && requirement_matches(r, &name)
        })
}

/// One requirement against a set of labels; a requirement whose values do not fit its operator matches nothing.
fn requirement_matches(requirement: &NodeSelectorRequirement, labels: &BTreeMap<String, String>) -> bool {
    let value = labels.get(&requirement.key);
    let values = requirement.values.as_deref().unwrap_or_default();
    let number = |text: &str| text.parse::<i64>().ok();
    let compare = |wanted: std::cmp::Ordering| match (value.and_then(|v| number(v)), values) {
        (Some(have), [limit]) => number(limit).is_some_and(|limit| have.cmp(&limit) == wanted),
        _ => false,
    };
    match requirement.operator.as_str() {
        "In" => !values.is_empty() && value.is_some_and(|v| values.contains(v)),
        "NotIn" => !values.is_empty() && value.is_none_or(|v| !values.contains(v)),
        "Exists" => values.is_empty() && value.is_some(),
        "DoesNotExist" => values.is_empty() && value.is_none(),
        "Gt" => compare(std::cmp::Ordering::Greater),
        "Lt" => compare(std::cmp::Ordering::Less),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn requirement(key: &str, operator: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: operator.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
        }
    }

    fn term(expressions: Vec<NodeSelectorRequirement>, fields: Vec<NodeSelectorRequirement>) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: (!expressions.is_empty()).then_some(expressions),
            match_fields: (!fields.is_empty()).then_some(fields),
        }
    }

    #[test]
    fn terms_are_read_as_kubernetes_reads_them() {
        let labels = BTreeMap::from([
            ("topology.hostpath.csi/node".to_string(), "n1".to_string()),
            ("cores".to_string(), "8".to_string()),
        ]);
        let key = "topology.hostpath.csi/node";
        // (rule, term, matches node "node-1" with the labels above)
        let table = [
            ("In holds", term(vec![requirement(key, "In", &["n0", "n1"])], vec![]), true),
            ("In fails", term(vec![requirement(key, "In", &["n2"])], vec![]), false),
            ("In without values is not valid", term(vec![requirement(key, "In", &[])], vec![]), false),
            ("NotIn holds", term(vec![requirement(key, "NotIn", &["n2"])], vec![]), true),
            ("NotIn of a missing label holds", term(vec![requirement("zone", "NotIn", &["a"])], vec![]), true),
            ("Exists", term(vec![requirement(key, "Exists", &[])], vec![]), true),
            ("Exists with values is not valid", term(vec![requirement(key, "Exists", &["n1"])], vec![]), false),
            ("DoesNotExist", term(vec![requirement("zone", "DoesNotExist", &[])], vec![]), true),
            ("Gt compares integers", term(vec![requirement("cores", "Gt", &["4"])], vec![]), true),
            ("Lt compares integers", term(vec![requirement("cores", "Lt", &["4"])], vec![]), false),
            ("Gt of a text is not valid", term(vec![requirement(key, "Gt", &["4"])], vec![]), false),
            ("an unknown operator", term(vec![requirement(key, "Near", &["n1"])], vec![]), false),
            (
                "requirements of a term are ANDed",
                term(vec![requirement(key, "In", &["n1"]), requirement("cores", "In", &["16"])], vec![]),
                false,
            ),
            ("a term without requirements matches nothing", term(vec![], vec![]), false),
            ("the node's name", term(vec![], vec![requirement(NODE_NAME_FIELD, "In", &["node-1"])]), true),
            ("another node's name", term(vec![], vec![requirement(NODE_NAME_FIELD, "In", &["node-2"])]), false),
            (
                "a field other than the name",
                term(vec![], vec![requirement("spec.unschedulable", "NotIn", &["x"])]),
                false,
            ),
            ("Exists on a field is not valid", term(vec![], vec![requirement(NODE_NAME_FIELD, "Exists", &[])]), false),
            (
                "labels and fields together",
                term(vec![requirement(key, "In", &["n1"])], vec![requirement(NODE_NAME_FIELD, "NotIn", &["node-2"])]),
                true,
            ),
        ];
        for (rule, term, want) in table {
            assert_eq!(term_matches(&term, &labels, "node-1"), want, "{rule}");
        }
    }

    #[test]
    fn terms_are_ored() {
        let node = Node {
            metadata: ObjectMeta {
                name: Some("node-1".into()),
                labels: Some(BTreeMap::from([("zone".to_string(), "b".to_string())])),
                ..Default::default()
            },
            ..Default::default()
        };
        let in_zone = |zone: &str| term(vec![requirement("zone", "In", &[zone])], vec![]);
        let selector = |terms: Vec<NodeSelectorTerm>| NodeSelector { node_selector_terms: terms };
        assert!(node_matches(&selector(vec![in_zone("a"), in_zone("b")]), &node), "the second term holds");
        assert!(!node_matches(&selector(vec![in_zone("a"), in_zone("c")]), &node), "no term holds");
        assert!(!node_matches(&selector(vec![]), &node), "no term at all");
    }
}
