//! CSI migration: a driver that replaces an in-tree plugin (`ebs.csi.aws.com` for `kubernetes.io/aws-ebs`, ...) also
//! serves that plugin's classes and volumes (external-provisioner pkg/controller/controller.go, the
//! `translator` calls in `Provision` and `Delete`). Classes are translated to their CSI form before anything reads
//! them, the PVs it creates are written back in their in-tree form, and in-tree PVs are translated to CSI to be
//! deleted. The translations themselves are the `csi-translation` crate's.

use std::borrow::Cow;

use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::api::storage::v1::StorageClass;

use super::names::ANN_PROVISIONED_BY;
use super::provisioner::Provisioner;
use super::refusal::Refusal;

/// Whether `class` belongs to the in-tree plugin this driver replaces.
pub fn is_migrated_class(provisioner: &Provisioner, class: &StorageClass) -> bool {
    provisioner.migrated_in_tree_name.as_deref() == Some(class.provisioner.as_str())
}

/// The class as the driver understands it: an in-tree class translated, any other as it is. A class that cannot be
/// translated is a definite failure, worded as upstream words it.
pub fn csi_class<'a>(provisioner: &Provisioner, class: &'a StorageClass) -> Result<Cow<'a, StorageClass>, Refusal> {
    if !is_migrated_class(provisioner, class) {
        return Ok(Cow::Borrowed(class));
    }
    csi_translation::translate_in_tree_storage_class_to_csi(&class.provisioner, class)
        .map(Cow::Owned)
        .map_err(|err| Refusal::finished(format!("failed to translate storage class: {err}")))
}

/// A PV as the deletion path reads it: an in-tree PV of the replaced plugin in its CSI form (with whether it was
/// translated), any other as it is.
pub fn csi_volume<'a>(
    provisioner: &Provisioner,
    volume: &'a PersistentVolume,
) -> Result<(Cow<'a, PersistentVolume>, bool), String> {
    if provisioner.migrated_in_tree_name.is_none() || !csi_translation::is_pv_migratable(volume) {
        return Ok((Cow::Borrowed(volume), false));
    }
    let translated = csi_translation::translate_in_tree_pv_to_csi(volume).map_err(|err| err.to_string())?;
    Ok((Cow::Owned(translated), true))
}

