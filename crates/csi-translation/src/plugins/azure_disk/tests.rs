use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PersistentVolumeSpec, TopologySelectorLabelRequirement};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;

const URI: &str = "/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Compute/disks/pvc-disk";

#[test]
fn disk_names() {
    // (case, uri, name)
    let table = [
        ("managed", URI, Some("pvc-disk")),
        ("unmanaged", "https://account.blob.core.windows.net/vhds/pvc-disk.vhd", Some("pvc-disk.vhd")),
        ("managed without a resource group", "/subscriptions/sub/providers/Microsoft.Compute/disks/d", None),
        ("managed without a name", "/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Compute/disks/", None),
        ("not a disk", "vol-1", None),
        ("unmanaged without vhds", "https://account.blob.core.windows.net/d.vhd", None),
    ];
    for (case, uri, want) in table {
        assert_eq!(disk_name(uri).as_deref(), want, "{case}");
    }
}

fn in_tree(kind: Option<&str>, caching: Option<&str>) -> PersistentVolume {
    PersistentVolume {
        metadata: ObjectMeta { name: Some("pv".into()), ..Default::default() },
        spec: Some(PersistentVolumeSpec {
            azure_disk: Some(AzureDiskVolumeSource {
                disk_name: "pvc-disk".into(),
                disk_uri: URI.into(),
                caching_mode: caching.map(str::to_string),
                fs_type: Some("ext4".into()),
                read_only: Some(false),
                kind: kind.map(str::to_string),
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn volumes_both_ways() {
    let csi = pv_to_csi(in_tree(Some("Managed"), Some("ReadOnly"))).unwrap();
    let source = csi.spec.clone().unwrap().csi.unwrap();
    assert_eq!((source.driver.as_str(), source.volume_handle.as_str()), (DRIVER, URI));
    assert_eq!(
        source.volume_attributes,
        Some(BTreeMap::from([
            ("cachingmode".into(), "ReadOnly".into()),
            ("fstype".into(), "ext4".into()),
            ("kind".into(), "Managed".into()),
        ]))
    );
    let back = pv_to_in_tree(csi).unwrap();
    assert_eq!(back.spec.unwrap().azure_disk, in_tree(Some("Managed"), Some("ReadOnly")).spec.unwrap().azure_disk);

    assert!(pv_to_csi(in_tree(None, None)).is_ok(), "no kind means managed");
    assert_eq!(
        pv_to_csi(in_tree(Some("Dedicated"), None)),
        Err(TranslationError::Unsupported("kind(Dedicated) is not supported in csi migration".into()))
    );
    let mut bad = in_tree(None, None);
    bad.spec.as_mut().unwrap().azure_disk.as_mut().unwrap().disk_uri = "disk".into();
    let bad = pv_to_csi(bad).unwrap();
    assert_eq!(pv_to_in_tree(bad), Err(TranslationError::VolumeHandle("could not get disk name from disk".into())));
}

#[test]
fn storage_classes() {
    let class = StorageClass {
        provisioner: IN_TREE.into(),
        parameters: Some(BTreeMap::from([
            ("skuName".into(), "Premium_LRS".into()),
            ("zones".into(), "eastus-1,0".into()),
        ])),
        ..Default::default()
    };
    let translated = storage_class_to_csi(class).unwrap();
    assert_eq!(translated.parameters, Some(BTreeMap::from([("skuName".into(), "Premium_LRS".into())])));
    assert_eq!(
        translated.allowed_topologies,
        Some(vec![TopologySelectorTerm {
            match_label_expressions: Some(vec![TopologySelectorLabelRequirement {
                key: ZONE_TOPOLOGY_KEY.into(),
                values: vec!["eastus-1".into(), String::new()],
            }]),
        }]),
        "zones to the driver's key; a fault-domain number means no zone"
    );
}
