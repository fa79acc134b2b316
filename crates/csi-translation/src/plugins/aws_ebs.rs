//! `kubernetes.io/aws-ebs` ⇄ `ebs.csi.aws.com`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{AWSElasticBlockStoreVolumeSource, CSIPersistentVolumeSource, PersistentVolume};
use k8s_openapi::api::storage::v1::StorageClass;

use super::{CSI_FS_TYPE_KEY, FS_TYPE_KEY, ZONE_KEY, ZONES_KEY, not_migratable, take_csi_source};
use crate::TranslationError;
use crate::topology::{class_topologies, csi_to_in_tree, in_tree_to_csi};

pub const DRIVER: &str = "ebs.csi.aws.com";
pub const IN_TREE: &str = "kubernetes.io/aws-ebs";
pub const ZONE_TOPOLOGY_KEY: &str = "topology.ebs.csi.aws.com/zone";
const IOPS_PER_GB_KEY: &str = "iopspergb";
/// The driver rounds IOPS up to its minimum only when asked; the in-tree plugin always did.
const ALLOW_IOPS_INCREASE_KEY: &str = "allowautoiopspergbincrease";
const PARTITION_ATTRIBUTE: &str = "partition";

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
            IOPS_PER_GB_KEY => {
                parameters.insert(key, value);
                parameters.insert(ALLOW_IOPS_INCREASE_KEY.to_string(), "true".to_string());
            }
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
    let spec = pv.spec.get_or_insert_with(Default::default);
    let ebs = spec.aws_elastic_block_store.take().ok_or(missing)?;
    let volume_handle = ebs_volume_id(&ebs.volume_id)?;
    spec.csi = Some(CSIPersistentVolumeSource {
        driver: DRIVER.to_string(),
        volume_handle,
        read_only: ebs.read_only,
        fs_type: ebs.fs_type,
        volume_attributes: Some(BTreeMap::from([(
            PARTITION_ATTRIBUTE.to_string(),
            ebs.partition.unwrap_or(0).to_string(),
        )])),
        ..Default::default()
    });
    in_tree_to_csi(&mut pv, ZONE_TOPOLOGY_KEY);
    Ok(pv)
}

pub fn pv_to_in_tree(mut pv: PersistentVolume) -> Result<PersistentVolume, TranslationError> {
    let csi = take_csi_source(&mut pv)?;
    let spec = pv.spec.get_or_insert_with(Default::default);
    let partition = match csi.volume_attributes.as_ref().and_then(|a| a.get(PARTITION_ATTRIBUTE)) {
        Some(text) => Some(text.parse::<i32>().map_err(|_| TranslationError::Partition(text.clone()))?),
        None => None,
    }
    // Partition 0 means the whole disk, which the in-tree source says by leaving the field out.
    .filter(|p| *p != 0);
    spec.aws_elastic_block_store = Some(AWSElasticBlockStoreVolumeSource {
        volume_id: csi.volume_handle,
        fs_type: csi.fs_type,
        read_only: csi.read_only,
        partition,
    });
    csi_to_in_tree(&mut pv, ZONE_TOPOLOGY_KEY, Some(region_from_zones)).map_err(TranslationError::Topology)?;
    Ok(pv)
}

/// `aws://<zone>/vol-…` (the in-tree plugin's form) to the EBS volume id; anything else is taken as the id.
fn ebs_volume_id(kubernetes_id: &str) -> Result<String, TranslationError> {
    let Some(rest) = kubernetes_id.strip_prefix("aws://") else { return Ok(kubernetes_id.to_string()) };
    // After the scheme comes the zone (the URL host), then the volume id as the path.
    let path = rest.split_once('/').map(|(_, path)| path).unwrap_or_default();
    let id = path.trim_matches('/');
    if id.starts_with("vol-") && !id.contains('/') {
        Ok(id.to_string())
    } else {
        Err(TranslationError::EbsVolumeId(format!("invalid format for AWS volume ({kubernetes_id})")))
    }
}

/// The one region of a set of AWS zones: `us-east-1a` → `us-east-1`; local and wavelength zones
/// (`us-west-2-lax-1a`, `us-east-1-wl1-bos-wlz-1`) keep their first three parts.
fn region_from_zones(zones: &[String]) -> Result<String, String> {
    if zones.is_empty() {
        return Err("no zones specified".to_string());
    }
    let mut regions = std::collections::BTreeSet::new();
    for zone in zones {
        let unexpected = || format!("unexpected zone format: {zone} is not a valid AWS zone");
        let mut parts: Vec<&str> = zone.split('-').collect();
        let last = parts.last().copied().unwrap_or_default();
        let region = if (parts.len() == 3 || parts.len() == 4) && last.len() == 2 {
            // Two bytes, the first kept (upstream's `getAwsRegionFromZones` slices bytes): two ASCII characters,
            // or one character of two bytes, which has no first byte to keep alone.
            let trimmed = last.get(..1).ok_or_else(unexpected)?;
            let count = parts.len();
            parts[count - 1] = trimmed;
            parts.join("-")
        } else if parts.len() == 5 || parts.len() == 7 {
            parts[..3].join("-")
        } else {
            return Err(unexpected());
        };
        regions.insert(region);
    }
    match regions.len() {
        1 => Ok(regions.into_iter().next().unwrap_or_default()),
        _ => Err(format!("multiple or no regions gotten from zones, got: {regions:?}")),
    }
}

#[cfg(test)]
mod tests;