/// The PV this driver's volume gets in the API: in-tree form for a migrated class (upstream deletes the volume when
/// that translation fails). It names the in-tree plugin as its provisioner, the class's provisioner as stored (the
/// upstream library writes `pv.kubernetes.io/provisioned-by` from the class it read, before any translation), even
/// where the translated class names the driver (Portworx).
pub fn api_volume(pv: PersistentVolume, migrated: bool) -> Result<PersistentVolume, String> {
    if !migrated {
        return Ok(pv);
    }
    let driver = pv.spec.as_ref().and_then(|s| s.csi.as_ref()).map(|c| c.driver.clone()).unwrap_or_default();
    let mut in_tree = csi_translation::translate_csi_pv_to_in_tree(&pv)
        .map_err(|err| format!("failed to translate CSI PV to in-tree: {err}"))?;
    if let Some(plugin) = csi_translation::in_tree_name_for(&driver) {
        in_tree
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(ANN_PROVISIONED_BY.into(), plugin.into());
    }
    Ok(in_tree)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{
        AWSElasticBlockStoreVolumeSource, CSIPersistentVolumeSource, PersistentVolumeSpec,
    };

    use super::*;

    const IN_TREE: &str = "kubernetes.io/aws-ebs";

    fn provisioner(replaces: Option<&str>) -> Provisioner {
        let mut provisioner = Provisioner::new("ebs.csi.aws.com");
        provisioner.migrated_in_tree_name = replaces.map(str::to_string);
        provisioner
    }

    fn class(provisioner: &str) -> StorageClass {
        StorageClass { provisioner: provisioner.into(), ..Default::default() }
    }

    #[test]
    fn a_portworx_class_names_the_driver_and_its_volumes_the_plugin() {
        let mut provisioner = Provisioner::new("pxd.portworx.com");
        provisioner.migrated_in_tree_name = Some("kubernetes.io/portworx-volume".into());
        let class = class("kubernetes.io/portworx-volume");
        assert!(is_migrated_class(&provisioner, &class));
        assert_eq!(
            csi_class(&provisioner, &class).unwrap().provisioner,
            "pxd.portworx.com",
            "as upstream translates it"
        );

        let mut annotations = std::collections::BTreeMap::new();
        annotations.insert(ANN_PROVISIONED_BY.to_string(), "pxd.portworx.com".to_string());
        let csi = PersistentVolume {
            metadata: kube::api::ObjectMeta { annotations: Some(annotations), ..Default::default() },
            spec: Some(PersistentVolumeSpec {
                csi: Some(CSIPersistentVolumeSource {
                    driver: "pxd.portworx.com".into(),
                    volume_handle: "px-1".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let written = api_volume(csi, true).unwrap();
        assert_eq!(written.spec.unwrap().portworx_volume.unwrap().volume_id, "px-1");
        let provisioned_by = written.metadata.annotations.unwrap()[ANN_PROVISIONED_BY].clone();
        assert_eq!(provisioned_by, "kubernetes.io/portworx-volume", "the class's provisioner as stored");
    }

    #[test]
    fn classes_of_the_replaced_plugin_are_translated() {
        // (rule, driver replaces a plugin, class provisioner, migrated, translated)
        let table = [
            ("a class of the replaced plugin", Some(IN_TREE), IN_TREE, true, true),
            ("the driver's own class", Some(IN_TREE), "ebs.csi.aws.com", false, false),
            ("a driver that replaces nothing", None, IN_TREE, false, false),
        ];
        for (rule, replaces, class_provisioner, migrated, translated) in table {
            let (provisioner, class) = (provisioner(replaces), class(class_provisioner));
            assert_eq!(is_migrated_class(&provisioner, &class), migrated, "{rule}");
            let csi = csi_class(&provisioner, &class).unwrap();
            assert_eq!(matches!(csi, Cow::Owned(_)), translated, "{rule}");
            assert_eq!(csi.provisioner, class_provisioner, "{rule}: the provisioner name stays");
        }
    }

    #[test]
    fn in_tree_volumes_are_deleted_in_their_csi_form() {
        let ebs = PersistentVolume {
            spec: Some(PersistentVolumeSpec {
                aws_elastic_block_store: Some(AWSElasticBlockStoreVolumeSource {
                    volume_id: "vol-1".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let csi = PersistentVolume {
            spec: Some(PersistentVolumeSpec {
                csi: Some(CSIPersistentVolumeSource { driver: "ebs.csi.aws.com".into(), ..Default::default() }),
                ..Default::default()
            }),
            ..Default::default()
        };
        // (rule, driver replaces a plugin, volume, translated)
        let table = [
            ("an in-tree PV of the replaced plugin", Some(IN_TREE), &ebs, true),
            ("a CSI PV", Some(IN_TREE), &csi, false),
            ("a driver that replaces nothing", None, &ebs, false),
        ];
        for (rule, replaces, volume, translated) in table {
            let (form, migrated) = csi_volume(&provisioner(replaces), volume).unwrap();
            assert_eq!(migrated, translated, "{rule}");
            let handle = form.spec.as_ref().and_then(|s| s.csi.as_ref()).map(|c| c.volume_handle.as_str());
            assert_eq!(handle.is_some(), translated || volume.spec.as_ref().unwrap().csi.is_some(), "{rule}");
        }
        assert_eq!(api_volume(csi.clone(), false).unwrap(), csi, "a volume of a CSI class is written as it is");
        assert!(api_volume(csi, true).unwrap().spec.unwrap().aws_elastic_block_store.is_some());
    }
}
