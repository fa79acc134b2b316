//! The Gateway API's ReferenceGrant CRD, which cross-namespace data sources are checked against. The sidecars do
//! not ship it (it belongs to the Gateway API); the suites install the one `snapshot-api` generates from the type the
//! provisioner reads.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{Patch, PatchParams};

use crate::wait::wait_for;

/// Applies the CRD (idempotent) and waits until it is served.
pub async fn install_reference_grant_crd(client: &kube::Client) {
    let crd = snapshot_api::crds::reference_grant_crd();
    let name = crd.metadata.name.clone().expect("CRDs are named");
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply("csi-sidecars-e2e").force();
    api.patch(&name, &params, &Patch::Apply(&crd)).await.unwrap_or_else(|e| panic!("applying CRD {name}: {e}"));
    wait_for(&format!("CRD {name} established"), Duration::from_secs(30), || async {
        let conditions = api.get(&name).await.ok()?.status?.conditions?;
        conditions.iter().any(|c| c.type_ == "Established" && c.status == "True").then_some(())
    })
    .await;
}
