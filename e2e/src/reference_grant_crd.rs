//! The Gateway API's ReferenceGrant CRD, which cross-namespace data sources are checked against. The sidecars do
//! not ship it (it belongs to the Gateway API); the suites install a minimal version: the served version and kind
//! the provisioner reads, without the upstream schema.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::wait_for;

const NAME: &str = "referencegrants.gateway.networking.k8s.io";

/// Applies the CRD (idempotent) and waits until it is served.
pub async fn install_reference_grant_crd(client: &kube::Client) {
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": NAME,
            // Required for *.k8s.io groups; the Gateway API's own CRDs carry their approval link.
            "annotations": {"api-approved.kubernetes.io": "https://github.com/kubernetes-sigs/gateway-api/pull/1538"},
        },
        "spec": {
            "group": "gateway.networking.k8s.io",
            "scope": "Namespaced",
            "names": {"kind": "ReferenceGrant", "listKind": "ReferenceGrantList", "plural": "referencegrants", "singular": "referencegrant", "shortNames": ["refgrant"]},
            "versions": [{
                "name": "v1beta1",
                "served": true,
                "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
            }],
        },
    }))
    .expect("a valid CRD");
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply("csi-sidecars-e2e").force();
    api.patch(NAME, &params, &Patch::Apply(&crd)).await.unwrap_or_else(|e| panic!("applying CRD {NAME}: {e}"));
    wait_for(&format!("CRD {NAME} established"), Duration::from_secs(30), || async {
        let conditions = api.get(NAME).await.ok()?.status?.conditions?;
        conditions.iter().any(|c| c.type_ == "Established" && c.status == "True").then_some(())
    })
    .await;
}
