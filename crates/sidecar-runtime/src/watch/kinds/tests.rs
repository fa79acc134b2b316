//! Every field a slim form keeps comes back unchanged: objects with every field of their k8s-openapi type set (the
//! common ones and the rare ones kept apart) survive slim → full, but for `metadata.managedFields`.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use serde_json::{Value, json};
use snapshot_api::VolumeSnapshotContent;

use super::Cached;

fn metadata(namespaced: bool) -> Value {
    let mut meta = json!({
        "name": "data-1",
        "uid": "0a7c6a9e-2d5b-4c8e-9f1a-3b2c1d0e9f8a",
        "resourceVersion": "123456",
        "generation": 3,
        "generateName": "data-",
        "creationTimestamp": "2026-11-26T10:00:00Z",
        "deletionTimestamp": "2026-11-27T10:00:00Z",
        "deletionGracePeriodSeconds": 0,
        "selfLink": "/api/v1/x",
        "labels": {"app": "db", "tier": "storage"},
        "annotations": {
            "pv.kubernetes.io/bind-completed": "yes",
            "volume.kubernetes.io/selected-node": "node-1",
            "kubectl.kubernetes.io/last-applied-configuration": "{\"kind\":\"PersistentVolumeClaim\"}"
        },
        "finalizers": ["kubernetes.io/pvc-protection", "example.com/other"],
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "uid": "u-1",
            "controller": true, "blockOwnerDeletion": true}],
        "managedFields": [{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
            "time": "2026-11-26T10:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:phase": {}}}}]
    });
    if namespaced {
        meta["namespace"] = json!("apps");
    }
    meta
}

fn secret(name: &str) -> Value {
    json!({"name": name, "namespace": "secrets"})
}

fn claim() -> Value {
    json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": metadata(true),
        "spec": {
            "accessModes": ["ReadWriteOnce", "ReadOnlyMany"],
            "dataSource": {"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": "snap"},
            "dataSourceRef": {"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": "snap",
                "namespace": "other"},
            "resources": {"requests": {"storage": "1Gi"}, "limits": {"storage": "2Gi"}},
            "selector": {"matchLabels": {"zone": "a"},
                "matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]},
            "storageClassName": "fast",
            "volumeAttributesClassName": "gold",
            "volumeMode": "Block",
            "volumeName": "pvc-0a7c6a9e-2d5b-4c8e-9f1a-3b2c1d0e9f8a"
        },
        "status": {
            "accessModes": ["ReadWriteOnce"],
            "allocatedResourceStatuses": {"storage": "ControllerResizeInProgress"},
            "allocatedResources": {"storage": "2Gi"},
            "capacity": {"storage": "1Gi"},
            "conditions": [{"type": "Resizing", "status": "True", "lastProbeTime": "2026-11-26T10:00:00Z",
                "lastTransitionTime": "2026-11-26T10:00:01Z", "message": "m", "reason": "r"}],
            "currentVolumeAttributesClassName": "silver",
            "modifyVolumeStatus": {"status": "InProgress", "targetVolumeAttributesClassName": "gold"},
            "phase": "Bound"
        }
    })
}

fn volume() -> Value {
    json!({
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": metadata(false),
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "capacity": {"storage": "1Gi"},
            "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": "apps", "name": "data-1",
                "uid": "0a7c6a9e-2d5b-4c8e-9f1a-3b2c1d0e9f8a", "resourceVersion": "12", "fieldPath": "f"},
            "csi": {"driver": "hostpath.csi.k8s.io", "volumeHandle": "vol-1", "fsType": "ext4", "readOnly": false,
                "volumeAttributes": {"storage.kubernetes.io/csiProvisionerIdentity": "1-2-hostpath"},
                "controllerExpandSecretRef": secret("expand"), "controllerPublishSecretRef": secret("publish"),
                "nodeExpandSecretRef": secret("node-expand"), "nodePublishSecretRef": secret("node-publish"),
                "nodeStageSecretRef": secret("stage")},
            "awsElasticBlockStore": {"volumeID": "vol-aws", "fsType": "ext4"},
            "gcePersistentDisk": {"pdName": "disk"},
            "nfs": {"server": "s", "path": "/p"},
            "mountOptions": ["ro", "noatime"],
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}]}]}},
            "persistentVolumeReclaimPolicy": "Delete",
            "storageClassName": "fast",
            "volumeAttributesClassName": "gold",
            "volumeMode": "Filesystem"
        },
        "status": {"phase": "Bound", "lastPhaseTransitionTime": "2026-11-26T10:00:00Z", "message": "m",
            "reason": "r"}
    })
}

