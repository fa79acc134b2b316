//! csi-provisioner with a data source in another namespace (`dataSourceRef.namespace`, the alpha
//! CrossNamespaceVolumeDataSource feature, enabled in the e2e control plane), allowed by a ReferenceGrant.

use csi_sidecars_e2e::provisioner_world::{
    ProvisionerWorld as World, TIMEOUT, claim, has_finalizer, plugin_volume_rows,
};
use csi_sidecars_e2e::{Cluster, TestNamespace, eventually, install_reference_grant_crd};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, TypedObjectReference};
use kube::Api;
use kube::api::{DeleteParams, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

const CROSS_NAMESPACE_GATE: &str = "--feature-gates=CrossNamespaceVolumeDataSource=true";

fn reference_grants(client: &kube::Client, namespace: &str) -> Api<DynamicObject> {
    let kind = GroupVersionKind::gvk("gateway.networking.k8s.io", "v1beta1", "ReferenceGrant");
    Api::namespaced_with(client.clone(), namespace, &ApiResource::from_gvk(&kind))
}

#[tokio::test]
async fn provisioner_clones_across_namespaces_only_with_the_gate_and_a_reference_grant() {
    let client = Cluster::shared().client().await;
    install_reference_grant_crd(&client).await;
    let mut world = World::new("prov-xns", &[]).await;
    let source_ns = TestNamespace::create(&client, "prov-xns-src").await;
    let source_claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), source_ns.name());
    let class = world.class("xns", &[], "Delete").await;

    // Without the gate the provisioner refuses the reference, as upstream does.
    let mut ungated = world.start_provisioner("csi-provisioner-ungated", &[]);
    source_claims.create(&PostParams::default(), &claim("source", &class, None, "ReadWriteOnce")).await.unwrap();
    let source_volume = wait_bound(&source_claims, "source").await;
    let source_handle = world.volumes().get(&source_volume).await.unwrap().spec.unwrap().csi.unwrap().volume_handle;
    let mut copy = claim("copy", &class, None, "ReadWriteOnce");
    copy.spec.as_mut().unwrap().data_source_ref = Some(TypedObjectReference {
        api_group: None,
        kind: "PersistentVolumeClaim".into(),
        name: "source".into(),
        namespace: Some(source_ns.name().into()),
    });
    world.claim_object(copy).await;
    world.event("copy", "ProvisioningFailed", "CrossNamespaceVolumeDataSource feature is disabled").await;
    ungated.terminate();

    // With the gate, a ReferenceGrant in the source's namespace is still needed.
    let _provisioner = world.start_provisioner("csi-provisioner", &[CROSS_NAMESPACE_GATE]);
    let refused = format!(
        "accessing {}/source of PersistentVolumeClaim dataSource from {}/copy isn't allowed",
        source_ns.name(),
        world.ns()
    );
    world.event("copy", "ProvisioningFailed", &refused).await;
    assert_eq!(world.plugin_volumes().len(), 1, "nothing created without the grant");

    let grant: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "gateway.networking.k8s.io/v1beta1",
        "kind": "ReferenceGrant",
        "metadata": {"name": "clone-from-apps"},
        "spec": {
            "from": [{"group": "", "kind": "PersistentVolumeClaim", "namespace": world.ns()}],
            "to": [{"group": "", "kind": "PersistentVolumeClaim"}],
        },
    }))
    .unwrap();
    reference_grants(&client, source_ns.name()).create(&PostParams::default(), &grant).await.unwrap();

    let copy_volume = world.bound("copy").await;
    let copy_handle = world.volumes().get(&copy_volume).await.unwrap().spec.unwrap().csi.unwrap().volume_handle;
    let rows = plugin_volume_rows(&world.socket);
    let row = rows.iter().find(|r| r["volume_id"] == copy_handle.as_str()).expect("the clone in the plugin");
    assert_eq!(row["content_source"]["volume_id"], source_handle.as_str(), "cloned from the other namespace's volume");
    let source = source_claims.get("source").await.unwrap();
    assert!(has_finalizer(&source.metadata, "provisioner.storage.kubernetes.io/cloning-protection"));

    // The source can go once no pending clone needs it; its volume goes with it.
    source_claims.delete("source", &DeleteParams::default()).await.unwrap();
    eventually("the source claim and its volume are gone", TIMEOUT, || async {
        source_claims.get_opt("source").await.unwrap().is_none()
            && world.volumes().get_opt(&source_volume).await.unwrap().is_none()
    })
    .await;
}

async fn wait_bound(claims: &Api<PersistentVolumeClaim>, name: &str) -> String {
    csi_sidecars_e2e::wait_for(&format!("claim {name} bound"), TIMEOUT, || async {
        let claim = claims.get(name).await.ok()?;
        (claim.status.as_ref()?.phase.as_deref()? == "Bound")
            .then(|| claim.spec.and_then(|s| s.volume_name).unwrap_or_default())
    })
    .await
}
