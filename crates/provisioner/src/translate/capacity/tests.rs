use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::storage::v1::{CSINodeDriver, CSINodeSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelectorRequirement, Time};
use k8s_openapi::jiff::Timestamp;

use super::*;

const DRIVER: &str = "hostpath.csi.k8s.io";
const ZONE: &str = "topology.example.com/zone";
const RACK: &str = "topology.example.com/rack";

fn segment(entries: &[(&str, &str)]) -> Segment {
    entries.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn node(name: &str, labels: &[(&str, &str)]) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn csi_node(name: &str, driver: &str, keys: Option<&[&str]>) -> CSINode {
    CSINode {
        metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
        spec: CSINodeSpec {
            drivers: vec![CSINodeDriver {
                name: driver.into(),
                node_id: name.into(),
                topology_keys: keys.map(|k| k.iter().map(|s| s.to_string()).collect()),
                allocatable: None,
            }],
        },
    }
}

fn class(name: &str, provisioner: &str, binding: Option<&str>) -> StorageClass {
    StorageClass {
        metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
        provisioner: provisioner.into(),
        volume_binding_mode: binding.map(str::to_string),
        ..Default::default()
    }
}

fn publisher(owner: Option<OwnerReference>) -> Publisher {
    Publisher { driver: DRIVER.into(), managed_by: MANAGED_BY.into(), namespace: "storage".into(), owner }
}

fn key(class: &str, entries: &[(&str, &str)]) -> CapacityKey {
    CapacityKey { class: class.into(), segment: segment(entries) }
}

fn object(name: &str, key: &CapacityKey, created: i64) -> CSIStorageCapacity {
    let mut object = new_object(key, Measured { available: 1 << 30, maximum_volume_size: None }, &publisher(None));
    object.metadata.name = Some(name.into());
    object.metadata.creation_timestamp = Some(Time(Timestamp::from_second(created).unwrap()));
    object
}

#[test]
fn segments_come_from_csi_nodes_and_node_labels() {
    let nodes = [
        node("a", &[(ZONE, "z1"), (RACK, "r1")]),
        node("b", &[(ZONE, "z1"), (RACK, "r1")]),
        node("c", &[(ZONE, "z2"), (RACK, "r7")]),
        node("d", &[(ZONE, "z3")]),
        node("e", &[(ZONE, "z4"), (RACK, "r4")]),
    ];
    let csi_nodes = [
        csi_node("a", DRIVER, Some(&[ZONE, RACK])),
        csi_node("b", DRIVER, Some(&[RACK, ZONE])),
        csi_node("c", DRIVER, Some(&[ZONE, RACK])),
        // d lacks the rack label: left out until it has it.
        csi_node("d", DRIVER, Some(&[ZONE, RACK])),
        // e runs another driver only.
        csi_node("e", "other.csi", Some(&[ZONE, RACK])),
        // f has no Node: a stale CSINode.
        csi_node("f", DRIVER, Some(&[ZONE])),
    ];
    let labels = |name: &str| {
        nodes
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some(name))
            .map(|n| n.metadata.labels.clone().unwrap_or_default())
    };
    let got = segments(DRIVER, &csi_nodes, labels);
    let want = BTreeSet::from([segment(&[(ZONE, "z1"), (RACK, "r1")]), segment(&[(ZONE, "z2"), (RACK, "r7")])]);
    assert_eq!(got, want, "66: one segment per distinct combination of the driver's keys");

    let without_keys = segments(DRIVER, &[csi_node("a", DRIVER, None)], labels);
    assert_eq!(without_keys, BTreeSet::from([Segment::new()]), "a driver without topology: one empty segment");
    assert!(segments(DRIVER, &[], labels).is_empty(), "no node runs the driver");
}

