//! The generated CRDs: up to date in the chart, and shaped as upstream's (names, scope, versions, columns, CEL rules).

use std::path::Path;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use snapshot_api::crds::{CHART_CRD_DIR, all_crds, group_snapshot_crds, snapshot_crds, to_yaml};

fn crd(name: &str) -> CustomResourceDefinition {
    all_crds().into_iter().map(|(_, c)| c).find(|c| c.metadata.name.as_deref() == Some(name)).unwrap()
}

#[test]
fn chart_copies_are_up_to_date() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(CHART_CRD_DIR);
    for (file, crd) in all_crds() {
        let committed = std::fs::read_to_string(dir.join(file)).unwrap_or_default();
        assert_eq!(
            committed,
            to_yaml(&crd).unwrap(),
            "{file} is stale: run `cargo run -p snapshot-api --bin snapshot-crds -- --write`"
        );
    }
}

#[test]
fn chart_file_names_are_upstreams() {
    for (file, crd) in all_crds() {
        let name = crd.metadata.name.unwrap();
        let (plural, group) = name.split_once('.').unwrap();
        assert_eq!(file, format!("{group}_{plural}.yaml"));
    }
    assert_eq!(snapshot_crds().len(), 3);
    assert_eq!(group_snapshot_crds().len(), 3);
}

/// (name, served, storage) of each version, in order.
type Versions = &'static [(&'static str, bool, bool)];
const SNAPSHOT_VERSIONS: Versions = &[("v1", true, true)];
/// Upstream serves v1 but stores v1beta2 (external-snapshotter client/config/crd, kept there during the move to v1);
/// its deprecated v1beta1 is left out.
const GROUP_VERSIONS: Versions = &[("v1", true, false), ("v1beta2", true, true)];

#[test]
fn names_scopes_and_versions_match_upstream() {
    // (crd, scope, kind, short names, status subresource, versions, api approval)
    let table = [
        (
            "volumesnapshots.snapshot.storage.k8s.io",
            "Namespaced",
            "VolumeSnapshot",
            vec!["vs"],
            true,
            SNAPSHOT_VERSIONS,
            "814",
        ),
        (
            "volumesnapshotcontents.snapshot.storage.k8s.io",
            "Cluster",
            "VolumeSnapshotContent",
            vec!["vsc", "vscs"],
            true,
            SNAPSHOT_VERSIONS,
            "955",
        ),
        (
            "volumesnapshotclasses.snapshot.storage.k8s.io",
            "Cluster",
            "VolumeSnapshotClass",
            vec!["vsclass", "vsclasses"],
            false,
            SNAPSHOT_VERSIONS,
            "814",
        ),
        (
            "volumegroupsnapshots.groupsnapshot.storage.k8s.io",
            "Namespaced",
            "VolumeGroupSnapshot",
            vec!["vgs"],
            true,
            GROUP_VERSIONS,
            "1337",
        ),
        (
            "volumegroupsnapshotcontents.groupsnapshot.storage.k8s.io",
            "Cluster",
            "VolumeGroupSnapshotContent",
            vec!["vgsc", "vgscs"],
            true,
            GROUP_VERSIONS,
            "1337",
        ),
        (
            "volumegroupsnapshotclasses.groupsnapshot.storage.k8s.io",
            "Cluster",
            "VolumeGroupSnapshotClass",
            vec!["vgsclass", "vgsclasses"],
            false,
            GROUP_VERSIONS,
            "1337",
        ),
    ];
    for (name, scope, kind, short_names, status, versions, approval) in table {
        let crd = crd(name);
        assert_eq!(crd.spec.scope, scope, "{name}");
        assert_eq!(crd.spec.names.kind, kind, "{name}");
        assert_eq!(crd.spec.names.short_names.clone().unwrap_or_default(), short_names, "{name}");
        let got: Vec<_> = crd.spec.versions.iter().map(|v| (v.name.as_str(), v.served, v.storage)).collect();
        assert_eq!(got, versions, "{name}: versions (name, served, storage)");
        for version in &crd.spec.versions {
            let has_status = version.subresources.as_ref().is_some_and(|s| s.status.is_some());
            assert_eq!(has_status, status, "{name} {}: status subresource", version.name);
        }
        let annotation = crd.metadata.annotations.as_ref().and_then(|a| a.get("api-approved.kubernetes.io"));
        let expected = format!("https://github.com/kubernetes-csi/external-snapshotter/pull/{approval}");
        assert_eq!(annotation, Some(&expected), "{name}");
    }
}

