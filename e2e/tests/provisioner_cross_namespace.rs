//! csi-provisioner with a data source in another namespace (`dataSourceRef.namespace`, the alpha
//! CrossNamespaceVolumeDataSource feature, enabled in the e2e control plane), allowed by a ReferenceGrant: a claim
//! cloned, and a VolumeSnapshot (taken by snapshot-controller and csi-snapshotter) restored.

use csi_sidecars_e2e::control_plane::cluster::Cluster;
use csi_sidecars_e2e::control_plane::namespace::TestNamespace;
use csi_sidecars_e2e::control_plane::reference_grant_crd::install_reference_grant_crd;
use csi_sidecars_e2e::control_plane::snapshot_crds::install_snapshot_crds;
use csi_sidecars_e2e::http::free_port;
use csi_sidecars_e2e::wait::eventually;
use csi_sidecars_e2e::worlds::provisioner::{
    ProvisionerWorld as World, TIMEOUT, claim, has_finalizer, plugin_volume_rows,
};
use csi_sidecars_e2e::worlds::snapshot::{Snapshots, ready, start_csi_snapshotter, start_snapshot_controller};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, TypedObjectReference};
use kube::Api;
use kube::api::{DeleteParams, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;
use snapshot_api::{DeletionPolicy, VolumeSnapshot, VolumeSnapshotContent, VolumeSnapshotSource, VolumeSnapshotSpec};

const CROSS_NAMESPACE_GATE: &str = "--feature-gates=CrossNamespaceVolumeDataSource=true";

/// A ReferenceGrant in `namespace` letting the claims of `from_namespace` use its objects of `(group, kind)`.
async fn grant_claims_of(client: &kube::Client, from_namespace: &str, namespace: &str, (group, kind): (&str, &str)) {
    let grant: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "gateway.networking.k8s.io/v1beta1",
        "kind": "ReferenceGrant",
        "metadata": {"name": format!("claims-of-{from_namespace}")},
        "spec": {
            "from": [{"group": "", "kind": "PersistentVolumeClaim", "namespace": from_namespace}],
            "to": [{"group": group, "kind": kind}],
        },
    }))
    .unwrap();
    let gvk = GroupVersionKind::gvk("gateway.networking.k8s.io", "v1beta1", "ReferenceGrant");
    let grants: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &ApiResource::from_gvk(&gvk));
    grants.create(&PostParams::default(), &grant).await.unwrap();
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

    grant_claims_of(&client, world.ns(), source_ns.name(), ("", "PersistentVolumeClaim")).await;

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

/// A snapshot in one namespace, cut by the real snapshot-controller and csi-snapshotter, restored into a claim of
/// another: refused with upstream's words until a ReferenceGrant in the snapshot's namespace allows claims of the
/// restoring namespace to use VolumeSnapshots; then the driver makes the volume from the snapshot's handle, the
/// snapshot is protected only while the restore is in flight, and deleting it deletes its content and storage.
#[tokio::test]
async fn provisioner_restores_a_snapshot_of_another_namespace_with_a_reference_grant() {
    let client = Cluster::shared().client().await;
    install_reference_grant_crd(&client).await;
    install_snapshot_crds(&client).await;
    let mut world = World::new("prov-xns-restore", &[]).await;
    let source_ns = TestNamespace::create(&client, "prov-xns-snap").await;
    let source_claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), source_ns.name());
    let source_snapshots: Api<VolumeSnapshot> = Api::namespaced(client.clone(), source_ns.name());
    let class = world.class("xns-restore", &[], "Delete").await;
    let _provisioner = world.start_provisioner("csi-provisioner", &[CROSS_NAMESPACE_GATE]);
    let _controller = start_snapshot_controller(&mut world, free_port()).await;
    let _snapshotter = start_csi_snapshotter(&mut world).await;
    let mut snapshots = Snapshots::new(&world);
    let snapshot_class = snapshots.class("xns", DeletionPolicy::Delete, false).await;

    source_claims.create(&PostParams::default(), &claim("origin", &class, None, "ReadWriteOnce")).await.unwrap();
    wait_bound(&source_claims, "origin").await;
    let spec = VolumeSnapshotSpec {
        source: VolumeSnapshotSource { persistent_volume_claim_name: Some("origin".into()), ..Default::default() },
        volume_snapshot_class_name: Some(snapshot_class),
    };
    source_snapshots.create(&PostParams::default(), &VolumeSnapshot::new("snap", spec)).await.unwrap();
    let snap = csi_sidecars_e2e::wait::wait_for("snapshot snap ready", TIMEOUT, || async {
        source_snapshots.get("snap").await.ok().filter(ready)
    })
    .await;
    let content_name = snap.status.and_then(|s| s.bound_volume_snapshot_content_name).expect("a bound content");
    let contents: Api<VolumeSnapshotContent> = Api::all(client.clone());
    let handle = contents.get(&content_name).await.unwrap().status.and_then(|s| s.snapshot_handle).unwrap();

    let mut restored = claim("restored", &class, None, "ReadWriteOnce");
    restored.spec.as_mut().unwrap().data_source_ref = Some(TypedObjectReference {
        api_group: Some("snapshot.storage.k8s.io".into()),
        kind: "VolumeSnapshot".into(),
        name: "snap".into(),
        namespace: Some(source_ns.name().into()),
    });
    world.claim_object(restored).await;
    let refused = format!(
        "accessing {}/snap of VolumeSnapshot dataSource from {}/restored isn't allowed",
        source_ns.name(),
        world.ns()
    );
    world.event("restored", "ProvisioningFailed", &refused).await;
    assert_eq!(world.plugin_volumes().len(), 1, "nothing restored without the grant");

    grant_claims_of(&client, world.ns(), source_ns.name(), ("snapshot.storage.k8s.io", "VolumeSnapshot")).await;

    let restored_volume = world.bound("restored").await;
    let restored_handle = world.volumes().get(&restored_volume).await.unwrap().spec.unwrap().csi.unwrap().volume_handle;
    let rows = plugin_volume_rows(&world.socket);
    let row = rows.iter().find(|r| r["volume_id"] == restored_handle.as_str()).expect("the restored volume");
    assert_eq!(row["content_source"]["snapshot_id"], handle.as_str(), "restored from the other namespace's snapshot");
    eventually("the snapshot's source protection is lifted once the PV exists", TIMEOUT, || async {
        let snapshot = source_snapshots.get("snap").await.unwrap();
        !has_finalizer(&snapshot.metadata, "provisioner.storage.kubernetes.io/volumesnapshot-as-source-protection")
    })
    .await;

    source_snapshots.delete("snap", &DeleteParams::default()).await.unwrap();
    eventually("the snapshot, its content and its storage are gone", TIMEOUT, || async {
        source_snapshots.get_opt("snap").await.unwrap().is_none()
            && contents.get_opt(&content_name).await.unwrap().is_none()
            && world.csictl(&["list-snapshots"]).as_array().is_none_or(Vec::is_empty)
    })
    .await;
}

async fn wait_bound(claims: &Api<PersistentVolumeClaim>, name: &str) -> String {
    csi_sidecars_e2e::wait::wait_for(&format!("claim {name} bound"), TIMEOUT, || async {
        let claim = claims.get(name).await.ok()?;
        (claim.status.as_ref()?.phase.as_deref()? == "Bound")
            .then(|| claim.spec.and_then(|s| s.volume_name).unwrap_or_default())
    })
    .await
}
