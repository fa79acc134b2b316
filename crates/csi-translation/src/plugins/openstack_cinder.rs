//! `kubernetes.io/cinder` ⇄ `cinder.csi.openstack.org`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{CSIPersistentVolumeSource, CinderPersistentVolumeSource, PersistentVolume};
use k8s_openapi::api::storage::v1::StorageClass;

use super::{CSI_FS_TYPE_KEY, FS_TYPE_KEY, not_migratable, take_csi_source};
use crate::TranslationError;
use crate::topology::{allowed_topologies_to_csi, csi_to_in_tree, in_tree_to_csi};

pub const DRIVER: &str = "cinder.csi.openstack.org";
pub const IN_TREE: &str = "kubernetes.io/cinder";
pub const ZONE_TOPOLOGY_KEY: &str = "topology.cinder.csi.openstack.org/zone";

pub fn storage_class_to_csi(mut class: StorageClass) -> Result<StorageClass, TranslationError> {
    let parameters = class
        .parameters
        .take()
        .unwrap_or_default()
        .into_iter()
        .map(
            |(key, value)| {
                if key.to_lowercase() == FS_TYPE_KEY { (CSI_FS_TYPE_KEY.to_string(), value) } else { (key, value) }
            },
        )
        .collect();
    if let Some(allowed) = class.allowed_topologies.take().filter(|a| !a.is_empty()) {
        class.allowed_topologies = Some(allowed_topologies_to_csi(&allowed, ZONE_TOPOLOGY_KEY));
    }
    class.parameters = Some(parameters);
    Ok(class)
}

pub fn pv_to_csi(mut pv: PersistentVolume) -> Result<PersistentVolume, TranslationError> {
    let missing = not_migratable(&pv);
    let spec = pv.spec.get_or_insert_with(Default::default);
    let cinder = spec.cinder.take().ok_or(missing)?;
    spec.csi = Some(CSIPersistentVolumeSource {
        driver: DRIVER.to_string(),
        volume_handle: cinder.volume_id,
        read_only: cinder.read_only,
        fs_type: cinder.fs_type,
        volume_attributes: Some(BTreeMap::new()),
        ..Default::default()
    });
    in_tree_to_csi(&mut pv, ZONE_TOPOLOGY_KEY);
    Ok(pv)
}

pub fn pv_to_in_tree(mut pv: PersistentVolume) -> Result<PersistentVolume, TranslationError> {
    let csi = take_csi_source(&mut pv)?;
    let spec = pv.spec.get_or_insert_with(Default::default);
    spec.cinder = Some(CinderPersistentVolumeSource {
        volume_id: csi.volume_handle,
        fs_type: csi.fs_type,
        read_only: csi.read_only,
        secret_ref: None,
    });
    // A Cinder region cannot be told from its zones: no region requirement is added.
    csi_to_in_tree(&mut pv, ZONE_TOPOLOGY_KEY, None).map_err(TranslationError::Topology)?;
    Ok(pv)
}

#[cfg(test)]
mod tests;
