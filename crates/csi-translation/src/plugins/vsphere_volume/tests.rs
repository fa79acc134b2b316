use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PersistentVolumeSpec, VolumeNodeAffinity,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;

fn affinity(requirements: &[(&str, &str)]) -> Option<VolumeNodeAffinity> {
    Some(VolumeNodeAffinity {
        required: Some(NodeSelector {
            node_selector_terms: vec![NodeSelectorTerm {
                match_expressions: Some(
                    requirements
                        .iter()
                        .map(|(key, value)| NodeSelectorRequirement {
                            key: key.to_string(),
                            operator: "In".into(),
                            values: Some(vec![value.to_string()]),
                        })
                        .collect(),
                ),
                match_fields: None,
            }],
        }),
    })
}

#[test]
fn storage_class_parameters() {
    let class = StorageClass {
        provisioner: IN_TREE.into(),
        parameters: Some(BTreeMap::from([
            ("fstype".into(), "ext4".into()),
            ("StoragePolicyName".into(), "gold".into()),
            ("datastore".into(), "ds1".into()),
            ("diskformat".into(), "thin".into()),
            ("unknown".into(), "dropped".into()),
        ])),
        ..Default::default()
    };
    let translated = storage_class_to_csi(class).unwrap();
    assert_eq!(
        translated.parameters,
        Some(BTreeMap::from([
            ("csi.storage.k8s.io/fstype".into(), "ext4".into()),
            ("storagepolicyname".into(), "gold".into()),
            ("datastore-migrationparam".into(), "ds1".into()),
            ("diskformat-migrationparam".into(), "thin".into()),
            ("csimigration".into(), "true".into()),
        ]))
    );
}

#[test]
fn volumes_both_ways() {
    let in_tree = PersistentVolume {
        metadata: ObjectMeta {
            name: Some("pv".into()),
            labels: Some(BTreeMap::from([("topology.kubernetes.io/region".into(), "r1".into())])),
            ..Default::default()
        },
        spec: Some(PersistentVolumeSpec {
            vsphere_volume: Some(VsphereVirtualDiskVolumeSource {
                volume_path: "[ds1] kubevols/disk.vmdk".into(),
                fs_type: Some("ext4".into()),
                storage_policy_name: Some("gold".into()),
                storage_policy_id: None,
            }),
            node_affinity: affinity(&[("topology.kubernetes.io/zone", "z1")]),
            ..Default::default()
        }),
        ..Default::default()
    };
    let csi = pv_to_csi(in_tree).unwrap();
    let spec = csi.spec.clone().unwrap();
    let source = spec.csi.clone().unwrap();
    assert_eq!(source.volume_handle, "[ds1] kubevols/disk.vmdk");
    assert_eq!(source.volume_attributes, Some(BTreeMap::from([("storagepolicyname".into(), "gold".into())])));
    assert_eq!(
        spec.node_affinity,
        affinity(&[(ZONE_TOPOLOGY_KEY, "z1"), (REGION_TOPOLOGY_KEY, "r1")]),
        "zone renamed, region added from the label"
    );

    let mut created = csi;
    created.metadata.labels = None;
    created.spec.as_mut().unwrap().csi.as_mut().unwrap().volume_attributes =
        Some(BTreeMap::from([("initialvolumefilepath".into(), "[ds1] fcd/new.vmdk".into())]));
    let back = pv_to_in_tree(created).unwrap();
    let spec = back.spec.unwrap();
    assert_eq!(spec.vsphere_volume.unwrap().volume_path, "[ds1] fcd/new.vmdk");
    assert_eq!(
        spec.node_affinity,
        affinity(&[("topology.kubernetes.io/zone", "z1"), ("topology.kubernetes.io/region", "r1")])
    );
    assert_eq!(
        back.metadata.labels,
        Some(BTreeMap::from([
            ("topology.kubernetes.io/region".into(), "r1".into()),
            ("topology.kubernetes.io/zone".into(), "z1".into()),
        ]))
    );
}