#[test]
fn group_versions_share_one_schema() {
    // The API server converts between v1 and v1beta2 without a webhook only because the two are the same.
    for (_, crd) in group_snapshot_crds() {
        let [v1, v1beta2] = &crd.spec.versions[..] else { panic!("{:?}: two versions", crd.metadata.name) };
        assert_eq!(v1.schema, v1beta2.schema, "{:?}", crd.metadata.name);
        assert_eq!(v1.additional_printer_columns, v1beta2.additional_printer_columns, "{:?}", crd.metadata.name);
        assert_eq!(v1.subresources, v1beta2.subresources, "{:?}", crd.metadata.name);
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
    let table: [(&str, &[&str]); 6] = [
        (
            "volumesnapshots.snapshot.storage.k8s.io",
            &[
                "ReadyToUse",
                "SourcePVC",
                "SourceSnapshotContent",
                "RestoreSize",
                "SnapshotClass",
                "SnapshotContent",
                "CreationTime",
                "Age",
            ],
        ),
        (
            "volumesnapshotcontents.snapshot.storage.k8s.io",
            &[
                "ReadyToUse",
                "RestoreSize",
                "DeletionPolicy",
                "Driver",
                "VolumeSnapshotClass",
                "VolumeSnapshot",
                "VolumeSnapshotNamespace",
                "Age",
            ],
        ),
        ("volumesnapshotclasses.snapshot.storage.k8s.io", &["Driver", "DeletionPolicy", "Age"]),
        (
            "volumegroupsnapshots.groupsnapshot.storage.k8s.io",
            &["ReadyToUse", "VolumeGroupSnapshotClass", "VolumeGroupSnapshotContent", "CreationTime", "Age"],
        ),
        (
            "volumegroupsnapshotcontents.groupsnapshot.storage.k8s.io",
            &[
                "ReadyToUse",
                "DeletionPolicy",
                "Driver",
                "VolumeGroupSnapshotClass",
                "VolumeGroupSnapshotNamespace",
                "VolumeGroupSnapshot",
                "Age",
            ],
        ),
        ("volumegroupsnapshotclasses.groupsnapshot.storage.k8s.io", &["Driver", "DeletionPolicy", "Age"]),
    ];
    for (name, expected) in table {
        assert_eq!(columns(name), expected, "{name}");
    }
}

#[test]
fn schemas_carry_the_upstream_rules() {
    let schema = |name: &str| serde_json::to_string(&crd(name).spec.versions[0].schema).unwrap();
    let table: [(&str, &[&str]); 6] = [
        (
            "volumesnapshots.snapshot.storage.k8s.io",
            &[
                "exactly one of volumeSnapshotContentName and persistentVolumeClaimName must be set",
                "persistentVolumeClaimName is immutable",
                "volumeSnapshotContentName is required once set",
                "volumeSnapshotClassName must not be the empty string when set",
            ],
        ),
        (
            "volumesnapshotcontents.snapshot.storage.k8s.io",
            &[
                "exactly one of volumeHandle and snapshotHandle must be set",
                "snapshotHandle is immutable",
                "sourceVolumeMode is immutable",
                "both spec.volumeSnapshotRef.name and spec.volumeSnapshotRef.namespace must be set",
                r#""enum":["Delete","Retain"]"#,
                r#""enum":["Filesystem","Block"]"#,
            ],
        ),
        ("volumesnapshotclasses.snapshot.storage.k8s.io", &[r#""required":["deletionPolicy","driver"]"#]),
        (
            "volumegroupsnapshots.groupsnapshot.storage.k8s.io",
            &[
                "exactly one of selector and volumeGroupSnapshotContentName must be set",
                "selector is required once set",
                "volumeGroupSnapshotContentName is required once set",
                "selector is immutable",
                "volumeGroupSnapshotContentName is immutable",
                "volumeGroupSnapshotClassName must not be the empty string when set",
                "boundVolumeGroupSnapshotContentName is immutable once set",
            ],
        ),
        (
            "volumegroupsnapshotcontents.groupsnapshot.storage.k8s.io",
            &[
                "exactly one of volumeHandles and groupSnapshotHandles must be set",
                "volumeHandles is required once set",
                "groupSnapshotHandles is required once set",
                "volumeHandles is immutable",
                "groupSnapshotHandles is immutable",
                "both volumeGroupSnapshotRef.name and volumeGroupSnapshotRef.namespace must be set",
                "volumeGroupSnapshotRef.name and volumeGroupSnapshotRef.namespace are immutable",
                "volumeGroupSnapshotRef.uid is immutable once set",
                "driver is immutable once set",
                "volumeGroupSnapshotClassName is immutable once set",
                "volumeGroupSnapshotHandle is immutable once set",
                r#""enum":["Delete","Retain"]"#,
                r#""required":["deletionPolicy","driver","source","volumeGroupSnapshotRef"]"#,
                r#""required":["volumeGroupSnapshotHandle","volumeSnapshotHandles"]"#,
            ],
        ),
        (
            "volumegroupsnapshotclasses.groupsnapshot.storage.k8s.io",
            &[
                "driver is immutable once set",
                "parameters are immutable once set",
                "deletionPolicy is immutable once set",
                r#""required":["deletionPolicy","driver"]"#,
            ],
        ),
    ];
    for (name, rules) in table {
        let schema = schema(name);
        for rule in rules {
            assert!(schema.contains(rule), "{name} lacks {rule:?}");
        }
    }
}

#[test]
fn deletion_policy_stays_mutable_on_contents() {
    // Upstream lets an administrator switch a content between Delete and Retain: its CEL rules leave deletionPolicy
    // mutable (external-snapshotter client/config/crd).
    for name in
        ["volumesnapshotcontents.snapshot.storage.k8s.io", "volumegroupsnapshotcontents.groupsnapshot.storage.k8s.io"]
    {
        let schema = serde_json::to_value(&crd(name).spec.versions[0].schema).unwrap();
        let policy = &schema["openAPIV3Schema"]["properties"]["spec"]["properties"]["deletionPolicy"];
        assert!(policy.is_object(), "{name}");
        assert!(policy.get("x-kubernetes-validations").is_none(), "{name}: {policy}");
    }
}

#[test]
fn the_reference_grant_crd_serves_what_the_provisioner_reads() {
    let crd = snapshot_api::crds::reference_grant_crd();
    assert_eq!(crd.metadata.name.as_deref(), Some("referencegrants.gateway.networking.k8s.io"));
    assert_eq!(crd.spec.scope, "Namespaced");
    assert_eq!(crd.spec.names.short_names.as_deref(), Some(&["refgrant".to_string()][..]));
    let versions: Vec<(&str, bool, bool)> =
        crd.spec.versions.iter().map(|v| (v.name.as_str(), v.served, v.storage)).collect();
    assert_eq!(versions, [("v1beta1", true, true)]);
    let schema = serde_json::to_value(&crd.spec.versions[0].schema).unwrap();
    let spec = &schema["openAPIV3Schema"]["properties"]["spec"]["properties"];
    for field in ["from", "to"] {
        assert_eq!(spec[field]["type"], "array", "{field}");
    }
    let annotations = crd.metadata.annotations.unwrap_or_default();
    assert!(annotations.contains_key("api-approved.kubernetes.io"), "*.k8s.io groups need the approval annotation");
}
