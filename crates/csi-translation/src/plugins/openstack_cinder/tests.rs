use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PersistentVolumeSpec, TopologySelectorLabelRequirement,
    TopologySelectorTerm, VolumeNodeAffinity,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;

fn zone_affinity(key: &str, zone: &str) -> Option<VolumeNodeAffinity> {
    Some(VolumeNodeAffinity {
        required: Some(NodeSelector {
            node_selector_terms: vec![NodeSelectorTerm {
                match_expressions: Some(vec![NodeSelectorRequirement {
                    key: key.into(),
                    operator: "In".into(),
                    values: Some(vec![zone.into()]),
                }]),
                match_fields: None,
            }],
        }),
    })
}

#[test]
fn storage_classes() {
    let class = StorageClass {
        provisioner: IN_TREE.into(),
        parameters: Some(BTreeMap::from([("fsType".into(), "ext4".into()), ("availability".into(), "nova".into())])),
        allowed_topologies: Some(vec![TopologySelectorTerm {
            match_label_expressions: Some(vec![TopologySelectorLabelRequirement {
                key: "topology.kubernetes.io/zone".into(),
                values: vec!["nova".into()],
            }]),
        }]),
        ..Default::default()
    };
    let translated = storage_class_to_csi(class).unwrap();
    assert_eq!(
        translated.parameters,
        Some(BTreeMap::from([
            ("csi.storage.k8s.io/fstype".into(), "ext4".into()),
            ("availability".into(), "nova".into())
        ]))
    );
    let key = &translated.allowed_topologies.unwrap()[0].match_label_expressions.clone().unwrap()[0].key;
    assert_eq!(key, ZONE_TOPOLOGY_KEY);
}

#[test]
fn volumes_both_ways() {
    let in_tree = PersistentVolume {
        metadata: ObjectMeta { name: Some("pv".into()), ..Default::default() },
        spec: Some(PersistentVolumeSpec {
            cinder: Some(CinderPersistentVolumeSource {
                volume_id: "6a5c-…".into(),
                fs_type: Some("ext4".into()),
                read_only: Some(false),
                secret_ref: None,
            }),
            node_affinity: zone_affinity("topology.kubernetes.io/zone", "nova"),
            ..Default::default()
        }),
        ..Default::default()
    };
    let csi = pv_to_csi(in_tree.clone()).unwrap();
    let spec = csi.spec.clone().unwrap();
    assert_eq!(spec.cinder, None);
    let source = spec.csi.clone().unwrap();
    assert_eq!((source.driver.as_str(), source.volume_handle.as_str()), (DRIVER, "6a5c-…"));
    assert_eq!(source.volume_attributes, Some(BTreeMap::new()));
    assert_eq!(spec.node_affinity, zone_affinity(ZONE_TOPOLOGY_KEY, "nova"));

    let back = pv_to_in_tree(csi).unwrap();
    let spec = back.spec.unwrap();
    assert_eq!(spec.cinder, in_tree.spec.unwrap().cinder, "the source round-trips");
    assert_eq!(spec.node_affinity, zone_affinity("topology.kubernetes.io/zone", "nova"), "no region is added");
    assert_eq!(back.metadata.labels, Some(BTreeMap::from([("topology.kubernetes.io/zone".into(), "nova".into())])));
}
