//! The writes the resizer makes, as plain values: a change to a claim's status (with the annotations that upstream
//! also writes through the `status` subresource) and a change to a PersistentVolume.
//!
//! Each becomes a strategic merge patch, the kind upstream sends: maps are merged key by key, `status.conditions` is
//! merged by `type`, and `metadata.resourceVersion`, when present, makes the write fail with a Conflict if the object
//! changed since it was read. [`ClaimStatusPatch::apply`] computes what the API server will store, which the tests
//! check and which a controller may put back into its store.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ModifyVolumeStatus, PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimCondition,
    PersistentVolumeClaimStatus, PersistentVolumeSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::{Map, Value, json};

use crate::translate::names::RESOURCE_STORAGE;

/// One change to `status.conditions`.
#[derive(Clone, Debug, PartialEq)]
pub enum ConditionChange {
    /// Add the condition, or replace every field of the one of the same type.
    Set(PersistentVolumeClaimCondition),
    /// Remove the condition of this type.
    Remove(String),
}

/// A change to `status.allocatedResourceStatuses["storage"]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StorageStatusChange {
    Set(&'static str),
    /// Delete the key (the map disappears when it becomes empty).
    Remove,
}

/// A change to `status.modifyVolumeStatus`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModifyVolumeStatusChange {
    /// Set `status`; set `targetVolumeAttributesClassName` too when `target` is given, else leave it as it is.
    Set { status: &'static str, target: Option<String> },
    /// Remove `status.modifyVolumeStatus`: nothing is being modified.
    Clear,
}

/// A write to a claim through its `status` subresource.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClaimStatusPatch {
    /// The claim's resourceVersion when the write must not overwrite a newer claim (optimistic lock).
    pub resource_version: Option<String>,
    /// `Some` sets an annotation, `None` removes it.
    pub annotations: BTreeMap<String, Option<String>>,
    pub conditions: Vec<ConditionChange>,
    /// `status.capacity["storage"]`.
    pub capacity: Option<Quantity>,
    /// `status.allocatedResources["storage"]`.
    pub allocated_resources: Option<Quantity>,
    pub allocated_resource_status: Option<StorageStatusChange>,
    pub modify_volume_status: Option<ModifyVolumeStatusChange>,
    pub current_volume_attributes_class_name: Option<String>,
}

/// A write to a PersistentVolume.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VolumePatch {
    /// `Some` sets an annotation, `None` removes it.
    pub annotations: BTreeMap<String, Option<String>>,
    /// `spec.capacity["storage"]`.
    pub capacity: Option<Quantity>,
    pub volume_attributes_class_name: Option<String>,
}

impl ClaimStatusPatch {
    /// Whether the patch changes nothing (the optimistic lock aside).
    pub fn is_empty(&self) -> bool {
        ClaimStatusPatch { resource_version: None, ..self.clone() } == ClaimStatusPatch::default()
    }

