use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PersistentVolumeSpec, TopologySelectorLabelRequirement,
    TopologySelectorTerm, VolumeNodeAffinity,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;

fn in_tree_pv(zone_label: Option<&str>, partition: Option<i32>, modes: &[&str]) -> PersistentVolume {
    PersistentVolume {
        metadata: ObjectMeta {
            name: Some("pv".into()),
            labels: zone_label.map(|z| BTreeMap::from([("topology.kubernetes.io/zone".to_string(), z.to_string())])),
            ..Default::default()
        },
        spec: Some(PersistentVolumeSpec {
            gce_persistent_disk: Some(GCEPersistentDiskVolumeSource {
                pd_name: "disk-1".into(),
                fs_type: Some("ext4".into()),
                read_only: None,
                partition,
            }),
            access_modes: Some(modes.iter().map(|m| m.to_string()).collect()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn in_tree_volumes_to_csi() {
    // (case, zone label, volume handle | error)
    let table = [
        ("no zone", None, Ok("projects/UNSPECIFIED/zones/UNSPECIFIED/disks/disk-1".to_string())),
        ("zonal", Some("us-central1-a"), Ok("projects/UNSPECIFIED/zones/us-central1-a/disks/disk-1".to_string())),
        (
            "regional",
            Some("us-central1-a__us-central1-c"),
            Ok("projects/UNSPECIFIED/regions/us-central1/disks/disk-1".to_string()),
        ),
        ("regional across regions", Some("us-central1-a__europe-west1-b"), Err(())),
    ];
    for (case, zone, want) in table {
        let got = pv_to_csi(in_tree_pv(zone, None, &["ReadWriteOnce"]))
            .map(|pv| pv.spec.unwrap().csi.unwrap().volume_handle)
            .map_err(|_| ());
        assert_eq!(got, want, "{case}");
    }
    let pv = pv_to_csi(in_tree_pv(Some("us-central1-a"), Some(2), &["ReadWriteOnce"])).unwrap();
    let spec = pv.spec.unwrap();
    let csi = spec.csi.unwrap();
    assert_eq!(csi.driver, DRIVER);
    assert_eq!(csi.volume_attributes, Some(BTreeMap::from([("partition".into(), "2".into())])));
    assert_eq!(spec.gce_persistent_disk, None);
    let whole = pv_to_csi(in_tree_pv(None, None, &["ReadWriteOnce"])).unwrap();
    assert_eq!(
        whole.spec.unwrap().csi.unwrap().volume_attributes,
        Some(BTreeMap::from([("partition".into(), String::new())])),
        "no partition: empty"
    );
}

#[test]
fn access_modes_fit_a_single_node_disk() {
    // (case, modes, result)
    let table: [(&str, &[&str], &str); 5] = [
        ("read-write once", &["ReadWriteOnce"], "ReadWriteOnce"),
        ("read-write many reads as once", &["ReadWriteMany"], "ReadWriteOnce"),
        ("read-only many", &["ReadOnlyMany"], "ReadOnlyMany"),
        ("both", &["ReadOnlyMany", "ReadWriteOnce"], "ReadWriteOnce"),
        ("none given", &[], "ReadWriteOnce"),
    ];
    for (case, modes, want) in table {
        let pv = pv_to_csi(in_tree_pv(None, None, modes)).unwrap();
        assert_eq!(pv.spec.unwrap().access_modes, Some(vec![want.to_string()]), "{case}");
    }
}

fn csi_pv(handle: &str, partition: Option<&str>, zone: Option<&str>) -> PersistentVolume {
    PersistentVolume {
        metadata: ObjectMeta { name: Some("pv".into()), ..Default::default() },
        spec: Some(PersistentVolumeSpec {
            csi: Some(CSIPersistentVolumeSource {
                driver: DRIVER.into(),
                volume_handle: handle.into(),
                fs_type: Some("ext4".into()),
                volume_attributes: partition.map(|p| BTreeMap::from([("partition".to_string(), p.to_string())])),
                ..Default::default()
            }),
            node_affinity: zone.map(|zone| VolumeNodeAffinity {
                required: Some(NodeSelector {
                    node_selector_terms: vec![NodeSelectorTerm {
                        match_expressions: Some(vec![NodeSelectorRequirement {
                            key: ZONE_TOPOLOGY_KEY.into(),
                            operator: "In".into(),
                            values: Some(vec![zone.into()]),
                        }]),
                        match_fields: None,
                    }],
                }),
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn csi_volumes_to_in_tree() {
    let handle = "projects/p/zones/us-central1-a/disks/disk-1";
    // (case, handle, partition attribute, pd name and partition | error)
    let table = [
        ("zonal", handle, None, Ok(("disk-1".to_string(), None))),
        ("with a partition", handle, Some("3"), Ok(("disk-1".to_string(), Some(3)))),
        ("empty partition", handle, Some(""), Ok(("disk-1".to_string(), None))),
        ("bad partition", handle, Some("x"), Err(TranslationError::Partition("x".into()))),
        (
            "short handle",
            "disk-1",
            None,
            Err(TranslationError::VolumeHandle(
                "failed to get id components: got 1, wanted 6 components or more".into(),
            )),
        ),
    ];
    for (case, handle, partition, want) in table {
        let got = pv_to_in_tree(csi_pv(handle, partition, None)).map(|pv| {
            let pd = pv.spec.unwrap().gce_persistent_disk.unwrap();
            (pd.pd_name, pd.partition)
        });
        assert_eq!(got, want, "{case}");
    }
    let zoned = pv_to_in_tree(csi_pv(handle, None, Some("us-central1-a"))).unwrap();
    assert_eq!(
        zoned.metadata.labels,
        Some(BTreeMap::from([
            ("topology.kubernetes.io/region".into(), "us-central1".into()),
            ("topology.kubernetes.io/zone".into(), "us-central1-a".into()),
        ]))
    );
}

#[test]
fn storage_classes() {
    let class = StorageClass {
        provisioner: IN_TREE.into(),
        parameters: Some(BTreeMap::from([
            ("type".into(), "pd-ssd".into()),
            ("fstype".into(), "ext4".into()),
            ("zones".into(), "us-central1-a,us-central1-b".into()),
        ])),
        ..Default::default()
    };
    let translated = storage_class_to_csi(class.clone()).unwrap();
    assert_eq!(
        translated.parameters,
        Some(BTreeMap::from([("type".into(), "pd-ssd".into()), ("csi.storage.k8s.io/fstype".into(), "ext4".into())]))
    );
    assert_eq!(
        translated.allowed_topologies,
        Some(vec![TopologySelectorTerm {
            match_label_expressions: Some(vec![TopologySelectorLabelRequirement {
                key: ZONE_TOPOLOGY_KEY.into(),
                values: vec!["us-central1-a".into(), "us-central1-b".into()],
            }]),
        }])
    );
    let mut both = class;
    both.allowed_topologies = translated.allowed_topologies;
    assert_eq!(storage_class_to_csi(both), Err(TranslationError::ZonesAndAllowedTopologies));
}

#[test]
fn volume_handles_are_completed_from_the_node_id() {
    let node = "projects/my-project/zones/us-central1-b/instances/node-1";
    // (case, handle, node id, repaired)
    let table: [(&str, &str, &str, Result<&str, &str>); 7] = [
        ("a complete handle stays", "projects/p/zones/z/disks/d", node, Ok("projects/p/zones/z/disks/d")),
        (
            "project and zone from the node",
            "projects/UNSPECIFIED/zones/UNSPECIFIED/disks/d",
            node,
            Ok("projects/my-project/zones/us-central1-b/disks/d"),
        ),
        (
            "the handle's zone wins",
            "projects/UNSPECIFIED/zones/us-central1-a/disks/d",
            node,
            Ok("projects/my-project/zones/us-central1-a/disks/d"),
        ),
        (
            "a regional disk takes the node zone's region",
            "projects/UNSPECIFIED/regions/UNSPECIFIED/disks/d",
            node,
            Ok("projects/my-project/regions/us-central1/disks/d"),
        ),
        ("a short handle", "disks/d", node, Err("volume handle has wrong number of elements; got 2, wanted 6 or more")),
        (
            "a short node id",
            "projects/UNSPECIFIED/zones/UNSPECIFIED/disks/d",
            "node-1",
            Err("node handle has wrong number of elements; got 1, wanted 6 or more"),
        ),
        (
            "neither zonal nor regional",
            "projects/UNSPECIFIED/global/x/disks/d",
            node,
            Err("expected volume handle to have zones or regions regionality value, got: global"),
        ),
    ];
    for (case, handle, node_id, want) in table {
        let got = repair_volume_handle(handle, node_id).map_err(|e| e.to_string());
        assert_eq!(got, want.map(str::to_string).map_err(str::to_string), "{case}");
    }
}
