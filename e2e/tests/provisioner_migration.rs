//! CSI migration: a driver that replaces an in-tree plugin (here the hostpath plugin named `ebs.csi.aws.com`)
//! provisions and deletes the volumes of that plugin's StorageClasses (`kubernetes.io/aws-ebs`), writing the PVs in
//! their in-tree form, as the control plane's PV controller expects from a migrated plugin.

use csi_sidecars_e2e::provisioner_world::{ProvisionerWorld as World, TIMEOUT};
use csi_sidecars_e2e::{eventually, free_port, http_get};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Api;
use kube::api::{DeleteParams, ObjectMeta, PostParams};

const DRIVER: &str = "ebs.csi.aws.com";
const IN_TREE: &str = "kubernetes.io/aws-ebs";

#[tokio::test]
async fn provisioner_serves_the_in_tree_classes_of_the_plugin_it_replaces() {
    let mut world = World::with_driver("prov-migration", Some(DRIVER), &[]).await;
    let class_name = format!("{}-gp3", world.ns());
    let class = StorageClass {
        metadata: ObjectMeta { name: Some(class_name.clone()), ..Default::default() },
        provisioner: IN_TREE.into(),
        parameters: Some([("type".to_string(), "gp3".to_string()), ("fsType".to_string(), "xfs".to_string())].into()),
        reclaim_policy: Some("Delete".into()),
        volume_binding_mode: Some("Immediate".into()),
        ..Default::default()
    };
    Api::<StorageClass>::all(world.client.clone()).create(&PostParams::default(), &class).await.unwrap();
    world.classes.push(class_name.clone());
    let port = free_port();
    let endpoint = format!("--http-endpoint=127.0.0.1:{port}");
    // Without topology: the hostpath plugin's node key has no place in an in-tree EBS volume (its region is
    // derived from EBS zones).
    let _provisioner =
        world.start_provisioner("csi-provisioner", &[endpoint.as_str(), "--feature-gates=Topology=false"]);

    world.claim("legacy", &class_name, None, "ReadWriteOnce").await;
    let volume_name = world.bound("legacy").await;
    let pv = world.volumes().get(&volume_name).await.unwrap();
    let spec = pv.spec.clone().unwrap();
    assert!(spec.csi.is_none(), "the PV is written in its in-tree form");
    let ebs = spec.aws_elastic_block_store.expect("an awsElasticBlockStore PV");
    let handles = world.plugin_volumes();
    assert_eq!(handles.len(), 1);
    assert!(ebs.volume_id.ends_with(&handles[0]), "the in-tree volume id is the driver's volume: {}", ebs.volume_id);
    assert_eq!(ebs.fs_type.as_deref(), Some("xfs"), "the in-tree fsType parameter was translated");
    let provisioned_by =
        pv.metadata.annotations.clone().unwrap_or_default().get("pv.kubernetes.io/provisioned-by").cloned();
    assert_eq!(provisioned_by.as_deref(), Some(IN_TREE));

    world.claims().delete("legacy", &DeleteParams::default()).await.unwrap();
    eventually("the in-tree PV is deleted with its volume", TIMEOUT, || async {
        world.volumes().get_opt(&volume_name).await.unwrap().is_none()
    })
    .await;
    world.no_plugin_volumes_left().await;

    let metrics = http_get(port, "/metrics").await;
    for series in [
        r#"method_name="/csi.v1.Controller/CreateVolume",grpc_status_code="OK",migrated="true""#,
        r#"method_name="/csi.v1.Controller/DeleteVolume",grpc_status_code="OK",migrated="true""#,
        r#"method_name="/csi.v1.Controller/ControllerGetCapabilities",grpc_status_code="OK",migrated="false""#,
    ] {
        assert!(metrics.contains(series), "missing {series} in /metrics:\n{metrics}");
    }
}
