//! Bytes per cached object, per kind: the watch caches as they hold objects now, against kube-runtime's reflector
//! store holding the k8s-openapi objects whole (without managedFields), as the sidecars cached them before.
//!
//! `cargo run --release -p sidecar-runtime --example cache_footprint [objects]` (10,000 by default). Deterministic:
//! it counts the heap (each allocation's usable size plus malloc's 8-byte header, as glibc lays it out), not RSS.
//! The objects are what a cluster holds: claims and PVs as the provisioner and kube-controller-manager leave them
//! once Bound, running StatefulSet pods with one claim each, ready snapshot contents.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use kube::runtime::reflector;
use kube::runtime::watcher::Event;
use serde_json::{Value, json};
use sidecar_runtime::watch::{self, Cached};
use snapshot_api::VolumeSnapshotContent;

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);
static ALLOCATIONS: AtomicIsize = AtomicIsize::new(0);

fn footprint(ptr: *mut u8) -> isize {
    // SAFETY: `ptr` was returned by the system allocator and not yet freed.
    (unsafe { libc::malloc_usable_size(ptr.cast()) } + 8) as isize
}

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            LIVE.fetch_add(footprint(ptr), Ordering::Relaxed);
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(footprint(ptr), Ordering::Relaxed);
        ALLOCATIONS.fetch_sub(1, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn uid(i: usize) -> String {
    format!("{:08x}-2d5b-4c8e-9f1a-{:012x}", i, i * 7919)
}

fn time(i: usize) -> String {
    format!("2026-11-26T{:02}:{:02}:{:02}Z", (i / 3600) % 24, (i / 60) % 60, i % 60)
}

fn managed_fields(manager: &str) -> Value {
    json!([{"manager": manager, "operation": "Update", "apiVersion": "v1", "time": "2026-11-26T10:00:00Z",
        "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:annotations": {".": {},
        "f:pv.kubernetes.io/bind-completed": {}}}, "f:spec": {"f:volumeName": {}}, "f:status": {"f:phase": {}}}}])
}

const DRIVER: &str = "hostpath.csi.k8s.io";

fn claim(i: usize) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": format!("data-web-{i}"), "namespace": format!("team-{}", i % 20), "uid": uid(i),
            "resourceVersion": format!("{}", 1_000_000 + i), "creationTimestamp": time(i),
            "annotations": {"pv.kubernetes.io/bind-completed": "yes", "pv.kubernetes.io/bound-by-controller": "yes",
                "volume.beta.kubernetes.io/storage-provisioner": DRIVER,
                "volume.kubernetes.io/storage-provisioner": DRIVER},
            "labels": {"app": "web"},
            "finalizers": ["kubernetes.io/pvc-protection"],
            "managedFields": managed_fields("kube-controller-manager")},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
            "storageClassName": "fast", "volumeMode": "Filesystem", "volumeName": format!("pvc-{}", uid(i))},
        "status": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}, "phase": "Bound"}})
}

fn volume(i: usize) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": format!("pvc-{}", uid(i)), "uid": uid(i + 1_000_000),
            "resourceVersion": format!("{}", 2_000_000 + i), "creationTimestamp": time(i),
            "annotations": {"pv.kubernetes.io/provisioned-by": DRIVER,
                "volume.kubernetes.io/provisioner-deletion-secret-name": "",
                "volume.kubernetes.io/provisioner-deletion-secret-namespace": ""},
            "finalizers": ["external-provisioner.volume.kubernetes.io/finalizer", "kubernetes.io/pv-protection"],
            "managedFields": managed_fields("csi-provisioner")},
        "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"},
            "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": format!("team-{}", i % 20),
                "name": format!("data-web-{i}"), "uid": uid(i), "resourceVersion": format!("{}", 999_000 + i)},
            "csi": {"driver": DRIVER, "volumeHandle": uid(i + 2_000_000), "fsType": "ext4",
                "volumeAttributes": {"storage.kubernetes.io/csiProvisionerIdentity": "1764151200000-1234-hostpath"}},
            "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "fast", "volumeMode": "Filesystem"},
        "status": {"phase": "Bound", "lastPhaseTransitionTime": time(i)}})
}

