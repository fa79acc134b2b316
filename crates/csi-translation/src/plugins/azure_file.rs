//! `kubernetes.io/azure-file` ⇄ `file.csi.azure.com`. The classes need no translation; volumes carry their
//! storage account's secret, which the in-tree plugin named `azure-storage-account-<account>-secret`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    AzureFilePersistentVolumeSource, CSIPersistentVolumeSource, PersistentVolume, SecretReference,
};
use k8s_openapi::api::storage::v1::StorageClass;

use super::{not_migratable, take_csi_source};
use crate::TranslationError;

pub const DRIVER: &str = "file.csi.azure.com";
pub const IN_TREE: &str = "kubernetes.io/azure-file";
const SHARE_NAME_ATTRIBUTE: &str = "sharename";
const SECRET_NAME_ATTRIBUTE: &str = "secretname";
const SECRET_NAMESPACE_ATTRIBUTE: &str = "secretnamespace";
const DEFAULT_SECRET_NAMESPACE: &str = "default";
/// Where the in-tree plugin kept a share's resource group.
const RESOURCE_GROUP_ANNOTATION: &str = "kubernetes.io/azure-file-resource-group";
const SECRET_PREFIX: &str = "azure-storage-account-";
const SECRET_SUFFIX: &str = "-secret";
/// Volume handles are `<resource group>#<account>#<share>#<pv name>#<secret namespace>`.
const SEPARATOR: char = '#';

pub fn storage_class_to_csi(class: StorageClass) -> Result<StorageClass, TranslationError> {
    Ok(class)
}

pub fn pv_to_csi(mut pv: PersistentVolume) -> Result<PersistentVolume, TranslationError> {
    let missing = not_migratable(&pv);
    let name = pv.metadata.name.clone().unwrap_or_default();
    let resource_group =
        pv.metadata.annotations.as_ref().and_then(|a| a.get(RESOURCE_GROUP_ANNOTATION)).cloned().unwrap_or_default();
    let spec = pv.spec.get_or_insert_with(Default::default);
    let claim_namespace = spec.claim_ref.as_ref().and_then(|r| r.namespace.clone());
    let file = spec.azure_file.take().ok_or(missing)?;
    // A secret named otherwise is taken as the account name itself, as upstream does.
    let account = account_of_secret(&file.secret_name).unwrap_or_else(|| file.secret_name.clone());
    let namespace = file.secret_namespace.clone().or(claim_namespace).filter(|n| !n.is_empty()).ok_or_else(|| {
        TranslationError::Unsupported("could not find a secret namespace in PersistentVolumeSource or ClaimRef".into())
    })?;
    spec.csi = Some(CSIPersistentVolumeSource {
        driver: DRIVER.to_string(),
        volume_handle: [resource_group.as_str(), &account, &file.share_name, &name, &namespace].join("#"),
        read_only: file.read_only,
        node_stage_secret_ref: Some(SecretReference { name: Some(file.secret_name), namespace: Some(namespace) }),
        volume_attributes: Some(BTreeMap::from([(SHARE_NAME_ATTRIBUTE.to_string(), file.share_name)])),
        ..Default::default()
    });
    Ok(pv)
}

pub fn pv_to_in_tree(mut pv: PersistentVolume) -> Result<PersistentVolume, TranslationError> {
    let csi = take_csi_source(&mut pv)?;
    let mut file = AzureFilePersistentVolumeSource { read_only: csi.read_only, ..Default::default() };
    for (key, value) in csi.volume_attributes.iter().flatten() {
        match key.to_lowercase().as_str() {
            SHARE_NAME_ATTRIBUTE => file.share_name = value.clone(),
            SECRET_NAME_ATTRIBUTE => file.secret_name = value.clone(),
            SECRET_NAMESPACE_ATTRIBUTE => file.secret_namespace = Some(value.clone()),
            _ => {}
        }
    }
    if let Some(secret) =
        csi.node_stage_secret_ref.as_ref().filter(|s| s.name.as_deref().is_some_and(|n| !n.is_empty()))
    {
        file.secret_name = secret.name.clone().unwrap_or_default();
        file.secret_namespace = Some(secret.namespace.clone().unwrap_or_default());
    }
    let mut resource_group = String::new();
    if file.share_name.is_empty() || file.secret_name.is_empty() {
        let parts: Vec<&str> = csi.volume_handle.split(SEPARATOR).collect();
        let [group, account, share, ..] = parts.as_slice() else {
            return Err(TranslationError::VolumeHandle(format!(
                "error parsing volume id: {:?}, should at least contain two #",
                csi.volume_handle
            )));
        };
        if file.share_name.is_empty() {
            file.share_name = share.to_string();
        }
        if file.secret_name.is_empty() {
            file.secret_name = format!("{SECRET_PREFIX}{account}{SECRET_SUFFIX}");
        }
        resource_group = group.to_string();
    }
    file.secret_namespace.get_or_insert_with(|| DEFAULT_SECRET_NAMESPACE.to_string());
    pv.spec.get_or_insert_with(Default::default).azure_file = Some(file);
    let annotations = pv.metadata.annotations.get_or_insert_with(Default::default);
    if !resource_group.is_empty() {
        annotations.insert(RESOURCE_GROUP_ANNOTATION.to_string(), resource_group);
    }
    Ok(pv)
}

/// The storage account in `azure-storage-account-<account>-secret`.
fn account_of_secret(secret_name: &str) -> Option<String> {
    let start = secret_name.find(SECRET_PREFIX)? + SECRET_PREFIX.len();
    let end = secret_name.rfind(SECRET_SUFFIX)?;
    (end > start).then(|| secret_name[start..end].to_string())
}

#[cfg(test)]
mod tests;
