//! The node ID a driver knows a node by: from the node's CSINode, or, when detaching and the CSINode no longer lists
//! the driver (the node is down or gone), the one the VolumeAttachment was attached with (external-attacher
//! pkg/controller/csi_handler.go, getNodeID).

use k8s_openapi::api::storage::v1::{CSINode, VolumeAttachment};

use crate::translate::names::NODE_ID_ANNOTATION;

/// `csi_node` is the node's CSINode if the cache has one; `attached_with` the VolumeAttachment whose annotation may
/// stand in (detach and reconciliation only).
pub fn node_id(
    csi_node: Option<&CSINode>,
    node_name: &str,
    driver: &str,
    attached_with: Option<&VolumeAttachment>,
) -> Result<String, String> {
    let missing = match csi_node {
        Some(csi_node) => match csi_node.spec.drivers.iter().find(|d| d.name == driver) {
            Some(registered) => return Ok(registered.node_id.clone()),
            None => format!("CSINode {node_name} does not contain driver {driver}"),
        },
        None => format!("csinode.storage.k8s.io {node_name:?} not found"),
    };
    attached_with.and_then(|va| va.metadata.annotations.as_ref()?.get(NODE_ID_ANNOTATION).cloned()).ok_or(missing)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::storage::v1::{CSINodeDriver, CSINodeSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn csi_node(drivers: &[(&str, &str)]) -> CSINode {
        CSINode {
            metadata: ObjectMeta { name: Some("node-1".into()), ..Default::default() },
            spec: CSINodeSpec {
                drivers: drivers
                    .iter()
                    .map(|(name, id)| CSINodeDriver {
                        name: name.to_string(),
                        node_id: id.to_string(),
                        ..Default::default()
                    })
                    .collect(),
            },
        }
    }

    fn annotated(node_id: &str) -> VolumeAttachment {
        let annotations = BTreeMap::from([(NODE_ID_ANNOTATION.to_string(), node_id.to_string())]);
        VolumeAttachment {
            metadata: ObjectMeta { annotations: Some(annotations), ..Default::default() },
            ..Default::default()
        }
    }

    #[test]
    fn node_ids_come_from_the_csinode_then_the_annotation() {
        let registered = csi_node(&[("other", "x"), ("d", "id-1")]);
        let without = csi_node(&[("other", "x")]);
        let va = annotated("id-old");
        // (case, CSINode, annotation may stand in, node ID)
        type Row<'a> = (&'a str, Option<&'a CSINode>, Option<&'a VolumeAttachment>, Result<&'a str, &'a str>);
        let table: [Row; 6] = [
            ("the driver's entry", Some(&registered), None, Ok("id-1")),
            ("the CSINode wins over the annotation", Some(&registered), Some(&va), Ok("id-1")),
            ("driver not registered, attaching", Some(&without), None, Err("CSINode node-1 does not contain driver d")),
            ("driver not registered, detaching", Some(&without), Some(&va), Ok("id-old")),
            ("no CSINode, attaching", None, None, Err(r#"csinode.storage.k8s.io "node-1" not found"#)),
            (
                "no CSINode, no annotation",
                None,
                Some(&VolumeAttachment::default()),
                Err(r#"csinode.storage.k8s.io "node-1" not found"#),
            ),
        ];
        for (case, node, fallback, want) in table {
            let got = node_id(node, "node-1", "d", fallback);
            assert_eq!(got, want.map(str::to_string).map_err(str::to_string), "{case}");
        }
    }
}