fn pod(i: usize) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("web-{i}"), "namespace": format!("team-{}", i % 20), "uid": uid(i + 3_000_000),
            "resourceVersion": format!("{}", 3_000_000 + i), "creationTimestamp": time(i),
            "labels": {"app": "web", "apps.kubernetes.io/pod-index": format!("{i}"),
                "statefulset.kubernetes.io/pod-name": format!("web-{i}")},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": uid(7),
                "controller": true, "blockOwnerDeletion": true}],
            "managedFields": managed_fields("kubelet")},
        "spec": {"containers": [{"name": "web", "image": "registry.k8s.io/nginx-slim:0.27",
                "ports": [{"containerPort": 80, "name": "web", "protocol": "TCP"}],
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                "volumeMounts": [{"mountPath": "/usr/share/nginx/html", "name": "www"},
                    {"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "name": "kube-api-access",
                        "readOnly": true}],
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent"}],
            "volumes": [{"name": "www", "persistentVolumeClaim": {"claimName": format!("data-web-{i}")}},
                {"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}],
            "nodeName": format!("node-{}", i % 100), "restartPolicy": "Always", "schedulerName": "default-scheduler",
            "serviceAccountName": "default", "dnsPolicy": "ClusterFirst", "terminationGracePeriodSeconds": 30},
        "status": {"phase": "Running", "podIP": format!("10.0.{}.{}", i / 250 % 250, i % 250), "hostIP": "10.1.0.1",
            "startTime": time(i), "qosClass": "Burstable",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": time(i)}],
            "containerStatuses": [{"name": "web", "ready": true, "restartCount": 0, "started": true,
                "image": "registry.k8s.io/nginx-slim:0.27", "imageID": "registry.k8s.io/nginx-slim@sha256:0123",
                "containerID": format!("containerd://{:064x}", i), "state": {"running": {"startedAt": time(i)}}}]}})
}

fn snapshot_content(i: usize) -> Value {
    json!({"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotContent",
        "metadata": {"name": format!("snapcontent-{}", uid(i)), "uid": uid(i + 4_000_000),
            "resourceVersion": format!("{}", 4_000_000 + i), "creationTimestamp": time(i),
            "annotations": {"snapshot.storage.kubernetes.io/deletion-secret-name": "",
                "snapshot.storage.kubernetes.io/deletion-secret-namespace": ""},
            "finalizers": ["snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection"],
            "managedFields": managed_fields("snapshot-controller")},
        "spec": {"volumeSnapshotRef": {"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
                "namespace": format!("team-{}", i % 20), "name": format!("snap-{i}"), "uid": uid(i),
                "resourceVersion": format!("{}", 5_000_000 + i)},
            "deletionPolicy": "Delete", "driver": DRIVER, "volumeSnapshotClassName": "snapclass",
            "source": {"volumeHandle": uid(i + 2_000_000)}, "sourceVolumeMode": "Filesystem"},
        "status": {"snapshotHandle": uid(i + 5_000_000), "creationTime": 1_764_151_200_000_000_000_i64 + i as i64,
            "restoreSize": 1_073_741_824, "readyToUse": true}})
}

fn live() -> (isize, isize) {
    (LIVE.load(Ordering::Relaxed), ALLOCATIONS.load(Ordering::Relaxed))
}

/// Bytes and allocations per object held by kube-runtime's store (before) and by the watch cache (now).
fn measure<K: Cached>(objects: usize, make: fn(usize) -> Value) -> [(f64, f64); 2] {
    let decoded = |i: usize| {
        let mut object: K = serde_json::from_value(make(i)).expect("a valid object");
        object.meta_mut().managed_fields = None;
        object
    };
    let per = |(bytes, count): (isize, isize), (b0, c0): (isize, isize)| {
        ((bytes - b0) as f64 / objects as f64, (count - c0) as f64 / objects as f64)
    };
    let before = {
        let start = live();
        let (store, mut writer) = reflector::store::<K>();
        for i in 0..objects {
            writer.apply_watcher_event(&Event::Apply(decoded(i)));
        }
        let held = per(live(), start);
        assert_eq!(store.state().len(), objects);
        held
    };
    let now = {
        let start = live();
        let (cache, feed) = watch::cache::<K>();
        for i in 0..objects {
            feed.apply(&Event::Apply(decoded(i)));
        }
        let held = per(live(), start);
        assert_eq!(cache.len(), objects);
        held
    };
    [before, now]
}

fn main() {
    let objects: usize = std::env::args().nth(1).and_then(|n| n.parse().ok()).unwrap_or(10_000);
    println!("{objects} objects per kind; bytes (allocations) per cached object");
    println!("| kind | before: whole k8s-openapi object | now: slim | now / before |");
    println!("|---|---:|---:|---:|");
    let rows = [
        ("PersistentVolumeClaim (Bound)", measure::<PersistentVolumeClaim>(objects, claim)),
        ("PersistentVolume (Bound, CSI)", measure::<PersistentVolume>(objects, volume)),
        ("Pod (running, one claim)", measure::<Pod>(objects, pod)),
        ("VolumeSnapshotContent (ready)", measure::<VolumeSnapshotContent>(objects, snapshot_content)),
    ];
    for (kind, [(before, before_allocs), (now, now_allocs)]) in rows {
        println!("| {kind} | {before:.0} ({before_allocs:.1}) | {now:.0} ({now_allocs:.1}) | {:.2} |", now / before);
    }
}
