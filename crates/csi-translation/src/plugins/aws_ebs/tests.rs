use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PersistentVolumeSpec, TopologySelectorLabelRequirement,
    TopologySelectorTerm, VolumeNodeAffinity,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;

fn class(parameters: &[(&str, &str)], allowed: Option<Vec<TopologySelectorTerm>>) -> StorageClass {
    StorageClass {
        metadata: ObjectMeta { name: Some("gp3".into()), ..Default::default() },
        provisioner: IN_TREE.into(),
        parameters: Some(parameters.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
        allowed_topologies: allowed,
        ..Default::default()
    }
}

fn selector(key: &str, values: &[&str]) -> Vec<TopologySelectorTerm> {
    vec![TopologySelectorTerm {
        match_label_expressions: Some(vec![TopologySelectorLabelRequirement {
            key: key.into(),
            values: values.iter().map(|v| v.to_string()).collect(),
        }]),
    }]
}

fn params(entries: &[(&str, &str)]) -> Option<BTreeMap<String, String>> {
    Some(entries.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
}

#[test]
fn storage_classes() {
    // (case, class, parameters, allowed topologies | error)
    type Want = Result<(Option<BTreeMap<String, String>>, Option<Vec<TopologySelectorTerm>>), TranslationError>;
    let table: Vec<(&str, StorageClass, Want)> = vec![
        ("nothing to translate", class(&[("type", "gp3")], None), Ok((params(&[("type", "gp3")]), None))),
        (
            "fsType in any case becomes the CSI key",
            class(&[("FsType", "xfs")], None),
            Ok((params(&[("csi.storage.k8s.io/fstype", "xfs")]), None)),
        ),
        (
            "iopsPerGB asks the driver to round up",
            class(&[("iopsPerGB", "10")], None),
            Ok((params(&[("iopsPerGB", "10"), ("allowautoiopspergbincrease", "true")]), None)),
        ),
        (
            "zone becomes an allowed topology",
            class(&[("zone", "us-east-1a")], None),
            Ok((params(&[]), Some(selector(ZONE_TOPOLOGY_KEY, &["us-east-1a"])))),
        ),
        (
            "zones too",
            class(&[("zones", "us-east-1a,us-east-1b")], None),
            Ok((params(&[]), Some(selector(ZONE_TOPOLOGY_KEY, &["us-east-1a", "us-east-1b"])))),
        ),
        (
            "allowed topologies get the driver's key",
            class(&[], Some(selector("topology.kubernetes.io/zone", &["us-east-1a"]))),
            Ok((params(&[]), Some(selector(ZONE_TOPOLOGY_KEY, &["us-east-1a"])))),
        ),
        (
            "beta zone labels too",
            class(&[], Some(selector("failure-domain.beta.kubernetes.io/zone", &["us-east-1a"]))),
            Ok((params(&[]), Some(selector(ZONE_TOPOLOGY_KEY, &["us-east-1a"])))),
        ),
        (
            "other keys stay",
            class(&[], Some(selector("example.com/rack", &["r1"]))),
            Ok((params(&[]), Some(selector("example.com/rack", &["r1"])))),
        ),
        (
            "zones and allowed topologies together are refused",
            class(&[("zone", "us-east-1a")], Some(selector("topology.kubernetes.io/zone", &["us-east-1b"]))),
            Err(TranslationError::ZonesAndAllowedTopologies),
        ),
    ];
    for (case, class, want) in table {
        let got = storage_class_to_csi(class).map(|c| {
            assert_eq!(c.provisioner, IN_TREE, "{case}: the provisioner name stays");
            (c.parameters, c.allowed_topologies)
        });
        assert_eq!(got, want, "{case}");
    }
}

fn affinity(requirements: &[(&str, &[&str])]) -> Option<VolumeNodeAffinity> {
    Some(VolumeNodeAffinity {
        required: Some(NodeSelector {
            node_selector_terms: vec![NodeSelectorTerm {
                match_expressions: Some(
                    requirements
                        .iter()
                        .map(|(key, values)| NodeSelectorRequirement {
                            key: key.to_string(),
                            operator: "In".into(),
                            values: Some(values.iter().map(|v| v.to_string()).collect()),
                        })
                        .collect(),
                ),
                match_fields: None,
            }],
        }),
    })
}

fn ebs_pv(volume_id: &str, partition: Option<i32>, node_affinity: Option<VolumeNodeAffinity>) -> PersistentVolume {
    PersistentVolume {
        metadata: ObjectMeta { name: Some("pv".into()), ..Default::default() },
        spec: Some(PersistentVolumeSpec {
            aws_elastic_block_store: Some(AWSElasticBlockStoreVolumeSource {
                volume_id: volume_id.into(),
                fs_type: Some("ext4".into()),
                read_only: Some(true),
                partition,
            }),
            node_affinity,
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn in_tree_volumes_to_csi() {
    // (case, in-tree volume id, csi volume handle | error)
    let table = [
        ("plain id", "vol-0123", Ok("vol-0123".to_string())),
        ("aws:// with a zone", "aws://us-east-1a/vol-0123", Ok("vol-0123".to_string())),
        ("aws:// without a zone", "aws:///vol-0123", Ok("vol-0123".to_string())),
        (
            "aws:// with a bad id",
            "aws://us-east-1a/disk-1",
            Err(TranslationError::EbsVolumeId("invalid format for AWS volume (aws://us-east-1a/disk-1)".into())),
        ),
    ];
    for (case, volume_id, want) in table {
        let got = pv_to_csi(ebs_pv(volume_id, Some(2), None)).map(|pv| {
            let csi = pv.spec.unwrap().csi.unwrap();
            assert_eq!(csi.driver, DRIVER, "{case}");
            assert_eq!(csi.fs_type.as_deref(), Some("ext4"), "{case}");
            assert_eq!(csi.read_only, Some(true), "{case}");
            assert_eq!(csi.volume_attributes, Some(BTreeMap::from([("partition".into(), "2".into())])), "{case}");
            csi.volume_handle
        });
        assert_eq!(got, want, "{case}");
    }
    let pv = pv_to_csi(ebs_pv("vol-1", None, affinity(&[("topology.kubernetes.io/zone", &["us-east-1a"])]))).unwrap();
    assert_eq!(pv.spec.as_ref().unwrap().aws_elastic_block_store, None, "the in-tree source is gone");
    assert_eq!(pv.spec.unwrap().node_affinity, affinity(&[(ZONE_TOPOLOGY_KEY, &["us-east-1a"])]), "zone key");
    let beta = pv_to_csi(ebs_pv(
        "vol-1",
        None,
        affinity(&[
            ("failure-domain.beta.kubernetes.io/zone", &["us-east-1a"]),
            ("failure-domain.beta.kubernetes.io/region", &["us-east-1"]),
        ]),
    ))
    .unwrap();
    assert_eq!(
        beta.spec.unwrap().node_affinity,
        affinity(&[(ZONE_TOPOLOGY_KEY, &["us-east-1a"]), ("topology.kubernetes.io/region", &["us-east-1"])]),
        "beta zone and region"
    );
    let mut labelled = ebs_pv("vol-1", None, None);
    labelled.metadata.labels =
        Some(BTreeMap::from([("topology.kubernetes.io/zone".into(), "us-east-1a__us-east-1b".into())]));
    assert_eq!(
        pv_to_csi(labelled).unwrap().spec.unwrap().node_affinity,
        affinity(&[(ZONE_TOPOLOGY_KEY, &["us-east-1a", "us-east-1b"])]),
        "zones from the label when the affinity has none"
    );
}

fn csi_pv(attributes: &[(&str, &str)], node_affinity: Option<VolumeNodeAffinity>) -> PersistentVolume {
    PersistentVolume {
        metadata: ObjectMeta { name: Some("pv".into()), ..Default::default() },
        spec: Some(PersistentVolumeSpec {
            csi: Some(CSIPersistentVolumeSource {
                driver: DRIVER.into(),
                volume_handle: "vol-0123".into(),
                fs_type: Some("xfs".into()),
                volume_attributes: Some(attributes.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
                ..Default::default()
            }),
            node_affinity,
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn csi_volumes_to_in_tree() {
    let pv = pv_to_in_tree(csi_pv(&[("partition", "3")], None)).unwrap();
    let spec = pv.spec.unwrap();
    assert_eq!(spec.csi, None);
    assert_eq!(
        spec.aws_elastic_block_store,
        Some(AWSElasticBlockStoreVolumeSource {
            volume_id: "vol-0123".into(),
            fs_type: Some("xfs".into()),
            read_only: None,
            partition: Some(3)
        })
    );
    let whole = pv_to_in_tree(csi_pv(&[("partition", "0")], None)).unwrap();
    assert_eq!(whole.spec.unwrap().aws_elastic_block_store.unwrap().partition, None, "partition 0 is the whole disk");
    assert_eq!(pv_to_in_tree(csi_pv(&[("partition", "x")], None)), Err(TranslationError::Partition("x".into())));

    let zoned = pv_to_in_tree(csi_pv(&[], affinity(&[(ZONE_TOPOLOGY_KEY, &["us-east-1a"])]))).unwrap();
    assert_eq!(
        zoned.spec.unwrap().node_affinity,
        affinity(&[
            ("topology.kubernetes.io/zone", &["us-east-1a"]),
            ("topology.kubernetes.io/region", &["us-east-1"])
        ]),
        "zone key back, region derived"
    );
    assert_eq!(
        zoned.metadata.labels,
        Some(BTreeMap::from([
            ("topology.kubernetes.io/region".into(), "us-east-1".into()),
            ("topology.kubernetes.io/zone".into(), "us-east-1a".into()),
        ])),
        "zone and region labels"
    );
    let unparsable = pv_to_in_tree(csi_pv(&[], affinity(&[(ZONE_TOPOLOGY_KEY, &["nowhere"])])));
    assert!(matches!(unparsable, Err(TranslationError::Topology(_))), "{unparsable:?}");
}

#[test]
fn regions_from_zones() {
    let zones = |z: &[&str]| z.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    // (case, zones, region | error)
    let table = [
        ("plain zone", zones(&["us-east-1a"]), Ok("us-east-1".to_string())),
        ("gov zone", zones(&["us-gov-west-1a"]), Ok("us-gov-west-1".to_string())),
        ("local zone", zones(&["us-west-2-lax-1a"]), Ok("us-west-2".to_string())),
        ("wavelength zone", zones(&["us-east-1-wl1-bos-wlz-1"]), Ok("us-east-1".to_string())),
        ("two zones of one region", zones(&["us-east-1a", "us-east-1b"]), Ok("us-east-1".to_string())),
        ("no zone", zones(&[]), Err("no zones specified".to_string())),
    ];
    for (case, zones, want) in table {
        assert_eq!(region_from_zones(&zones), want, "{case}");
    }
    // The zone's last part, by the class of its characters: a zone is anyone's label value, never a panic.
    let not_a_zone = |zone: &str| Err(format!("unexpected zone format: {zone} is not a valid AWS zone"));
    let by_character = [
        ("ASCII letter", "us-east-1a", Ok("us-east-1".to_string())),
        ("ASCII digits", "us-east-12", Ok("us-east-1".to_string())),
        ("one two-byte character", "us-east-é", not_a_zone("us-east-é")),
        ("a digit and a two-byte character", "us-east-1é", not_a_zone("us-east-1é")),
        ("an emoji", "us-east-\u{1F600}", not_a_zone("us-east-\u{1F600}")),
        ("a digit and an emoji", "us-east-1\u{1F600}", not_a_zone("us-east-1\u{1F600}")),
        ("empty last part", "us-east-", not_a_zone("us-east-")),
        ("empty zone", "", not_a_zone("")),
    ];
    for (case, zone, want) in by_character {
        assert_eq!(region_from_zones(&zones(&[zone])), want, "{case}");
    }
    assert!(region_from_zones(&zones(&["us-east-1a", "eu-west-1a"])).is_err(), "two regions");
    assert!(region_from_zones(&zones(&["nowhere"])).is_err(), "not a zone");
}
