use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PersistentVolumeSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;

type Parameters = Option<BTreeMap<String, String>>;

fn parameters(pairs: &[(&str, &str)]) -> Parameters {
    Some(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
}

/// Every CSI secret parameter of the class, each `value`.
fn every_secret(name: &str, namespace: &str) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    for kind in ["provisioner", "controller-publish", "node-publish", "node-stage", "controller-expand", "node-expand"]
    {
        pairs.push((format!("csi.storage.k8s.io/{kind}-secret-name"), name.to_string()));
        pairs.push((format!("csi.storage.k8s.io/{kind}-secret-namespace"), namespace.to_string()));
    }
    pairs
}

#[test]
fn storage_classes() {
    let mut with_secrets: Vec<(String, String)> = every_secret("px-auth", "portworx");
    with_secrets.push(("repl".into(), "3".into()));
    let with_secrets: BTreeMap<String, String> = with_secrets.into_iter().collect();
    // (rule, in-tree parameters, translated parameters)
    let table: [(&str, Parameters, Parameters); 5] = [
        (
            "other parameters are copied as they are",
            parameters(&[("repl", "3"), ("fs", "ext4")]),
            parameters(&[("repl", "3"), ("fs", "ext4")]),
        ),
        (
            "the auth secret becomes every CSI secret",
            parameters(&[
                ("openstorage.io/auth-secret-name", "px-auth"),
                ("openstorage.io/auth-secret-namespace", "portworx"),
                ("repl", "3"),
            ]),
            Some(with_secrets),
        ),
        (
            "the auth secret keys are matched in any case",
            parameters(&[("OpenStorage.io/Auth-Secret-Name", "px-auth")]),
            Some(every_secret("px-auth", "").into_iter().filter(|(k, _)| k.ends_with("-name")).collect()),
        ),
        ("no parameters stay none", None, None),
        ("an empty list stays empty", parameters(&[]), parameters(&[])),
    ];
    for (rule, given, want) in table {
        let class = StorageClass { provisioner: IN_TREE.into(), parameters: given, ..Default::default() };
        let translated = storage_class_to_csi(class).unwrap();
        assert_eq!(translated.parameters, want, "{rule}");
        assert_eq!(translated.provisioner, DRIVER, "{rule}: the class names the CSI driver");
    }
}

fn in_tree(annotations: &[(&str, &str)], read_only: Option<bool>) -> PersistentVolume {
    PersistentVolume {
        metadata: ObjectMeta {
            name: Some("pv".into()),
            annotations: Some(annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            ..Default::default()
        },
        spec: Some(PersistentVolumeSpec {
            portworx_volume: Some(PortworxVolumeSource {
                volume_id: "px-vol-1".into(),
                fs_type: Some("ext4".into()),
                read_only,
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn volumes_to_csi() {
    let auth = SecretReference { name: Some("px-auth".into()), namespace: Some("portworx".into()) };
    // (rule, annotations, the secret references)
    let table = [
        (
            "both annotations name the secret of every call",
            vec![("openstorage.io/auth-secret-name", "px-auth"), ("openstorage.io/auth-secret-namespace", "portworx")],
            Some(auth),
        ),
        ("a name without a namespace is no secret", vec![("openstorage.io/auth-secret-name", "px-auth")], None),
        ("no annotation, no secret", vec![], None),
    ];
    for (rule, annotations, secret) in table {
        let csi = pv_to_csi(in_tree(&annotations, Some(true))).unwrap();
        let spec = csi.spec.unwrap();
        assert_eq!(spec.portworx_volume, None, "{rule}");
        let source = spec.csi.unwrap();
        assert_eq!((source.driver.as_str(), source.volume_handle.as_str()), (DRIVER, "px-vol-1"), "{rule}");
        assert_eq!(source.fs_type.as_deref(), Some("ext4"), "{rule}");
        assert_eq!(source.volume_attributes, Some(BTreeMap::new()), "{rule}");
        assert_eq!(source.read_only, None, "{rule}: upstream does not carry readOnly over");
        for (call, reference) in [
            ("controller publish", &source.controller_publish_secret_ref),
            ("node stage", &source.node_stage_secret_ref),
            ("node publish", &source.node_publish_secret_ref),
            ("controller expand", &source.controller_expand_secret_ref),
            ("node expand", &source.node_expand_secret_ref),
        ] {
            assert_eq!(reference, &secret, "{rule}: {call}");
        }
    }
    let not_portworx = PersistentVolume::default();
    assert!(pv_to_csi(not_portworx).is_err(), "a PV without a Portworx source is not translated");
}

#[test]
fn volumes_back_to_in_tree() {
    let csi = PersistentVolume {
        metadata: ObjectMeta { name: Some("pv".into()), ..Default::default() },
        spec: Some(PersistentVolumeSpec {
            csi: Some(CSIPersistentVolumeSource {
                driver: DRIVER.into(),
                volume_handle: "px-vol-2".into(),
                fs_type: Some("xfs".into()),
                read_only: Some(true),
                volume_attributes: Some(BTreeMap::from([("repl".into(), "2".into())])),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let back = pv_to_in_tree(csi).unwrap();
    let spec = back.spec.unwrap();
    assert_eq!(spec.csi, None);
    assert_eq!(
        spec.portworx_volume,
        Some(PortworxVolumeSource { volume_id: "px-vol-2".into(), fs_type: Some("xfs".into()), read_only: Some(true) })
    );
    assert!(pv_to_in_tree(PersistentVolume::default()).is_err(), "a PV without a CSI source");
}