    /// The body of a strategic merge patch for the claim's `status` subresource.
    pub fn strategic_merge_patch(&self) -> Value {
        let mut metadata = Map::new();
        if let Some(version) = &self.resource_version {
            metadata.insert("resourceVersion".into(), json!(version));
        }
        if !self.annotations.is_empty() {
            metadata.insert("annotations".into(), json!(self.annotations));
        }
        let mut status = Map::new();
        if !self.conditions.is_empty() {
            let items = self.conditions.iter().map(condition_patch).collect::<Vec<_>>();
            status.insert("conditions".into(), Value::Array(items));
        }
        if let Some(capacity) = &self.capacity {
            status.insert("capacity".into(), json!({ RESOURCE_STORAGE: capacity }));
        }
        if let Some(allocated) = &self.allocated_resources {
            status.insert("allocatedResources".into(), json!({ RESOURCE_STORAGE: allocated }));
        }
        match &self.allocated_resource_status {
            Some(StorageStatusChange::Set(value)) => {
                status.insert("allocatedResourceStatuses".into(), json!({ RESOURCE_STORAGE: value }));
            }
            Some(StorageStatusChange::Remove) => {
                status.insert("allocatedResourceStatuses".into(), json!({ RESOURCE_STORAGE: null }));
            }
            None => {}
        }
        match &self.modify_volume_status {
            Some(ModifyVolumeStatusChange::Set { status: value, target }) => {
                let mut modify = Map::new();
                modify.insert("status".into(), json!(value));
                if let Some(target) = target {
                    modify.insert("targetVolumeAttributesClassName".into(), json!(target));
                }
                status.insert("modifyVolumeStatus".into(), Value::Object(modify));
            }
            Some(ModifyVolumeStatusChange::Clear) => {
                status.insert("modifyVolumeStatus".into(), Value::Null);
            }
            None => {}
        }
        if let Some(class) = &self.current_volume_attributes_class_name {
            status.insert("currentVolumeAttributesClassName".into(), json!(class));
        }
        let mut patch = Map::new();
        if !metadata.is_empty() {
            patch.insert("metadata".into(), Value::Object(metadata));
        }
        if !status.is_empty() {
            patch.insert("status".into(), Value::Object(status));
        }
        Value::Object(patch)
    }

    /// The claim as the API server will store it after this patch.
    pub fn apply(&self, claim: &PersistentVolumeClaim) -> PersistentVolumeClaim {
        let mut claim = claim.clone();
        apply_annotations(&mut claim.metadata.annotations, &self.annotations);
        let status = claim.status.get_or_insert_with(PersistentVolumeClaimStatus::default);
        if !self.conditions.is_empty() {
            let mut conditions = status.conditions.take().unwrap_or_default();
            for change in &self.conditions {
                match change {
                    ConditionChange::Set(condition) => {
                        match conditions.iter_mut().find(|c| c.type_ == condition.type_) {
                            Some(existing) => *existing = condition.clone(),
                            None => conditions.push(condition.clone()),
                        }
                    }
                    ConditionChange::Remove(type_) => conditions.retain(|c| &c.type_ != type_),
                }
            }
            status.conditions = (!conditions.is_empty()).then_some(conditions);
        }
        if let Some(capacity) = &self.capacity {
            status.capacity.get_or_insert_with(BTreeMap::new).insert(RESOURCE_STORAGE.into(), capacity.clone());
        }
        if let Some(allocated) = &self.allocated_resources {
            status
                .allocated_resources
                .get_or_insert_with(BTreeMap::new)
                .insert(RESOURCE_STORAGE.into(), allocated.clone());
        }
        match &self.allocated_resource_status {
            Some(StorageStatusChange::Set(value)) => {
                status
                    .allocated_resource_statuses
                    .get_or_insert_with(BTreeMap::new)
                    .insert(RESOURCE_STORAGE.into(), value.to_string());
            }
            Some(StorageStatusChange::Remove) => {
                if let Some(statuses) = status.allocated_resource_statuses.as_mut() {
                    statuses.remove(RESOURCE_STORAGE);
                    if statuses.is_empty() {
                        status.allocated_resource_statuses = None;
                    }
                }
            }
            None => {}
        }
        match &self.modify_volume_status {
            Some(ModifyVolumeStatusChange::Set { status: value, target }) => {
                let modify = status.modify_volume_status.get_or_insert_with(ModifyVolumeStatus::default);
                modify.status = value.to_string();
                if let Some(target) = target {
                    modify.target_volume_attributes_class_name = Some(target.clone());
                }
            }
            Some(ModifyVolumeStatusChange::Clear) => status.modify_volume_status = None,
            None => {}
        }
        if let Some(class) = &self.current_volume_attributes_class_name {
            status.current_volume_attributes_class_name = Some(class.clone());
        }
        claim
    }
}