#[test]
fn desired_objects() {
    let segments = BTreeSet::from([segment(&[(ZONE, "z1")]), segment(&[(ZONE, "z2")])]);
    let classes = [
        class("late", DRIVER, Some("WaitForFirstConsumer")),
        class("now", DRIVER, Some("Immediate")),
        class("unset", DRIVER, None),
        class("foreign", "other.csi", Some("WaitForFirstConsumer")),
    ];
    // (rule, immediate binding flag, keys)
    let table = [
        ("65: late binding classes only", false, vec![key("late", &[(ZONE, "z1")]), key("late", &[(ZONE, "z2")])]),
        (
            "65: --capacity-for-immediate-binding adds Immediate classes",
            true,
            vec![
                key("late", &[(ZONE, "z1")]),
                key("late", &[(ZONE, "z2")]),
                key("now", &[(ZONE, "z1")]),
                key("now", &[(ZONE, "z2")]),
                key("unset", &[(ZONE, "z1")]),
                key("unset", &[(ZONE, "z2")]),
            ],
        ),
    ];
    for (rule, immediate, want) in table {
        let got: Vec<CapacityKey> = desired(&classes, DRIVER, &segments, immediate).into_iter().collect();
        assert_eq!(got, want, "{rule}");
    }
}

#[test]
fn new_objects_carry_the_upstream_shape() {
    let owner = owner_reference("apps/v1", "ReplicaSet", "csi-provisioner-5d8f", "rs-uid");
    let key = key("late", &[(ZONE, "z1")]);
    let measured = Measured { available: 10 << 30, maximum_volume_size: Some(1 << 40) };
    let object = new_object(&key, measured, &publisher(Some(owner.clone())));
    assert_eq!(object.metadata.generate_name.as_deref(), Some("csisc-"));
    assert_eq!(object.metadata.namespace.as_deref(), Some("storage"));
    let labels = object.metadata.labels.clone().unwrap();
    assert_eq!(labels.get("csi.storage.k8s.io/drivername").map(String::as_str), Some(DRIVER));
    assert_eq!(labels.get("csi.storage.k8s.io/managed-by").map(String::as_str), Some("external-provisioner"));
    assert_eq!(object.metadata.owner_references, Some(vec![owner]));
    assert_eq!(object.storage_class_name, "late");
    assert_eq!(object.node_topology.clone().unwrap().match_labels, Some(segment(&[(ZONE, "z1")])));
    assert_eq!(object.capacity, Some(Quantity("10Gi".into())));
    assert_eq!(object.maximum_volume_size, Some(Quantity("1Ti".into())));
    assert_eq!(key_of(&object), Some(key), "an object stands for the key it was made for");
    assert!(is_managed(&object, DRIVER, MANAGED_BY));
    assert!(!is_managed(&object, DRIVER, "external-provisioner-node-1"));
    assert!(!is_managed(&object, "other.csi", MANAGED_BY));
}

#[test]
fn updates_only_when_something_changed() {
    let owner = owner_reference("v1", "Pod", "csi-provisioner-0", "pod-uid");
    let key = key("late", &[(ZONE, "z1")]);
    let same = Measured { available: 1 << 30, maximum_volume_size: None };
    let existing = object("csisc-a", &key, 1);
    // (rule, measured, owner, update expected)
    let table = [
        ("66: same capacity, no owner wanted", same, None, false),
        ("66: capacity changed", Measured { available: 2 << 30, ..same }, None, true),
        ("66: maximum volume size appeared", Measured { maximum_volume_size: Some(1 << 30), ..same }, None, true),
        ("68: the owner is missing", same, Some(owner.clone()), true),
    ];
    for (rule, measured, owner, want) in table {
        let update = updated_object(&existing, measured, &publisher(owner.clone()));
        assert_eq!(update.is_some(), want, "{rule}");
        if let Some(update) = update {
            assert_eq!(update.metadata.name.as_deref(), Some("csisc-a"), "{rule}: the same object");
            assert_eq!(update.capacity, Some(binary_si_quantity(measured.available)), "{rule}");
            if let Some(owner) = owner {
                assert_eq!(update.metadata.owner_references, Some(vec![owner]), "{rule}: owner appended");
            }
        }
    }
    let owned = updated_object(&existing, same, &publisher(Some(owner.clone()))).unwrap();
    assert_eq!(updated_object(&owned, same, &publisher(Some(owner))), None, "68: owned and current");
}

