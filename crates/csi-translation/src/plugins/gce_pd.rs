//! `kubernetes.io/gce-pd` ⇄ `pd.csi.storage.gke.io`.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{CSIPersistentVolumeSource, GCEPersistentDiskVolumeSource, PersistentVolume};
use k8s_openapi::api::storage::v1::StorageClass;

use super::{CSI_FS_TYPE_KEY, FS_TYPE_KEY, ZONE_KEY, ZONES_KEY, not_migratable, take_csi_source};
use crate::TranslationError;
use crate::topology::{
    LABEL_BETA_ZONE, LABEL_ZONE, MULTI_ZONE_DELIMITER, class_topologies, csi_to_in_tree, in_tree_to_csi,
};

pub const DRIVER: &str = "pd.csi.storage.gke.io";
pub const IN_TREE: &str = "kubernetes.io/gce-pd";
pub const ZONE_TOPOLOGY_KEY: &str = "topology.gke.io/zone";
/// In-tree PVs do not know their project (and zonal ones sometimes their zone): the driver fills it in.
const UNSPECIFIED: &str = "UNSPECIFIED";
const PARTITION_ATTRIBUTE: &str = "partition";
/// `projects/<project>/zones|regions/<location>/disks/<name>`.
const HANDLE_PARTS: usize = 6;
const HANDLE_DISK_NAME: usize = 5;

pub fn storage_class_to_csi(mut class: StorageClass) -> Result<StorageClass, TranslationError> {
    let mut parameters = BTreeMap::new();
    let mut zones = None;
    for (key, value) in class.parameters.take().unwrap_or_default() {
        match key.to_lowercase().as_str() {
            FS_TYPE_KEY => {
                parameters.insert(CSI_FS_TYPE_KEY.to_string(), value);
            }
            ZONE_KEY => zones = Some(vec![value]),
            ZONES_KEY => zones = Some(value.split(',').map(str::to_string).collect()),
            _ => {
                parameters.insert(key, value);
            }
        }
    }
    class.allowed_topologies = class_topologies(zones, class.allowed_topologies.take(), ZONE_TOPOLOGY_KEY)?;
    class.parameters = Some(parameters);
    Ok(class)
}

pub fn pv_to_csi(mut pv: PersistentVolume) -> Result<PersistentVolume, TranslationError> {
    let missing = not_migratable(&pv);
    // The zone label says where the disk is: one zone is a zonal disk, two a regional one.
    let labels = pv.metadata.labels.clone().unwrap_or_default();
    let zones_label = labels.get(LABEL_BETA_ZONE).filter(|z| !z.is_empty()).or_else(|| labels.get(LABEL_ZONE)).cloned();
    let spec = pv.spec.get_or_insert_with(Default::default);
    let pd = spec.gce_persistent_disk.take().ok_or(missing)?;
    let zones: Vec<String> = zones_label.unwrap_or_default().split(MULTI_ZONE_DELIMITER).map(str::to_string).collect();
    let volume_handle = match zones.as_slice() {
        [zone] if !zone.is_empty() => format!("projects/{UNSPECIFIED}/zones/{zone}/disks/{}", pd.pd_name),
        [_, _, ..] => {
            let region = region_from_zones(&zones)
                .map_err(|e| TranslationError::Topology(format!("failed to get region from zones: {e}")))?;
            format!("projects/{UNSPECIFIED}/regions/{region}/disks/{}", pd.pd_name)
        }
        _ => format!("projects/{UNSPECIFIED}/zones/{UNSPECIFIED}/disks/{}", pd.pd_name),
    };
    let partition = pd.partition.filter(|p| *p != 0).map(|p| p.to_string()).unwrap_or_default();
    spec.csi = Some(CSIPersistentVolumeSource {
        driver: DRIVER.to_string(),
        volume_handle,
        read_only: pd.read_only,
        fs_type: pd.fs_type,
        volume_attributes: Some(BTreeMap::from([(PARTITION_ATTRIBUTE.to_string(), partition)])),
        ..Default::default()
    });
    spec.access_modes = spec.access_modes.take().map(|modes| single_node_access_modes(&modes));
    in_tree_to_csi(&mut pv, ZONE_TOPOLOGY_KEY);
    Ok(pv)
}

