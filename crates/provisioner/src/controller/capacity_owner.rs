//! The owner of the CSIStorageCapacity objects (external-provisioner pkg/owner/owner.go, `Lookup`): start at the
//! provisioner's Pod and follow controlling owners up `--capacity-ownerref-level` levels, so that the objects go away
//! with the Deployment or StatefulSet.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Api;
use kube::api::DynamicObject;
use kube::core::{ApiResource, GroupVersionKind};

use crate::translate::capacity::{controlling_owner, owner_reference};

#[derive(Debug, thiserror::Error)]
pub enum OwnerLookupError {
    #[error("get {kind} {name} in namespace {namespace}: {source}")]
    Get { kind: String, name: String, namespace: String, source: kube::Error },
    #[error(
        "{api_version}/{kind} {name:?} in namespace {namespace:?} has no controlling owner, cannot unwind the ownership further"
    )]
    NoController { api_version: String, kind: String, name: String, namespace: String },
}

/// The owner `levels` controllers above the Pod `pod` in `namespace` (0: the Pod itself).
pub async fn lookup_owner(
    client: &kube::Client,
    namespace: &str,
    pod: &str,
    levels: u32,
) -> Result<OwnerReference, OwnerLookupError> {
    let (mut api_version, mut kind, mut name) = ("v1".to_string(), "Pod".to_string(), pod.to_string());
    let mut remaining = levels;
    loop {
        let (group, version) = match api_version.split_once('/') {
            Some((group, version)) => (group.to_string(), version.to_string()),
            None => (String::new(), api_version.clone()),
        };
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(&group, &version, &kind));
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
        let object = api.get(&name).await.map_err(|source| OwnerLookupError::Get {
            kind: kind.clone(),
            name: name.clone(),
            namespace: namespace.to_string(),
            source,
        })?;
        if remaining == 0 {
            let uid = object.metadata.uid.clone().unwrap_or_default();
            return Ok(owner_reference(&api_version, &kind, &name, &uid));
        }
        let Some(owner) = controlling_owner(&object.metadata).cloned() else {
            return Err(OwnerLookupError::NoController { api_version, kind, name, namespace: namespace.to_string() });
        };
        // The last step needs no GET: the reference names the owner already (and RBAC for it is not needed).
        if remaining == 1 {
            return Ok(owner_reference(&owner.api_version, &owner.kind, &owner.name, &owner.uid));
        }
        (api_version, kind, name) = (owner.api_version, owner.kind, owner.name);
        remaining -= 1;
    }
}
