//! A PersistentVolumeClaim as a cache holds it: every field but `metadata.managedFields`. What every claim has is
//! held compact: the access modes, requested size, class, mode and volume of its spec and the phase, access modes
//! and capacity of its status; the rest of either (data sources, selector, attributes class, limits, conditions,
//! resize and modify status) is kept as it came, only when there is any.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimSpec, PersistentVolumeClaimStatus, VolumeResourceRequirements,
};

use super::meta::SlimMeta;
use super::{Cached, Key, Part, SlimObject, held_slim};
use crate::watch::strings::{List, Pairs, list, quantity_map, shared_opt, string, text, to_list, to_quantity_map};

#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    access_modes: Option<List>,
    /// `resources.requests`, when `resources` is there.
    requests: Option<Option<Pairs>>,
    storage_class_name: Option<Arc<str>>,
    volume_mode: Option<Arc<str>>,
    volume_name: Option<Box<str>>,
    /// Every other field (`resources` holding its limits only).
    rest: Option<Box<PersistentVolumeClaimSpec>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Status {
    access_modes: Option<List>,
    capacity: Option<Pairs>,
    phase: Option<Arc<str>>,
    rest: Option<Box<PersistentVolumeClaimStatus>>,
}

held_slim!(PersistentVolumeClaim, Spec, Status);

impl Part<PersistentVolumeClaimSpec> for Spec {
    fn of(spec: &PersistentVolumeClaimSpec) -> Spec {
        let PersistentVolumeClaimSpec {
            access_modes,
            data_source,
            data_source_ref,
            resources,
            selector,
            storage_class_name,
            volume_attributes_class_name,
            volume_mode,
            volume_name,
        } = spec;
        let limits = resources.as_ref().and_then(|r| r.limits.clone());
        let rest = PersistentVolumeClaimSpec {
            data_source: data_source.clone(),
            data_source_ref: data_source_ref.clone(),
            resources: limits.map(|limits| VolumeResourceRequirements { limits: Some(limits), requests: None }),
            selector: selector.clone(),
            volume_attributes_class_name: volume_attributes_class_name.clone(),
            ..Default::default()
        };
        Spec {
            access_modes: list(access_modes),
            requests: resources.as_ref().map(|r| quantity_map(&r.requests)),
            storage_class_name: shared_opt(storage_class_name),
            volume_mode: shared_opt(volume_mode),
            volume_name: text(volume_name),
            rest: (rest != PersistentVolumeClaimSpec::default()).then(|| Box::new(rest)),
        }
    }

    fn full(&self) -> PersistentVolumeClaimSpec {
        let rest = self.rest.as_deref().cloned().unwrap_or_default();
        let limits = rest.resources.and_then(|r| r.limits);
        let resources = match &self.requests {
            Some(requests) => Some(VolumeResourceRequirements { limits, requests: to_quantity_map(requests) }),
            None => limits.map(|limits| VolumeResourceRequirements { limits: Some(limits), requests: None }),
        };
        PersistentVolumeClaimSpec {
            access_modes: to_list(&self.access_modes),
            resources,
            storage_class_name: string(&self.storage_class_name),
            volume_mode: string(&self.volume_mode),
            volume_name: string(&self.volume_name),
            ..rest
        }
    }
}

impl Part<PersistentVolumeClaimStatus> for Status {
    fn of(status: &PersistentVolumeClaimStatus) -> Status {
        let PersistentVolumeClaimStatus {
            access_modes,
            allocated_resource_statuses,
            allocated_resources,
            capacity,
            conditions,
            current_volume_attributes_class_name,
            modify_volume_status,
            phase,
        } = status;
        let rest = PersistentVolumeClaimStatus {
            allocated_resource_statuses: allocated_resource_statuses.clone(),
            allocated_resources: allocated_resources.clone(),
            conditions: conditions.clone(),
            current_volume_attributes_class_name: current_volume_attributes_class_name.clone(),
            modify_volume_status: modify_volume_status.clone(),
            ..Default::default()
        };
        Status {
            access_modes: list(access_modes),
            capacity: quantity_map(capacity),
            phase: shared_opt(phase),
            rest: (rest != PersistentVolumeClaimStatus::default()).then(|| Box::new(rest)),
        }
    }

    fn full(&self) -> PersistentVolumeClaimStatus {
        let rest = self.rest.as_deref().cloned().unwrap_or_default();
        PersistentVolumeClaimStatus {
            access_modes: to_list(&self.access_modes),
            capacity: to_quantity_map(&self.capacity),
            phase: string(&self.phase),
            ..rest
        }
    }
}