pub fn pv_to_in_tree(mut pv: PersistentVolume) -> Result<PersistentVolume, TranslationError> {
    let csi = take_csi_source(&mut pv)?;
    let parts: Vec<&str> = csi.volume_handle.split('/').collect();
    if parts.len() < HANDLE_PARTS {
        return Err(TranslationError::VolumeHandle(format!(
            "failed to get id components: got {}, wanted {HANDLE_PARTS} components or more",
            parts.len()
        )));
    }
    let partition = match csi.volume_attributes.as_ref().and_then(|a| a.get(PARTITION_ATTRIBUTE)) {
        Some(text) if !text.is_empty() => {
            Some(text.parse::<i32>().map_err(|_| TranslationError::Partition(text.clone()))?).filter(|p| *p != 0)
        }
        _ => None,
    };
    let spec = pv.spec.get_or_insert_with(Default::default);
    spec.gce_persistent_disk = Some(GCEPersistentDiskVolumeSource {
        pd_name: parts[HANDLE_DISK_NAME].to_string(),
        fs_type: csi.fs_type,
        read_only: csi.read_only,
        partition,
    });
    csi_to_in_tree(&mut pv, ZONE_TOPOLOGY_KEY, Some(region_from_zones)).map_err(TranslationError::Topology)?;
    Ok(pv)
}

/// A PD attaches read-write to one node: ReadWriteMany is read as ReadWriteOnce, and the set is reduced to the one
/// mode the in-tree plugin offered.
fn single_node_access_modes(modes: &[String]) -> Vec<String> {
    let modes: BTreeSet<&str> =
        modes.iter().map(|m| if m == "ReadWriteMany" { "ReadWriteOnce" } else { m.as_str() }).collect();
    let mode = if modes.contains("ReadOnlyMany") && !modes.contains("ReadWriteOnce") {
        "ReadOnlyMany"
    } else {
        "ReadWriteOnce"
    };
    vec![mode.to_string()]
}

/// A handle of an in-tree PV with its project (and zone or region) left `UNSPECIFIED`, completed from the node ID
/// (`projects/<project>/zones/<zone>/instances/<name>`), as the driver reports it in ListVolumes; a complete handle
/// stays as it is (csi-translation-lib plugins/gce_pd.go, RepairVolumeHandle).
pub fn repair_volume_handle(handle: &str, node_id: &str) -> Result<String, TranslationError> {
    let parts: Vec<&str> = handle.split('/').collect();
    if parts.len() < HANDLE_PARTS {
        return Err(TranslationError::VolumeHandle(format!(
            "volume handle has wrong number of elements; got {}, wanted {HANDLE_PARTS} or more",
            parts.len()
        )));
    }
    if parts[1] != UNSPECIFIED {
        return Ok(handle.to_string());
    }
    let node: Vec<&str> = node_id.split('/').collect();
    if node.len() < HANDLE_PARTS {
        return Err(TranslationError::VolumeHandle(format!(
            "node handle has wrong number of elements; got {}, wanted {HANDLE_PARTS} or more",
            node.len()
        )));
    }
    let (project, location, disk) = (node[1], parts[3], parts[HANDLE_DISK_NAME]);
    match parts[2] {
        "zones" => {
            let zone = if location == UNSPECIFIED { node[3] } else { location };
            Ok(format!("projects/{project}/zones/{zone}/disks/{disk}"))
        }
        "regions" => {
            let region = match location {
                UNSPECIFIED => region_from_zones(&[node[3].to_string()]).map_err(|e| {
                    TranslationError::VolumeHandle(format!("failed to get region from zone {}: {e}", node[3]))
                })?,
                region => region.to_string(),
            };
            Ok(format!("projects/{project}/regions/{region}/disks/{disk}"))
        }
        other => Err(TranslationError::VolumeHandle(format!(
            "expected volume handle to have zones or regions regionality value, got: {other}"
        ))),
    }
}

/// The one region of GCE zones (`us-central1-a` → `us-central1`).
fn region_from_zones(zones: &[String]) -> Result<String, String> {
    if zones.is_empty() {
        return Err("no zones specified".to_string());
    }
    let mut regions = BTreeSet::new();
    for zone in zones {
        let parts: Vec<&str> = zone.split('-').collect();
        if parts.len() != 3 {
            return Err(format!("zone in unexpected format, expected: {{locale}}-{{region}}-{{zone}}, got: {zone}"));
        }
        regions.insert(parts[..2].join("-"));
    }
    match regions.len() {
        1 => Ok(regions.into_iter().next().unwrap_or_default()),
        _ => Err(format!("multiple or no regions gotten from zones, got: {regions:?}")),
    }
}

#[cfg(test)]
mod tests;