impl VolumePatch {
    pub fn is_empty(&self) -> bool {
        *self == VolumePatch::default()
    }

    /// The body of a strategic merge patch for the PersistentVolume.
    pub fn strategic_merge_patch(&self) -> Value {
        let mut patch = Map::new();
        if !self.annotations.is_empty() {
            patch.insert("metadata".into(), json!({ "annotations": self.annotations }));
        }
        let mut spec = Map::new();
        if let Some(capacity) = &self.capacity {
            spec.insert("capacity".into(), json!({ RESOURCE_STORAGE: capacity }));
        }
        if let Some(class) = &self.volume_attributes_class_name {
            spec.insert("volumeAttributesClassName".into(), json!(class));
        }
        if !spec.is_empty() {
            patch.insert("spec".into(), Value::Object(spec));
        }
        Value::Object(patch)
    }

    /// The volume as the API server will store it after this patch.
    pub fn apply(&self, volume: &PersistentVolume) -> PersistentVolume {
        let mut volume = volume.clone();
        apply_annotations(&mut volume.metadata.annotations, &self.annotations);
        let spec = volume.spec.get_or_insert_with(PersistentVolumeSpec::default);
        if let Some(capacity) = &self.capacity {
            spec.capacity.get_or_insert_with(BTreeMap::new).insert(RESOURCE_STORAGE.into(), capacity.clone());
        }
        if let Some(class) = &self.volume_attributes_class_name {
            spec.volume_attributes_class_name = Some(class.clone());
        }
        volume
    }
}

fn apply_annotations(annotations: &mut Option<BTreeMap<String, String>>, changes: &BTreeMap<String, Option<String>>) {
    if changes.is_empty() {
        return;
    }
    let mut map = annotations.take().unwrap_or_default();
    for (key, value) in changes {
        match value {
            Some(value) => map.insert(key.clone(), value.clone()),
            None => map.remove(key),
        };
    }
    *annotations = (!map.is_empty()).then_some(map);
}

