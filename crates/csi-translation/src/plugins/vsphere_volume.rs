//! `kubernetes.io/vsphere-volume` ⇄ `csi.vsphere.vmware.com`. The driver takes the in-tree parameters under names of
//! its own (`<name>-migrationparam`) and drops the ones it cannot honour; zone and region both have driver keys.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{CSIPersistentVolumeSource, PersistentVolume, VsphereVirtualDiskVolumeSource};
use k8s_openapi::api::storage::v1::StorageClass;

use super::{CSI_FS_TYPE_KEY, FS_TYPE_KEY, not_migratable, take_csi_source};
use crate::TranslationError;
use crate::topology::{add_requirement, allowed_topologies_to_csi, label, replace_key, values_of, zone_labels};

pub const DRIVER: &str = "csi.vsphere.vmware.com";
pub const IN_TREE: &str = "kubernetes.io/vsphere-volume";
pub const ZONE_TOPOLOGY_KEY: &str = "topology.csi.vmware.com/zone";
pub const REGION_TOPOLOGY_KEY: &str = "topology.csi.vmware.com/region";
const STORAGE_POLICY_NAME: &str = "storagepolicyname";
/// Tells the driver the class came from the in-tree plugin.
const CSI_MIGRATION: &str = "csimigration";
/// Where the driver records the in-tree volume path of a volume it created.
const INITIAL_VOLUME_FILE_PATH: &str = "initialvolumefilepath";
/// In-tree parameters the driver honours under `<name>-migrationparam`.
const MIGRATION_PARAMETERS: [&str; 8] = [
    "datastore",
    "diskformat",
    "hostfailurestotolerate",
    "forceprovisioning",
    "cachereservation",
    "diskstripes",
    "objectspacereservation",
    "iopslimit",
];

pub fn storage_class_to_csi(mut class: StorageClass) -> Result<StorageClass, TranslationError> {
    let mut parameters = BTreeMap::new();
    for (key, value) in class.parameters.take().unwrap_or_default() {
        let lower = key.to_lowercase();
        if lower == FS_TYPE_KEY {
            parameters.insert(CSI_FS_TYPE_KEY.to_string(), value);
        } else if lower == STORAGE_POLICY_NAME {
            parameters.insert(STORAGE_POLICY_NAME.to_string(), value);
        } else if MIGRATION_PARAMETERS.contains(&lower.as_str()) {
            parameters.insert(format!("{lower}-migrationparam"), value);
        }
        // Anything else the driver would not understand: dropped, as upstream drops it.
    }
    parameters.insert(CSI_MIGRATION.to_string(), "true".to_string());
    if let Some(allowed) = class.allowed_topologies.take().filter(|a| !a.is_empty()) {
        class.allowed_topologies = Some(allowed_topologies_to_csi(&allowed, ZONE_TOPOLOGY_KEY));
    }
    class.parameters = Some(parameters);
    Ok(class)
}

pub fn pv_to_csi(mut pv: PersistentVolume) -> Result<PersistentVolume, TranslationError> {
    let missing = not_migratable(&pv);
    let spec = pv.spec.get_or_insert_with(Default::default);
    let disk = spec.vsphere_volume.take().ok_or(missing)?;
    let mut attributes = BTreeMap::new();
    if let Some(policy) = disk.storage_policy_name.filter(|p| !p.is_empty()) {
        attributes.insert(STORAGE_POLICY_NAME.to_string(), policy);
    }
    spec.csi = Some(CSIPersistentVolumeSource {
        driver: DRIVER.to_string(),
        volume_handle: disk.volume_path,
        fs_type: disk.fs_type,
        volume_attributes: Some(attributes),
        ..Default::default()
    });
    let (zone_label, region_label) = zone_labels(&pv);
    for (label_key, driver_key) in [(zone_label, ZONE_TOPOLOGY_KEY), (region_label, REGION_TOPOLOGY_KEY)] {
        if !values_of(&pv, label_key).is_empty() {
            replace_key(&mut pv, label_key, driver_key);
        } else if let Some(value) = label(&pv, label_key).filter(|v| !v.is_empty()).cloned() {
            add_requirement(&mut pv, driver_key, &[value]);
        }
    }
    Ok(pv)
}

pub fn pv_to_in_tree(mut pv: PersistentVolume) -> Result<PersistentVolume, TranslationError> {
    let csi = take_csi_source(&mut pv)?;
    let volume_path = csi.volume_attributes.as_ref().and_then(|a| a.get(INITIAL_VOLUME_FILE_PATH)).cloned();
    pv.spec.get_or_insert_with(Default::default).vsphere_volume = Some(VsphereVirtualDiskVolumeSource {
        volume_path: volume_path.unwrap_or_default(),
        fs_type: csi.fs_type,
        ..Default::default()
    });
    let (zone_label, region_label) = zone_labels(&pv);
    for (label_key, driver_key) in [(zone_label, ZONE_TOPOLOGY_KEY), (region_label, REGION_TOPOLOGY_KEY)] {
        replace_key(&mut pv, driver_key, label_key);
        if let Some(first) = values_of(&pv, label_key).into_iter().next() {
            pv.metadata.labels.get_or_insert_with(Default::default).entry(label_key.to_string()).or_insert(first);
        }
    }
    Ok(pv)
}

#[cfg(test)]
mod tests;
