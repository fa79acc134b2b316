//! The snapshot CRDs in the shared control plane: the ones this repository generates, so every suite that uses
//! them also tests that the API server takes them.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{Patch, PatchParams};

use crate::wait::wait_for;

/// Applies the snapshot and group snapshot CRDs (idempotent; tests may race to do it) and waits until they are
/// served.
pub async fn install_snapshot_crds(client: &kube::Client) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply("csi-sidecars-e2e").force();
    for (_, crd) in snapshot_api::crds::snapshot_crds().into_iter().chain(snapshot_api::crds::group_snapshot_crds()) {
        let name = crd.metadata.name.clone().expect("CRDs are named");
        api.patch(&name, &params, &Patch::Apply(&crd)).await.unwrap_or_else(|e| panic!("applying CRD {name}: {e}"));
        wait_for(&format!("CRD {name} established"), Duration::from_secs(30), || async {
            let crd = api.get(&name).await.ok()?;
            let conditions = crd.status?.conditions?;
            conditions.iter().any(|c| c.type_ == "Established" && c.status == "True").then_some(())
        })
        .await;
    }
}
