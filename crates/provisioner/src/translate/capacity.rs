//! CSIStorageCapacity publishing (external-provisioner pkg/capacity/capacity.go): which objects should exist, what each
//! says, and which existing ones are obsolete. The controller feeds it the caches and GetCapacity answers, and does the
//! writes.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::storage::v1::{CSINode, CSIStorageCapacity, StorageClass};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};

use sidecar_runtime::quantity::{binary_si_quantity, quantity_bytes};

/// Label naming the driver of a published object.
pub const LABEL_DRIVER_NAME: &str = "csi.storage.k8s.io/drivername";
/// Label naming the provisioner instance that manages a published object.
pub const LABEL_MANAGED_BY: &str = "csi.storage.k8s.io/managed-by";
/// The managed-by value of a central provisioner; node-local ones append their node.
pub const MANAGED_BY: &str = "external-provisioner";
/// Prefix of the generated object names.
pub const GENERATE_NAME: &str = "csisc-";
/// Label values are at most this long.
const LABEL_VALUE_MAX: usize = 63;
const BINDING_WAIT_FOR_FIRST_CONSUMER: &str = "WaitForFirstConsumer";

/// One topology segment: topology key → value, as GetCapacity's `accessible_topology` and the object's
/// `nodeTopology` say it. An empty segment is a driver without topology.
pub type Segment = BTreeMap<String, String>;

/// One object that should exist: a class in a segment.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CapacityKey {
    pub class: String,
    pub segment: Segment,
}

/// The managed-by label value: `external-provisioner`, or `external-provisioner-<node>` for a node-local
/// provisioner, shortened with an FNV-1a hash to fit a label value as upstream shortens it.
pub fn managed_by(node: Option<&str>) -> String {
    match node {
        None => MANAGED_BY.to_string(),
        Some(node) => name_with_max_length(MANAGED_BY, node, LABEL_VALUE_MAX),
    }
}

/// `<base>-<suffix>` when it fits; otherwise the base is cut and a hash of the whole name keeps it unique.
fn name_with_max_length(base: &str, suffix: &str, max: usize) -> String {
    let name = if base.is_empty() { suffix.to_string() } else { format!("{base}-{suffix}") };
    if name.len() <= max {
        return name;
    }
    let hash = fnv1a_hex(&name);
    // "-<8 hex digits>-" takes 10 characters.
    let base_length = max as isize - 10 - suffix.len() as isize;
    if base_length <= 0 {
        let prefix = &base[..base.len().min(max.saturating_sub(9))];
        let short = if prefix.is_empty() { hash } else { format!("{prefix}-{hash}") };
        return short[..short.len().min(max)].to_string();
    }
    format!("{}-{}-{suffix}", &base[..base_length as usize], fnv1a_hex(base))
}

/// 32-bit FNV-1a as 8 hex digits.
fn fnv1a_hex(text: &str) -> String {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in text.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    format!("{hash:08x}")
}

/// The segments of the nodes the driver runs on: for each CSINode listing the driver, its topology keys with the
/// values of the Node's labels (`node_labels` looks a Node up by name). A node whose labels do not have every key
/// yet is left out until they do; a CSINode without its Node is stale.
pub fn segments<'a>(
    driver: &str,
    csi_nodes: impl IntoIterator<Item = &'a CSINode>,
    node_labels: impl Fn(&str) -> Option<BTreeMap<String, String>>,
) -> BTreeSet<Segment> {
    let mut segments = BTreeSet::new();
    for csi_node in csi_nodes {
        let Some(entry) = csi_node.spec.drivers.iter().find(|d| d.name == driver) else { continue };
        let Some(labels) = node_labels(csi_node.metadata.name.as_deref().unwrap_or_default()) else { continue };
        let keys = entry.topology_keys.iter().flatten();
        let segment: Option<Segment> = keys.map(|key| Some((key.clone(), labels.get(key)?.clone()))).collect();
        if let Some(segment) = segment {
            segments.insert(segment);
        }
    }
    segments
}

/// The objects that should exist: every class of this driver (Immediate ones only when asked) in every segment.
pub fn desired<'a>(
    classes: impl IntoIterator<Item = &'a StorageClass>,
    driver: &str,
    segments: &BTreeSet<Segment>,
    immediate_binding: bool,
) -> BTreeSet<CapacityKey> {
    let mut keys = BTreeSet::new();
    for class in classes.into_iter().filter(|c| c.provisioner == driver) {
        let late = class.volume_binding_mode.as_deref() == Some(BINDING_WAIT_FOR_FIRST_CONSUMER);
        if !late && !immediate_binding {
            continue;
        }
        let Some(name) = class.metadata.name.clone() else { continue };
        for segment in segments {
            keys.insert(CapacityKey { class: name.clone(), segment: segment.clone() });
        }
    }
    keys
}

/// The key an existing object stands for. Objects whose topology is not a plain label match were not written by
/// a provisioner and match no key.
pub fn key_of(object: &CSIStorageCapacity) -> Option<CapacityKey> {
    let topology = object.node_topology.clone().unwrap_or_default();
    if topology.match_expressions.as_ref().is_some_and(|e| !e.is_empty()) {
        return None;
    }
    Some(CapacityKey { class: object.storage_class_name.clone(), segment: topology.match_labels.unwrap_or_default() })
}

