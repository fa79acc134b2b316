//! CSI migration: the in-tree volume plugins Kubernetes replaced with CSI drivers left StorageClasses and
//! PersistentVolumes in their own format (`kubernetes.io/aws-ebs`, `awsElasticBlockStore: {volumeID}`). A sidecar of
//! the replacing driver serves them by translating: classes to the parameters and topology keys the driver takes,
//! in-tree PVs to their `spec.csi` form to act on them, and the PVs it creates back to the in-tree form the cluster
//! expects for such classes.
//!
//! The rules are Kubernetes' csi-translation-lib's, plugin by plugin. Supported: AWS EBS, GCE PD, Azure Disk,
//! Azure File, OpenStack Cinder, Portworx and vSphere, every plugin csi-translation-lib translates; for any other
//! driver [`in_tree_name_for`] says None and nothing is translated.

mod error;
mod plugins;
mod topology;

use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::api::storage::v1::StorageClass;

pub use error::TranslationError;
use plugins::Plugin;

/// The in-tree plugin a CSI driver replaces, if this crate can translate for it.
pub fn in_tree_name_for(csi_driver: &str) -> Option<&'static str> {
    Plugin::by_driver(csi_driver).map(Plugin::in_tree_name)
}

/// The CSI driver that replaces an in-tree plugin, if this crate can translate for it.
pub fn csi_driver_for(in_tree_name: &str) -> Option<&'static str> {
    Plugin::by_in_tree_name(in_tree_name).map(Plugin::driver_name)
}

/// A StorageClass of the in-tree plugin `in_tree_name` as its CSI driver takes it. The provisioner name stays, but
/// for Portworx, whose translated class names the CSI driver (as upstream's).
pub fn translate_in_tree_storage_class_to_csi(
    in_tree_name: &str,
    class: &StorageClass,
) -> Result<StorageClass, TranslationError> {
    let plugin = Plugin::by_in_tree_name(in_tree_name)
        .ok_or_else(|| TranslationError::UnknownPlugin(in_tree_name.to_string()))?;
    plugin.storage_class_to_csi(class.clone())
}

/// Whether the PV has the source of an in-tree plugin this crate translates.
pub fn is_pv_migratable(pv: &PersistentVolume) -> bool {
    Plugin::of_in_tree_pv(pv).is_some()
}

/// The CSI driver that replaces the in-tree plugin whose source the PV has; None for a CSI PV or a plugin this crate
/// does not translate.
pub fn csi_driver_of_in_tree_pv(pv: &PersistentVolume) -> Option<&'static str> {
    Plugin::of_in_tree_pv(pv).map(Plugin::driver_name)
}

/// An in-tree PV in its CSI form (`spec.csi` instead of the plugin's source, topology keys of the driver).
pub fn translate_in_tree_pv_to_csi(pv: &PersistentVolume) -> Result<PersistentVolume, TranslationError> {
    let plugin = Plugin::of_in_tree_pv(pv).ok_or_else(|| TranslationError::NotMigratable(name_of(pv)))?;
    plugin.pv_to_csi(pv.clone())
}

/// The handle ListVolumes reports for a volume of `driver` whose handle came from an in-tree PV: GCE PD's in-tree
/// form leaves the project (and maybe the zone) out and the driver's node ID has them (csi-translation-lib
/// translate.go, RepairVolumeHandle). An error for a driver that replaces no in-tree plugin.
pub fn repair_volume_handle(driver: &str, handle: &str, node_id: &str) -> Result<String, TranslationError> {
    let plugin = Plugin::by_driver(driver).ok_or_else(|| TranslationError::UnknownDriver(driver.to_string()))?;
    plugin.repair_volume_handle(handle, node_id)
}

/// A CSI PV of a replacing driver in the in-tree plugin's form.
pub fn translate_csi_pv_to_in_tree(pv: &PersistentVolume) -> Result<PersistentVolume, TranslationError> {
    let driver = pv.spec.as_ref().and_then(|s| s.csi.as_ref()).map(|c| c.driver.clone());
    let Some(driver) = driver else { return Err(TranslationError::NotCsi(name_of(pv))) };
    let plugin = Plugin::by_driver(&driver).ok_or(TranslationError::UnknownDriver(driver))?;
    plugin.pv_to_in_tree(pv.clone())
}

fn name_of(pv: &PersistentVolume) -> String {
    pv.metadata.name.clone().unwrap_or_default()
}
