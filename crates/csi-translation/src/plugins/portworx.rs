//! `kubernetes.io/portworx-volume` ⇄ `pxd.portworx.com` (csi-translation-lib plugins/portworx.go). The class's
//! OpenStorage auth secret becomes every CSI secret of the class, and the class names the CSI driver as its
//! provisioner: the one translation that changes it. An in-tree PV's auth secret, kept in two annotations, becomes
//! the CSI PV's secret references. No topology is translated.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{CSIPersistentVolumeSource, PersistentVolume, PortworxVolumeSource, SecretReference};
use k8s_openapi::api::storage::v1::StorageClass;

use super::{not_migratable, take_csi_source};
use crate::TranslationError;

pub const DRIVER: &str = "pxd.portworx.com";
pub const IN_TREE: &str = "kubernetes.io/portworx-volume";
/// The in-tree class parameters (compared in lower case) and PV annotations naming the OpenStorage auth secret.
const AUTH_SECRET_NAME: &str = "openstorage.io/auth-secret-name";
const AUTH_SECRET_NAMESPACE: &str = "openstorage.io/auth-secret-namespace";
/// The CSI secrets the auth secret stands for, as `csi.storage.k8s.io/<kind>-secret-name` / `-namespace`.
const SECRET_KINDS: [&str; 6] =
    ["provisioner", "controller-publish", "node-publish", "node-stage", "controller-expand", "node-expand"];

pub fn storage_class_to_csi(mut class: StorageClass) -> Result<StorageClass, TranslationError> {
    let mut parameters = BTreeMap::new();
    for (key, value) in class.parameters.iter().flatten() {
        let suffix = match key.to_lowercase().as_str() {
            AUTH_SECRET_NAME => "name",
            AUTH_SECRET_NAMESPACE => "namespace",
            _ => {
                parameters.insert(key.clone(), value.clone());
                continue;
            }
        };
        for kind in SECRET_KINDS {
            parameters.insert(format!("csi.storage.k8s.io/{kind}-secret-{suffix}"), value.clone());
        }
    }
    // An empty parameter list stays as it was (upstream replaces it only when something was copied).
    if !parameters.is_empty() {
        class.parameters = Some(parameters);
    }
    class.provisioner = DRIVER.to_string();
    Ok(class)
}

pub fn pv_to_csi(mut pv: PersistentVolume) -> Result<PersistentVolume, TranslationError> {
    let missing = not_migratable(&pv);
    let annotations = pv.metadata.annotations.clone().unwrap_or_default();
    let secret = match (annotations.get(AUTH_SECRET_NAME), annotations.get(AUTH_SECRET_NAMESPACE)) {
        (Some(name), Some(namespace)) => {
            Some(SecretReference { name: Some(name.clone()), namespace: Some(namespace.clone()) })
        }
        _ => None,
    };
    let spec = pv.spec.get_or_insert_with(Default::default);
    let portworx = spec.portworx_volume.take().ok_or(missing)?;
    // Upstream carries neither readOnly nor anything else over.
    spec.csi = Some(CSIPersistentVolumeSource {
        driver: DRIVER.to_string(),
        volume_handle: portworx.volume_id,
        fs_type: portworx.fs_type,
        volume_attributes: Some(BTreeMap::new()),
        controller_publish_secret_ref: secret.clone(),
        node_stage_secret_ref: secret.clone(),
        node_publish_secret_ref: secret.clone(),
        controller_expand_secret_ref: secret.clone(),
        node_expand_secret_ref: secret,
        ..Default::default()
    });
    Ok(pv)
}

pub fn pv_to_in_tree(mut pv: PersistentVolume) -> Result<PersistentVolume, TranslationError> {
    let csi = take_csi_source(&mut pv)?;
    let spec = pv.spec.get_or_insert_with(Default::default);
    spec.portworx_volume =
        Some(PortworxVolumeSource { volume_id: csi.volume_handle, fs_type: csi.fs_type, read_only: csi.read_only });
    Ok(pv)
}

#[cfg(test)]
mod tests;
