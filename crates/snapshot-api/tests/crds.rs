//! The generated CRDs: up to date in the chart, and shaped as upstream's (names, scope, columns, CEL rules).

use std::path::Path;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use snapshot_api::crds::{CHART_CRD_DIR, snapshot_crds, to_yaml};

fn crd(name: &str) -> CustomResourceDefinition {
    snapshot_crds().into_iter().map(|(_, c)| c).find(|c| c.metadata.name.as_deref() == Some(name)).unwrap()
}

#[test]
fn chart_copies_are_up_to_date() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(CHART_CRD_DIR);
    for (file, crd) in snapshot_crds() {
        let committed = std::fs::read_to_string(dir.join(file)).unwrap_or_default();
        assert_eq!(
            committed,
            to_yaml(&crd).unwrap(),
            "{file} is stale: run `cargo run -p snapshot-api --bin snapshot-crds -- --write`"
        );
    }
}

#[test]
fn names_scopes_and_versions_match_upstream() {
    // (crd, scope, kind, short names, subresources)
    let table = [
        ("volumesnapshots.snapshot.storage.k8s.io", "Namespaced", "VolumeSnapshot", vec!["vs"], true),
        (
            "volumesnapshotcontents.snapshot.storage.k8s.io",
            "Cluster",
            "VolumeSnapshotContent",
            vec!["vsc", "vscs"],
            true,
        ),
        (
            "volumesnapshotclasses.snapshot.storage.k8s.io",
            "Cluster",
            "VolumeSnapshotClass",
            vec!["vsclass", "vsclasses"],
            false,
        ),
    ];
    for (name, scope, kind, short_names, status) in table {
        let crd = crd(name);
        assert_eq!(crd.spec.scope, scope, "{name}");
        assert_eq!(crd.spec.names.kind, kind, "{name}");
        assert_eq!(crd.spec.names.short_names.clone().unwrap_or_default(), short_names, "{name}");
        assert_eq!(crd.spec.versions.len(), 1, "{name}");
        let version = &crd.spec.versions[0];
        assert_eq!((version.name.as_str(), version.served, version.storage), ("v1", true, true), "{name}");
        let has_status = version.subresources.as_ref().is_some_and(|s| s.status.is_some());
        assert_eq!(has_status, status, "{name}: status subresource");
        let approval = crd.metadata.annotations.as_ref().and_then(|a| a.get("api-approved.kubernetes.io"));
        assert!(approval.is_some_and(|a| a.starts_with("https://github.com/kubernetes-csi/")), "{name}");
    }
}

#[test]
fn printer_columns_match_upstream() {
    let columns = |name: &str| -> Vec<String> {
        crd(name).spec.versions[0]
            .additional_printer_columns
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|c| c.name)
            .collect()
    };
    assert_eq!(
        columns("volumesnapshots.snapshot.storage.k8s.io"),
        [
            "ReadyToUse",
            "SourcePVC",
            "SourceSnapshotContent",
            "RestoreSize",
            "SnapshotClass",
            "SnapshotContent",
            "CreationTime",
            "Age"
        ]
    );
    assert_eq!(
        columns("volumesnapshotcontents.snapshot.storage.k8s.io"),
        [
            "ReadyToUse",
            "RestoreSize",
            "DeletionPolicy",
            "Driver",
            "VolumeSnapshotClass",
            "VolumeSnapshot",
            "VolumeSnapshotNamespace",
            "Age"
        ]
    );
    assert_eq!(columns("volumesnapshotclasses.snapshot.storage.k8s.io"), ["Driver", "DeletionPolicy", "Age"]);
}

#[test]
fn schemas_carry_the_upstream_rules() {
    let schema = |name: &str| serde_json::to_string(&crd(name).spec.versions[0].schema).unwrap();
    let snapshots = schema("volumesnapshots.snapshot.storage.k8s.io");
    for rule in [
        "exactly one of volumeSnapshotContentName and persistentVolumeClaimName must be set",
        "persistentVolumeClaimName is immutable",
        "volumeSnapshotContentName is required once set",
        "volumeSnapshotClassName must not be the empty string when set",
    ] {
        assert!(snapshots.contains(rule), "VolumeSnapshot lacks {rule:?}");
    }
    let contents = schema("volumesnapshotcontents.snapshot.storage.k8s.io");
    for rule in [
        "exactly one of volumeHandle and snapshotHandle must be set",
        "snapshotHandle is immutable",
        "sourceVolumeMode is immutable",
        "both spec.volumeSnapshotRef.name and spec.volumeSnapshotRef.namespace must be set",
        r#""enum":["Delete","Retain"]"#,
        r#""enum":["Filesystem","Block"]"#,
    ] {
        assert!(contents.contains(rule), "VolumeSnapshotContent lacks {rule:?}");
    }
    let classes = schema("volumesnapshotclasses.snapshot.storage.k8s.io");
    assert!(classes.contains(r#""required":["deletionPolicy","driver"]"#), "{classes}");
}