fn snapshot_content() -> Value {
    json!({
        "apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotContent",
        "metadata": metadata(false),
        "spec": {
            "volumeSnapshotRef": {"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
                "namespace": "apps", "name": "snap", "uid": "u-2", "resourceVersion": "5"},
            "deletionPolicy": "Retain",
            "driver": "hostpath.csi.k8s.io",
            "volumeSnapshotClassName": "snapclass",
            "source": {"volumeHandle": "vol-1"},
            "sourceVolumeMode": "Block"
        },
        "status": {"snapshotHandle": "snap-1", "creationTime": 1764151200000000000_i64, "restoreSize": 1073741824,
            "readyToUse": true, "error": {"time": "2026-11-26T10:00:00Z", "message": "m"},
            "volumeGroupSnapshotHandle": "group-1"}
    })
}

/// `object` as the watch delivers it (parsed by k8s-openapi), held and read back.
fn round_trip<K: Cached + PartialEq>(object: Value) -> (K, K) {
    let mut delivered: K = serde_json::from_value(object).unwrap();
    let read = K::read(&Arc::new(delivered.slim()));
    delivered.meta_mut().managed_fields = None;
    (delivered, Arc::unwrap_or_clone(read))
}

#[test]
fn claims_volumes_and_snapshot_contents_come_back_whole() {
    let (delivered, read) = round_trip::<PersistentVolumeClaim>(claim());
    assert_eq!(read, delivered);
    let (delivered, read) = round_trip::<PersistentVolume>(volume());
    assert_eq!(read, delivered);
    let (delivered, read) = round_trip::<VolumeSnapshotContent>(snapshot_content());
    assert_eq!(read, delivered);
}

#[test]
fn the_fields_every_object_has_come_back_alone() {
    // Without the rare fields: nothing of them appears on the way back (no empty map, list or struct).
    let mut claim = claim();
    claim["spec"] = json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
        "storageClassName": "fast", "volumeMode": "Filesystem", "volumeName": "pv"});
    claim["status"] = json!({"phase": "Bound", "capacity": {"storage": "1Gi"}, "accessModes": []});
    claim["metadata"] = json!({"name": "c", "namespace": "apps", "uid": "u"});
    let (delivered, read) = round_trip::<PersistentVolumeClaim>(claim);
    assert_eq!(read, delivered);
    let bare = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c"},
        "spec": {"resources": {"limits": {"storage": "1Gi"}}}});
    let (delivered, read) = round_trip::<PersistentVolumeClaim>(bare);
    assert_eq!(read, delivered);
    let bare = json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "v"},
        "spec": {"csi": {"driver": "d", "volumeHandle": "h"}}, "status": {}});
    let (delivered, read) = round_trip::<PersistentVolume>(bare);
    assert_eq!(read, delivered);
    let bare = json!({"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotContent",
        "metadata": {"name": "s"}, "spec": {"volumeSnapshotRef": {"name": "s", "namespace": "n"},
        "deletionPolicy": "Delete", "driver": "d", "source": {"snapshotHandle": "h"}}});
    let (delivered, read) = round_trip::<VolumeSnapshotContent>(bare);
    assert_eq!(read, delivered);
}

#[test]
fn a_pod_keeps_its_name_phase_and_claims_only() {
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-0", "namespace": "apps", "uid": "u", "labels": {"app": "web"}},
        "spec": {
            "containers": [{"name": "c", "image": "nginx"}],
            "volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0", "readOnly": true}},
                {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
                {"name": "config", "configMap": {"name": "cm"}}
            ]
        },
        "status": {"phase": "Running", "podIP": "10.0.0.1"}
    });
    let pod: Pod = serde_json::from_value(pod).unwrap();
    let read = Pod::read(&Arc::new(pod.slim()));
    assert_eq!(read.metadata.name.as_deref(), Some("web-0"));
    assert_eq!(read.metadata.namespace.as_deref(), Some("apps"));
    assert_eq!(read.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Running"));
    let volumes = read.spec.as_ref().and_then(|s| s.volumes.as_ref()).unwrap();
    let claims: Vec<&str> =
        volumes.iter().filter_map(|v| v.persistent_volume_claim.as_ref()).map(|c| c.claim_name.as_str()).collect();
    assert_eq!(claims, ["data-web-0"]);
    assert!(read.spec.as_ref().unwrap().containers.is_empty(), "no containers");
}

#[test]
fn a_node_keeps_all_but_its_status() {
    let node = json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "n1", "labels": {"topology.kubernetes.io/zone": "a"}},
        "spec": {"providerID": "p"},
        "status": {"images": [{"names": ["registry/image:1"], "sizeBytes": 1}]}});
    let mut node: Node = serde_json::from_value(node).unwrap();
    let read = Node::read(&Arc::new(node.slim()));
    node.status = None;
    assert_eq!(*read, node);
}
