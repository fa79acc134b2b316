//! `kubernetes.io/azure-disk` ⇄ `disk.csi.azure.com`. Only managed disks migrate.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    AzureDiskVolumeSource, CSIPersistentVolumeSource, PersistentVolume, TopologySelectorTerm,
};
use k8s_openapi::api::storage::v1::StorageClass;

use super::{ZONE_KEY, ZONES_KEY, not_migratable, take_csi_source};
use crate::TranslationError;
use crate::topology::class_topologies;

pub const DRIVER: &str = "disk.csi.azure.com";
pub const IN_TREE: &str = "kubernetes.io/azure-disk";
pub const ZONE_TOPOLOGY_KEY: &str = "topology.disk.csi.azure.com/zone";
const KIND_ATTRIBUTE: &str = "kind";
const CACHING_MODE_ATTRIBUTE: &str = "cachingmode";
const FS_TYPE_ATTRIBUTE: &str = "fstype";
const MANAGED: &str = "Managed";
const MANAGED_DISK_PATH: &str = "/providers/Microsoft.Compute/disks/";

pub fn storage_class_to_csi(mut class: StorageClass) -> Result<StorageClass, TranslationError> {
    let mut parameters = BTreeMap::new();
    let mut zones = None;
    for (key, value) in class.parameters.take().unwrap_or_default() {
        match key.to_lowercase().as_str() {
            ZONE_KEY => zones = Some(vec![value]),
            ZONES_KEY => zones = Some(value.split(',').map(str::to_string).collect()),
            _ => {
                parameters.insert(key, value);
            }
        }
    }
    let topologies = class_topologies(zones, class.allowed_topologies.take(), ZONE_TOPOLOGY_KEY)?;
    class.allowed_topologies = topologies.map(unzoned_regions_to_csi);
    class.parameters = Some(parameters);
    Ok(class)
}

/// In-tree Azure nodes outside availability zones carry a fault-domain number as their zone; the driver labels
/// them with an empty zone instead.
fn unzoned_regions_to_csi(mut terms: Vec<TopologySelectorTerm>) -> Vec<TopologySelectorTerm> {
    for expression in terms.iter_mut().flat_map(|t| t.match_label_expressions.iter_mut().flatten()) {
        if expression.key == ZONE_TOPOLOGY_KEY {
            for value in &mut expression.values {
                if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
                    value.clear();
                }
            }
        }
    }
    terms
}

pub fn pv_to_csi(mut pv: PersistentVolume) -> Result<PersistentVolume, TranslationError> {
    let missing = not_migratable(&pv);
    let spec = pv.spec.get_or_insert_with(Default::default);
    let disk = spec.azure_disk.take().ok_or(missing)?;
    if let Some(kind) = disk.kind.as_deref().filter(|k| !k.eq_ignore_ascii_case(MANAGED)) {
        return Err(TranslationError::Unsupported(format!("kind({kind}) is not supported in csi migration")));
    }
    let mut attributes = BTreeMap::from([(KIND_ATTRIBUTE.to_string(), MANAGED.to_string())]);
    if let Some(mode) = disk.caching_mode {
        attributes.insert(CACHING_MODE_ATTRIBUTE.to_string(), mode);
    }
    if let Some(fs_type) = &disk.fs_type {
        attributes.insert(FS_TYPE_ATTRIBUTE.to_string(), fs_type.clone());
    }
    spec.csi = Some(CSIPersistentVolumeSource {
        driver: DRIVER.to_string(),
        volume_handle: disk.disk_uri,
        read_only: disk.read_only,
        fs_type: disk.fs_type,
        volume_attributes: Some(attributes),
        ..Default::default()
    });
    Ok(pv)
}

pub fn pv_to_in_tree(mut pv: PersistentVolume) -> Result<PersistentVolume, TranslationError> {
    let csi = take_csi_source(&mut pv)?;
    let disk_name = disk_name(&csi.volume_handle)
        .ok_or_else(|| TranslationError::VolumeHandle(format!("could not get disk name from {}", csi.volume_handle)))?;
    let mut disk = AzureDiskVolumeSource {
        disk_name,
        disk_uri: csi.volume_handle.clone(),
        fs_type: Some(csi.fs_type.clone().unwrap_or_default()),
        read_only: Some(csi.read_only.unwrap_or(false)),
        kind: Some(MANAGED.to_string()),
        caching_mode: None,
    };
    for (key, value) in csi.volume_attributes.iter().flatten().filter(|(_, v)| !v.is_empty()) {
        match key.to_lowercase().as_str() {
            CACHING_MODE_ATTRIBUTE => disk.caching_mode = Some(value.clone()),
            FS_TYPE_ATTRIBUTE => disk.fs_type = Some(value.clone()),
            _ => {}
        }
    }
    pv.spec.get_or_insert_with(Default::default).azure_disk = Some(disk);
    Ok(pv)
}

/// The disk name at the end of a managed disk's resource id
/// (`/subscriptions/…/resourceGroups/…/providers/Microsoft.Compute/disks/<name>`) or of an unmanaged disk's blob URL
/// (`https://<account>…/vhds/<name>`).
fn disk_name(uri: &str) -> Option<String> {
    let managed = !uri.get(..4).is_some_and(|scheme| scheme.eq_ignore_ascii_case("http"));
    let name = if managed {
        let (before, name) = uri.rsplit_once(MANAGED_DISK_PATH)?;
        let (_, after_subscriptions) = before.split_once("/subscriptions/")?;
        after_subscriptions.contains("/resourceGroups/").then_some(name)?
    } else {
        let (_, after_scheme) = uri.split_once("://")?;
        let (_, name) = after_scheme.rsplit_once("/vhds/")?;
        name
    };
    (!name.is_empty()).then(|| name.to_string())
}

#[cfg(test)]
mod tests;
