//! What a claim and its volume say, read the way upstream reads them (a missing field reads as Go's zero value).

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimCondition};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::translate::names::{CLAIM_BOUND, CONDITION_TRUE, RESOURCE_STORAGE};

/// `namespace/name`, the key upstream keeps its per-claim memory under and prints in messages.
pub fn claim_key(claim: &PersistentVolumeClaim) -> String {
    let name = claim.metadata.name.as_deref().unwrap_or_default();
    match claim.metadata.namespace.as_deref() {
        Some(namespace) if !namespace.is_empty() => format!("{namespace}/{name}"),
        _ => name.to_string(),
    }
}

pub fn claim_name(claim: &PersistentVolumeClaim) -> &str {
    claim.metadata.name.as_deref().unwrap_or_default()
}

pub fn volume_name(volume: &PersistentVolume) -> &str {
    volume.metadata.name.as_deref().unwrap_or_default()
}

/// `spec.volumeName`, "" when unset.
pub fn bound_volume_name(claim: &PersistentVolumeClaim) -> &str {
    claim.spec.as_ref().and_then(|s| s.volume_name.as_deref()).unwrap_or_default()
}

pub fn is_bound(claim: &PersistentVolumeClaim) -> bool {
    claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some(CLAIM_BOUND)
}

pub fn annotation<'a>(claim: &'a PersistentVolumeClaim, key: &str) -> Option<&'a str> {
    claim.metadata.annotations.as_ref().and_then(|a| a.get(key)).map(String::as_str)
}

pub fn volume_annotation<'a>(volume: &'a PersistentVolume, key: &str) -> Option<&'a str> {
    volume.metadata.annotations.as_ref().and_then(|a| a.get(key)).map(String::as_str)
}

/// `spec.resources.requests["storage"]`.
pub fn requested_size(claim: &PersistentVolumeClaim) -> Option<&Quantity> {
    claim.spec.as_ref()?.resources.as_ref()?.requests.as_ref()?.get(RESOURCE_STORAGE)
}

/// `status.capacity["storage"]`.
pub fn status_capacity(claim: &PersistentVolumeClaim) -> Option<&Quantity> {
    claim.status.as_ref()?.capacity.as_ref()?.get(RESOURCE_STORAGE)
}

/// `status.allocatedResources["storage"]`.
pub fn allocated_size(claim: &PersistentVolumeClaim) -> Option<&Quantity> {
    claim.status.as_ref()?.allocated_resources.as_ref()?.get(RESOURCE_STORAGE)
}

/// `status.allocatedResourceStatuses["storage"]`, "" when unset.
pub fn resize_status(claim: &PersistentVolumeClaim) -> &str {
    claim
        .status
        .as_ref()
        .and_then(|s| s.allocated_resource_statuses.as_ref())
        .and_then(|m| m.get(RESOURCE_STORAGE))
        .map(String::as_str)
        .unwrap_or_default()
}

/// `spec.capacity["storage"]` of the volume.
pub fn volume_capacity(volume: &PersistentVolume) -> Option<&Quantity> {
    volume.spec.as_ref()?.capacity.as_ref()?.get(RESOURCE_STORAGE)
}

pub fn conditions(claim: &PersistentVolumeClaim) -> &[PersistentVolumeClaimCondition] {
    claim.status.as_ref().and_then(|s| s.conditions.as_deref()).unwrap_or_default()
}

/// Whether the claim has a condition of this type (any status).
pub fn has_condition(claim: &PersistentVolumeClaim, type_: &str) -> bool {
    conditions(claim).iter().any(|c| c.type_ == type_)
}

/// Whether the claim has a condition of this type with status True.
pub fn has_true_condition(claim: &PersistentVolumeClaim, type_: &str) -> bool {
    conditions(claim).iter().any(|c| c.type_ == type_ && c.status == CONDITION_TRUE)
}

/// `spec.volumeAttributesClassName`, "" when unset.
pub fn requested_class(claim: &PersistentVolumeClaim) -> &str {
    claim.spec.as_ref().and_then(|s| s.volume_attributes_class_name.as_deref()).unwrap_or_default()
}

/// `status.currentVolumeAttributesClassName`, "" when unset.
pub fn current_class(claim: &PersistentVolumeClaim) -> &str {
    claim.status.as_ref().and_then(|s| s.current_volume_attributes_class_name.as_deref()).unwrap_or_default()
}
