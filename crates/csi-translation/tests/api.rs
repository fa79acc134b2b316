//! The crate's entry points: which drivers and plugins it knows, and the dispatch by PV source and driver.

use csi_translation::*;
use k8s_openapi::api::core::v1::{
    AWSElasticBlockStoreVolumeSource, CSIPersistentVolumeSource, GCEPersistentDiskVolumeSource, NFSVolumeSource,
    PersistentVolume, PersistentVolumeSpec, PortworxVolumeSource,
};
use k8s_openapi::api::storage::v1::StorageClass;

fn pv(spec: PersistentVolumeSpec) -> PersistentVolume {
    PersistentVolume { spec: Some(spec), ..Default::default() }
}

#[test]
fn names() {
    // (driver, in-tree name)
    let table = [
        ("ebs.csi.aws.com", "kubernetes.io/aws-ebs"),
        ("pd.csi.storage.gke.io", "kubernetes.io/gce-pd"),
        ("disk.csi.azure.com", "kubernetes.io/azure-disk"),
        ("file.csi.azure.com", "kubernetes.io/azure-file"),
        ("cinder.csi.openstack.org", "kubernetes.io/cinder"),
        ("csi.vsphere.vmware.com", "kubernetes.io/vsphere-volume"),
        ("pxd.portworx.com", "kubernetes.io/portworx-volume"),
    ];
    for (driver, in_tree) in table {
        assert_eq!(in_tree_name_for(driver), Some(in_tree));
        assert_eq!(csi_driver_for(in_tree), Some(driver));
    }
    assert_eq!(in_tree_name_for("hostpath.csi.k8s.io"), None, "a driver that replaces nothing");
    assert_eq!(csi_driver_for("kubernetes.io/no-such-plugin"), None);
}

#[test]
fn dispatch() {
    let ebs = pv(PersistentVolumeSpec {
        aws_elastic_block_store: Some(AWSElasticBlockStoreVolumeSource {
            volume_id: "vol-1".into(),
            ..Default::default()
        }),
        ..Default::default()
    });
    assert!(is_pv_migratable(&ebs));
    assert_eq!(csi_driver_of_in_tree_pv(&ebs), Some("ebs.csi.aws.com"));
    let csi = translate_in_tree_pv_to_csi(&ebs).unwrap();
    assert_eq!(csi.spec.as_ref().unwrap().csi.as_ref().unwrap().driver, "ebs.csi.aws.com");
    let back = translate_csi_pv_to_in_tree(&csi).unwrap();
    assert_eq!(back.spec.unwrap().aws_elastic_block_store.unwrap().volume_id, "vol-1");

    let gce = pv(PersistentVolumeSpec {
        gce_persistent_disk: Some(GCEPersistentDiskVolumeSource { pd_name: "disk".into(), ..Default::default() }),
        ..Default::default()
    });
    assert!(is_pv_migratable(&gce));
    assert_eq!(csi_driver_of_in_tree_pv(&gce), Some("pd.csi.storage.gke.io"));
    assert_eq!(translate_in_tree_pv_to_csi(&gce).unwrap().spec.unwrap().csi.unwrap().driver, "pd.csi.storage.gke.io");

    let portworx = pv(PersistentVolumeSpec {
        portworx_volume: Some(PortworxVolumeSource { volume_id: "px-1".into(), ..Default::default() }),
        ..Default::default()
    });
    assert!(is_pv_migratable(&portworx));
    assert_eq!(csi_driver_of_in_tree_pv(&portworx), Some("pxd.portworx.com"));
    let csi = translate_in_tree_pv_to_csi(&portworx).unwrap();
    assert_eq!(csi.spec.as_ref().unwrap().csi.as_ref().unwrap().volume_handle, "px-1");
    assert_eq!(translate_csi_pv_to_in_tree(&csi).unwrap().spec.unwrap().portworx_volume.unwrap().volume_id, "px-1");
    let class = StorageClass { provisioner: "kubernetes.io/portworx-volume".into(), ..Default::default() };
    let translated = translate_in_tree_storage_class_to_csi("kubernetes.io/portworx-volume", &class).unwrap();
    assert_eq!(translated.provisioner, "pxd.portworx.com", "Portworx's class names the CSI driver");

    // csi-translation-lib translates no other plugin: an NFS PV is left alone.
    let nfs = pv(PersistentVolumeSpec {
        nfs: Some(NFSVolumeSource { server: "nfs.example".into(), path: "/export".into(), read_only: None }),
        ..Default::default()
    });
    assert!(!is_pv_migratable(&nfs), "plugins upstream does not translate are left alone");
    assert_eq!(csi_driver_of_in_tree_pv(&nfs), None);
    assert_eq!(translate_in_tree_pv_to_csi(&nfs), Err(TranslationError::NotMigratable(String::new())));

    let foreign = pv(PersistentVolumeSpec {
        csi: Some(CSIPersistentVolumeSource { driver: "hostpath.csi.k8s.io".into(), ..Default::default() }),
        ..Default::default()
    });
    assert_eq!(csi_driver_of_in_tree_pv(&foreign), None, "a CSI PV is not an in-tree one");
    assert_eq!(
        translate_csi_pv_to_in_tree(&foreign),
        Err(TranslationError::UnknownDriver("hostpath.csi.k8s.io".into()))
    );
    assert_eq!(
        translate_csi_pv_to_in_tree(&pv(PersistentVolumeSpec::default())),
        Err(TranslationError::NotCsi(String::new()))
    );
    assert_eq!(
        translate_in_tree_storage_class_to_csi("kubernetes.io/no-such-plugin", &StorageClass::default()),
        Err(TranslationError::UnknownPlugin("kubernetes.io/no-such-plugin".into()))
    );
}