/// Whether the object carries this instance's labels.
pub fn is_managed(object: &CSIStorageCapacity, driver: &str, managed_by: &str) -> bool {
    let labels = object.metadata.labels.as_ref();
    labels.and_then(|l| l.get(LABEL_DRIVER_NAME)).map(String::as_str) == Some(driver)
        && labels.and_then(|l| l.get(LABEL_MANAGED_BY)).map(String::as_str) == Some(managed_by)
}

/// The existing objects sorted out against what should exist.
#[derive(Debug, Default, PartialEq)]
pub struct Reconciliation {
    /// The object kept for each key that has one.
    pub current: BTreeMap<CapacityKey, CSIStorageCapacity>,
    /// Names of objects no key needs, or a second object for a key (a create raced a watch event).
    pub obsolete: Vec<String>,
}

/// Matches existing (managed) objects to the desired keys, oldest name first so that the choice is stable.
pub fn reconcile(existing: &[CSIStorageCapacity], desired: &BTreeSet<CapacityKey>) -> Reconciliation {
    let mut sorted: Vec<&CSIStorageCapacity> = existing.iter().collect();
    sorted.sort_by(|a, b| {
        (a.metadata.creation_timestamp.as_ref().map(|t| t.0), &a.metadata.name)
            .cmp(&(b.metadata.creation_timestamp.as_ref().map(|t| t.0), &b.metadata.name))
    });
    let mut result = Reconciliation::default();
    for object in sorted {
        let name = object.metadata.name.clone().unwrap_or_default();
        match key_of(object) {
            Some(key) if desired.contains(&key) && !result.current.contains_key(&key) => {
                result.current.insert(key, object.clone());
            }
            _ => result.obsolete.push(name),
        }
    }
    result
}

/// What GetCapacity said for one key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Measured {
    pub available: i64,
    pub maximum_volume_size: Option<i64>,
}

/// Who publishes: the labels and the owner every object gets.
#[derive(Clone, Debug, PartialEq)]
pub struct Publisher {
    pub driver: String,
    pub managed_by: String,
    pub namespace: String,
    pub owner: Option<OwnerReference>,
}

/// A new object for `key`.
pub fn new_object(key: &CapacityKey, measured: Measured, publisher: &Publisher) -> CSIStorageCapacity {
    CSIStorageCapacity {
        metadata: ObjectMeta {
            generate_name: Some(GENERATE_NAME.to_string()),
            namespace: Some(publisher.namespace.clone()),
            labels: Some(BTreeMap::from([
                (LABEL_DRIVER_NAME.to_string(), publisher.driver.clone()),
                (LABEL_MANAGED_BY.to_string(), publisher.managed_by.clone()),
            ])),
            owner_references: publisher.owner.clone().map(|o| vec![o]),
            ..Default::default()
        },
        storage_class_name: key.class.clone(),
        node_topology: Some(LabelSelector { match_labels: Some(key.segment.clone()), match_expressions: None }),
        capacity: Some(binary_si_quantity(measured.available)),
        maximum_volume_size: measured.maximum_volume_size.map(binary_si_quantity),
    }
}

/// The existing object brought up to date, or None when it already says the same and has its owner.
pub fn updated_object(
    existing: &CSIStorageCapacity,
    measured: Measured,
    publisher: &Publisher,
) -> Option<CSIStorageCapacity> {
    let bytes = |q: &Option<k8s_openapi::apimachinery::pkg::api::resource::Quantity>| {
        q.as_ref().map(|q| quantity_bytes(q).unwrap_or(-1))
    };
    let owned = publisher.owner.as_ref().is_none_or(|owner| is_controlled_by(existing, owner));
    if bytes(&existing.capacity) == Some(measured.available)
        && bytes(&existing.maximum_volume_size) == measured.maximum_volume_size
        && owned
    {
        return None;
    }
    let mut object = existing.clone();
    object.capacity = Some(binary_si_quantity(measured.available));
    object.maximum_volume_size = measured.maximum_volume_size.map(binary_si_quantity);
    if let Some(owner) = publisher.owner.as_ref().filter(|_| !owned) {
        object.metadata.owner_references.get_or_insert_with(Vec::new).push(owner.clone());
    }
    Some(object)
}

/// Whether `owner` (by UID) is the object's controlling owner.
fn is_controlled_by(object: &CSIStorageCapacity, owner: &OwnerReference) -> bool {
    object.metadata.owner_references.iter().flatten().any(|o| o.controller == Some(true) && o.uid == owner.uid)
}

/// One step of the owner walk (external-provisioner pkg/owner/owner.go): the object's controlling owner, if any.
pub fn controlling_owner(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references.iter().flatten().find(|o| o.controller == Some(true))
}

/// The owner reference for an object found at the end of the walk.
pub fn owner_reference(api_version: &str, kind: &str, name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        name: name.to_string(),
        uid: uid.to_string(),
        controller: Some(true),
        block_owner_deletion: None,
    }
}

#[cfg(test)]
mod tests;