#[test]
fn reconcile_keeps_one_object_per_key_and_drops_the_rest() {
    let wanted = key("late", &[(ZONE, "z1")]);
    let also_wanted = key("late", &[(ZONE, "z2")]);
    let desired = BTreeSet::from([wanted.clone(), also_wanted.clone()]);
    let mut expressions = object("csisc-expr", &wanted, 5);
    expressions.node_topology.as_mut().unwrap().match_expressions = Some(vec![LabelSelectorRequirement {
        key: ZONE.into(),
        operator: "In".into(),
        values: Some(vec!["z1".into()]),
    }]);
    let existing = vec![
        object("csisc-dup", &wanted, 3),
        object("csisc-first", &wanted, 2),
        object("csisc-gone-class", &key("deleted", &[(ZONE, "z1")]), 1),
        object("csisc-gone-zone", &key("late", &[(ZONE, "z9")]), 1),
        expressions,
    ];
    let result = reconcile(&existing, &desired);
    assert_eq!(result.current.keys().cloned().collect::<Vec<_>>(), vec![wanted.clone()]);
    assert_eq!(result.current[&wanted].metadata.name.as_deref(), Some("csisc-first"), "67: the oldest is kept");
    let mut obsolete = result.obsolete.clone();
    obsolete.sort();
    assert_eq!(
        obsolete,
        ["csisc-dup", "csisc-expr", "csisc-gone-class", "csisc-gone-zone"],
        "67: obsolete and duplicates"
    );
    assert!(!result.current.contains_key(&also_wanted), "a key without an object is created by the controller");
}

#[test]
fn managed_by_names_fit_a_label() {
    // (rule, node, value)
    let long_node = "n".repeat(60);
    let table = [
        ("65: central", None, "external-provisioner".to_string()),
        ("65: node-local", Some("node-1"), "external-provisioner-node-1".to_string()),
    ];
    for (rule, node, want) in table {
        assert_eq!(managed_by(node), want, "{rule}");
    }
    let long = managed_by(Some(&long_node));
    assert!(long.len() <= 63, "{long}");
    assert_ne!(long, managed_by(Some(&"m".repeat(60))), "hashes keep long names apart");
    let medium = managed_by(Some("a-node-name-that-is-long-enough-to-overflow"));
    assert_eq!(medium.len(), 63, "{medium}");
    assert!(medium.ends_with("-a-node-name-that-is-long-enough-to-overflow"), "the node stays readable: {medium}");
    assert_eq!(fnv1a_hex(""), "811c9dc5", "FNV-1a offset basis");
    assert_eq!(fnv1a_hex("a"), "e40c292c", "FNV-1a of \"a\"");
}

#[test]
fn owner_walk_follows_controllers() {
    let controller = owner_reference("apps/v1", "ReplicaSet", "rs", "rs-uid");
    let mut other = owner_reference("v1", "ConfigMap", "cm", "cm-uid");
    other.controller = None;
    let meta = ObjectMeta { owner_references: Some(vec![other, controller.clone()]), ..Default::default() };
    assert_eq!(controlling_owner(&meta), Some(&controller), "68: only the controlling owner counts");
    assert_eq!(controlling_owner(&ObjectMeta::default()), None);
}

#[test]
fn shortened_names_match_upstream_exactly() {
    let node = |a: usize| format!("node{}", "a".repeat(a));
    let ext = MANAGED_BY;
    // (case, base, suffix, name) — the values of upstream's own table (cmd/csi-provisioner/util_test.go).
    let table = [
        ("short", ext, "node01".to_string(), "external-provisioner-node01".to_string()),
        ("empty base", "", "node01".to_string(), "node01".to_string()),
        ("exactly fits", ext, node(38), format!("external-provisioner-{}", node(38))),
        ("one too long", ext, node(39), format!("external-p-53f40b57-{}", node(39))),
        ("base cut to one letter", ext, node(48), format!("e-53f40b57-{}", node(48))),
        ("suffix too long: dropped", ext, node(49), "external-provisioner-a3607ff1".to_string()),
        ("very long", ext, node(63), "external-provisioner-df38e37f".to_string()),
        ("very long, empty base", "", node(63), "fa65587e".to_string()),
    ];
    for (case, base, suffix, want) in table {
        let got = name_with_max_length(base, &suffix, 63);
        assert_eq!(got, want, "{case}");
        assert!(got.len() <= 63, "{case}");
    }
}
