use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolumeSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;

fn in_tree(secret: &str, secret_namespace: Option<&str>, claim_namespace: Option<&str>) -> PersistentVolume {
    PersistentVolume {
        metadata: ObjectMeta {
            name: Some("pv-share".into()),
            annotations: Some(BTreeMap::from([(RESOURCE_GROUP_ANNOTATION.to_string(), "rg".to_string())])),
            ..Default::default()
        },
        spec: Some(PersistentVolumeSpec {
            azure_file: Some(AzureFilePersistentVolumeSource {
                secret_name: secret.into(),
                secret_namespace: secret_namespace.map(str::to_string),
                share_name: "share".into(),
                read_only: Some(true),
            }),
            claim_ref: claim_namespace.map(|n| ObjectReference { namespace: Some(n.into()), ..Default::default() }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn in_tree_volumes_to_csi() {
    // (case, secret, secret namespace, claim namespace, handle | error)
    let table = [
        (
            "account from the secret name",
            "azure-storage-account-acct-secret",
            Some("ns"),
            None,
            Ok("rg#acct#share#pv-share#ns"),
        ),
        ("other secret names are the account", "creds", Some("ns"), None, Ok("rg#creds#share#pv-share#ns")),
        ("namespace from the claim", "creds", None, Some("apps"), Ok("rg#creds#share#pv-share#apps")),
        ("no namespace at all", "creds", None, None, Err(())),
    ];
    for (case, secret, secret_namespace, claim_namespace, want) in table {
        let got = pv_to_csi(in_tree(secret, secret_namespace, claim_namespace)).map_err(|_| ()).map(|pv| {
            let csi = pv.spec.unwrap().csi.unwrap();
            assert_eq!(csi.driver, DRIVER, "{case}");
            assert_eq!(csi.node_stage_secret_ref.unwrap().name.as_deref(), Some(secret), "{case}");
            assert_eq!(csi.volume_attributes, Some(BTreeMap::from([("sharename".into(), "share".into())])), "{case}");
            csi.volume_handle
        });
        assert_eq!(got.as_deref().map_err(|_| ()), want, "{case}");
    }
}

fn csi_pv(handle: &str, attributes: &[(&str, &str)], secret: Option<(&str, &str)>) -> PersistentVolume {
    PersistentVolume {
        metadata: ObjectMeta { name: Some("pv".into()), ..Default::default() },
        spec: Some(PersistentVolumeSpec {
            csi: Some(CSIPersistentVolumeSource {
                driver: DRIVER.into(),
                volume_handle: handle.into(),
                volume_attributes: Some(attributes.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
                node_stage_secret_ref: secret
                    .map(|(n, ns)| SecretReference { name: Some(n.into()), namespace: Some(ns.into()) }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn csi_volumes_to_in_tree() {
    let from_handle = pv_to_in_tree(csi_pv("rg#acct#share#pv#ns", &[], None)).unwrap();
    assert_eq!(
        from_handle.spec.unwrap().azure_file,
        Some(AzureFilePersistentVolumeSource {
            secret_name: "azure-storage-account-acct-secret".into(),
            secret_namespace: Some("default".into()),
            share_name: "share".into(),
            read_only: None,
        }),
        "share and secret from the handle, the default namespace"
    );
    assert_eq!(
        from_handle.metadata.annotations.unwrap().get(RESOURCE_GROUP_ANNOTATION).map(String::as_str),
        Some("rg")
    );
    let from_attributes = pv_to_in_tree(csi_pv("x", &[("shareName", "s2")], Some(("creds", "apps")))).unwrap();
    let file = from_attributes.spec.unwrap().azure_file.unwrap();
    assert_eq!((file.share_name.as_str(), file.secret_name.as_str()), ("s2", "creds"));
    assert_eq!(file.secret_namespace.as_deref(), Some("apps"));
    assert!(matches!(pv_to_in_tree(csi_pv("no-hashes", &[], None)), Err(TranslationError::VolumeHandle(_))));
}

#[test]
fn secret_names() {
    assert_eq!(account_of_secret("azure-storage-account-acct-secret").as_deref(), Some("acct"));
    assert_eq!(account_of_secret("azure-storage-account-my-acct-secret").as_deref(), Some("my-acct"));
    assert_eq!(account_of_secret("creds"), None);
    assert_eq!(account_of_secret("azure-storage-account--secret"), None);
    let class = StorageClass { provisioner: IN_TREE.into(), ..Default::default() };
    assert_eq!(storage_class_to_csi(class.clone()), Ok(class), "classes stay as they are");
}