/// A list item of a strategic merge patch merged by `type`. A set condition names every field, with `null` for the
/// absent ones, so that nothing of the replaced condition survives.
fn condition_patch(change: &ConditionChange) -> Value {
    match change {
        ConditionChange::Set(c) => json!({
            "type": c.type_,
            "status": c.status,
            "reason": c.reason,
            "message": c.message,
            "lastProbeTime": c.last_probe_time,
            "lastTransitionTime": c.last_transition_time,
        }),
        ConditionChange::Remove(type_) => json!({ "$patch": "delete", "type": type_ }),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    fn time(second: i64) -> Time {
        Time(Timestamp::from_second(second).unwrap())
    }

    fn condition(type_: &str, message: Option<&str>) -> PersistentVolumeClaimCondition {
        PersistentVolumeClaimCondition {
            type_: type_.into(),
            status: "True".into(),
            message: message.map(str::to_string),
            last_transition_time: Some(time(1_700_000_000)),
            ..Default::default()
        }
    }

    #[test]
    fn claim_patch_is_a_strategic_merge_patch() {
        let patch = ClaimStatusPatch {
            resource_version: Some("42".into()),
            annotations: BTreeMap::from([("a".into(), Some("1".into())), ("b".into(), None)]),
            conditions: vec![ConditionChange::Set(condition("Resizing", None)), ConditionChange::Remove("X".into())],
            capacity: Some(Quantity("2Gi".into())),
            allocated_resources: Some(Quantity("3Gi".into())),
            allocated_resource_status: Some(StorageStatusChange::Remove),
            modify_volume_status: Some(ModifyVolumeStatusChange::Set { status: "Pending", target: None }),
            current_volume_attributes_class_name: Some("gold".into()),
        };
        assert_eq!(
            patch.strategic_merge_patch(),
            json!({
                "metadata": {"resourceVersion": "42", "annotations": {"a": "1", "b": null}},
                "status": {
                    "conditions": [
                        {"type": "Resizing", "status": "True", "reason": null, "message": null,
                         "lastProbeTime": null, "lastTransitionTime": "2023-11-14T22:13:20Z"},
                        {"$patch": "delete", "type": "X"},
                    ],
                    "capacity": {"storage": "2Gi"},
                    "allocatedResources": {"storage": "3Gi"},
                    "allocatedResourceStatuses": {"storage": null},
                    "modifyVolumeStatus": {"status": "Pending"},
                    "currentVolumeAttributesClassName": "gold",
                }
            })
        );
        let clear = ClaimStatusPatch {
            modify_volume_status: Some(ModifyVolumeStatusChange::Clear),
            allocated_resource_status: Some(StorageStatusChange::Set("NodeResizePending")),
            ..Default::default()
        };
        assert_eq!(
            clear.strategic_merge_patch(),
            json!({"status": {"modifyVolumeStatus": null, "allocatedResourceStatuses": {"storage": "NodeResizePending"}}})
        );
        assert!(ClaimStatusPatch { resource_version: Some("1".into()), ..Default::default() }.is_empty());
        assert_eq!(ClaimStatusPatch::default().strategic_merge_patch(), json!({}));
    }

    #[test]
    fn claim_patch_applies_as_the_server_merges() {
        let claim = PersistentVolumeClaim {
            metadata: ObjectMeta {
                annotations: Some(BTreeMap::from([("b".into(), "x".into())])),
                ..Default::default()
            },
            status: Some(PersistentVolumeClaimStatus {
                conditions: Some(vec![condition("Resizing", Some("old")), condition("X", None)]),
                allocated_resource_statuses: Some(BTreeMap::from([("storage".into(), "NodeResizePending".into())])),
                modify_volume_status: Some(ModifyVolumeStatus {
                    status: "Infeasible".into(),
                    target_volume_attributes_class_name: Some("gold".into()),
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let patch = ClaimStatusPatch {
            annotations: BTreeMap::from([("b".into(), None)]),
            conditions: vec![ConditionChange::Set(condition("Resizing", None)), ConditionChange::Remove("X".into())],
            allocated_resource_status: Some(StorageStatusChange::Remove),
            modify_volume_status: Some(ModifyVolumeStatusChange::Set { status: "Pending", target: None }),
            ..Default::default()
        };
        let out = patch.apply(&claim);
        let status = out.status.unwrap();
        assert_eq!(out.metadata.annotations, None, "last annotation removed");
        assert_eq!(status.conditions, Some(vec![condition("Resizing", None)]), "replaced whole, other removed");
        assert_eq!(status.allocated_resource_statuses, None, "empty map disappears");
        assert_eq!(
            status.modify_volume_status,
            Some(ModifyVolumeStatus {
                status: "Pending".into(),
                target_volume_attributes_class_name: Some("gold".into())
            }),
            "target left as it was"
        );
    }

    #[test]
    fn volume_patch() {
        let patch = VolumePatch {
            annotations: BTreeMap::from([(
                "volume.alpha.kubernetes.io/pre-resize-capacity".into(),
                Some("1Gi".into()),
            )]),
            capacity: Some(Quantity("2Gi".into())),
            volume_attributes_class_name: Some("gold".into()),
        };
        assert_eq!(
            patch.strategic_merge_patch(),
            json!({
                "metadata": {"annotations": {"volume.alpha.kubernetes.io/pre-resize-capacity": "1Gi"}},
                "spec": {"capacity": {"storage": "2Gi"}, "volumeAttributesClassName": "gold"},
            })
        );
        let volume = patch.apply(&PersistentVolume::default());
        let spec = volume.spec.unwrap();
        assert_eq!(spec.capacity.unwrap()["storage"], Quantity("2Gi".into()));
        assert_eq!(spec.volume_attributes_class_name.as_deref(), Some("gold"));
        assert!(VolumePatch::default().is_empty());
    }
}
