//! CSI migration: a driver that replaces an in-tree plugin (here the hostpath plugin named `ebs.csi.aws.com`)
//! provisions and deletes the volumes of that plugin's StorageClasses (`kubernetes.io/aws-ebs`), writing the PVs in
//! their in-tree form, as the control plane's PV controller expects from a migrated plugin; and it expands in-tree
//! PVs once kube-controller-manager hands their claims over to it. Portworx (`pxd.portworx.com`), whose class
//! translation differs, has a test of its own.
//!
//! Sidecars watch the whole cluster and the driver name is fixed, so the tests here take turns
//! ([`ONE_AT_A_TIME`]); no other test file may use this driver name.

use std::collections::BTreeMap;

use csi_sidecars_e2e::http::{free_port, http_get};
use csi_sidecars_e2e::processes::rbac::{Sidecar, SidecarIdentity};
use csi_sidecars_e2e::processes::scenario::binary;
use csi_sidecars_e2e::wait::{eventually, wait_for};
use csi_sidecars_e2e::worlds::provisioner::{ProvisionerWorld as World, TIMEOUT, plugin_volume_rows};
use k8s_openapi::api::core::v1::{
    AWSElasticBlockStoreVolumeSource, ObjectReference, PersistentVolume, PersistentVolumeClaim,
    PersistentVolumeClaimSpec, PersistentVolumeSpec, VolumeResourceRequirements,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::Api;
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};

const DRIVER: &str = "ebs.csi.aws.com";
const IN_TREE: &str = "kubernetes.io/aws-ebs";
const GIB: i64 = 1 << 30;

/// Held by each test for its whole run: two sidecar sets of one driver would act on each other's objects.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test]
async fn provisioner_serves_the_in_tree_classes_of_the_plugin_it_replaces() {
    let _turn = ONE_AT_A_TIME.lock().await;
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

/// Portworx, whose translation differs from the others: the class names the driver as its provisioner and its
/// OpenStorage auth secret stands for every CSI secret. The provisioner reads that secret for CreateVolume, writes a
/// `portworxVolume` PV naming the in-tree plugin and the secret for the deletion, and deletes through the driver.
#[tokio::test]
async fn provisioner_serves_portworx_classes_with_their_auth_secret() {
    let mut world = World::with_driver("prov-migration-px", Some("pxd.portworx.com"), &[]).await;
    world.secret("px-auth", "auth-token", "px-token-value").await;
    let class_name = format!("{}-px", world.ns());
    let class = StorageClass {
        metadata: ObjectMeta { name: Some(class_name.clone()), ..Default::default() },
        provisioner: "kubernetes.io/portworx-volume".into(),
        parameters: Some(
            [
                ("repl".to_string(), "2".to_string()),
                ("openstorage.io/auth-secret-name".to_string(), "px-auth".to_string()),
                ("openstorage.io/auth-secret-namespace".to_string(), world.ns().to_string()),
            ]
            .into(),
        ),
        reclaim_policy: Some("Delete".into()),
        volume_binding_mode: Some("Immediate".into()),
        ..Default::default()
    };
    Api::<StorageClass>::all(world.client.clone()).create(&PostParams::default(), &class).await.unwrap();
    world.classes.push(class_name.clone());
    let provisioner = world.start_provisioner("csi-provisioner", &["--feature-gates=Topology=false"]);

    world.claim("legacy", &class_name, None, "ReadWriteOnce").await;
    let volume_name = world.bound("legacy").await;
    let pv = world.volumes().get(&volume_name).await.unwrap();
    let spec = pv.spec.clone().unwrap();
    assert!(spec.csi.is_none(), "the PV is written in its in-tree form");
    let portworx = spec.portworx_volume.expect("a portworxVolume PV");
    assert_eq!(world.plugin_volumes(), vec![portworx.volume_id.clone()], "the in-tree volume id is the driver's");
    let annotations = pv.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(annotations["pv.kubernetes.io/provisioned-by"], "kubernetes.io/portworx-volume");
    assert_eq!(annotations["volume.kubernetes.io/provisioner-deletion-secret-name"], "px-auth", "the auth secret");
    let created = plugin_volume_rows(&world.socket);
    assert_eq!(created[0]["volume_context"]["repl"], "2", "the other parameters reach the driver: {created:?}");

    world.claims().delete("legacy", &DeleteParams::default()).await.unwrap();
    eventually("the in-tree PV is deleted with its volume", TIMEOUT, || async {
        world.volumes().get_opt(&volume_name).await.unwrap().is_none()
    })
    .await;
    world.no_plugin_volumes_left().await;
    assert!(!provisioner.log().contains("px-token-value"), "the secret value was logged");
}

#[tokio::test]
async fn resizer_expands_an_in_tree_volume_handed_over_to_it() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let mut world = World::with_driver("rsz-migration", Some(DRIVER), &[]).await;
    let class_name = format!("{}-expandable", world.ns());
    let class = StorageClass {
        metadata: ObjectMeta { name: Some(class_name.clone()), ..Default::default() },
        provisioner: IN_TREE.into(),
        allow_volume_expansion: Some(true),
        reclaim_policy: Some("Retain".into()),
        ..Default::default()
    };
    Api::<StorageClass>::all(world.client.clone()).create(&PostParams::default(), &class).await.unwrap();
    world.classes.push(class_name.clone());

    // A backend volume, an in-tree EBS PV naming it, and a claim bound to that PV.
    let endpoint = format!("unix://{}", world.socket.display());
    let backend_name = format!("{}-data", world.ns());
    let output = std::process::Command::new(binary("csictl"))
        .args(["--endpoint", &endpoint, "-o", "json", "create-volume", &backend_name, "--size", "1Gi"])
        .output()
        .expect("run csictl");
    assert!(output.status.success(), "csictl create-volume: {}", String::from_utf8_lossy(&output.stderr));
    let created: serde_json::Value = serde_json::from_slice(&output.stdout).expect("csictl prints JSON");
    let volume_id = created["volume_id"].as_str().expect("volume id").to_string();
    let size = BTreeMap::from([("storage".to_string(), Quantity("1Gi".into()))]);
    let pv_name = format!("{}-data", world.ns());
    let in_tree_source = AWSElasticBlockStoreVolumeSource {
        volume_id: volume_id.clone(),
        fs_type: Some("ext4".into()),
        ..Default::default()
    };
    let pv = PersistentVolume {
        metadata: ObjectMeta { name: Some(pv_name.clone()), ..Default::default() },
        spec: Some(PersistentVolumeSpec {
            capacity: Some(size.clone()),
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            storage_class_name: Some(class_name.clone()),
            persistent_volume_reclaim_policy: Some("Retain".into()),
            claim_ref: Some(ObjectReference {
                namespace: Some(world.ns().to_string()),
                name: Some("data".into()),
                ..Default::default()
            }),
            aws_elastic_block_store: Some(in_tree_source.clone()),
            ..Default::default()
        }),
        ..Default::default()
    };
    world.volumes().create(&PostParams::default(), &pv).await.unwrap();
    let claim = PersistentVolumeClaim {
        metadata: ObjectMeta { name: Some("data".into()), ..Default::default() },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            storage_class_name: Some(class_name.clone()),
            volume_name: Some(pv_name.clone()),
            resources: Some(VolumeResourceRequirements { requests: Some(size), ..Default::default() }),
            ..Default::default()
        }),
        ..Default::default()
    };
    world.claim_object(claim).await;
    world.bound("data").await;

    let port = free_port();
    // Upstream's external-resizer rules, through a ServiceAccount token (dropped after the process).
    let resizer_identity =
        SidecarIdentity::create(&world.client, world.ns(), Sidecar::Resizer, world.scenario.dir()).await;
    let resizer_args = [
        format!("--csi-address={}", world.socket.display()),
        resizer_identity.kubeconfig_flag(),
        format!("--http-endpoint=127.0.0.1:{port}"),
        "--retry-interval-start=500ms".to_string(),
        "--retry-interval-max=5s".to_string(),
        "-v=5".to_string(),
    ];
    let _resizer = world.scenario.start("csi-resizer", &binary("csi-resizer"), &resizer_args);

    let grow = serde_json::json!({"spec": {"resources": {"requests": {"storage": "2Gi"}}}});
    world.claims().patch("data", &PatchParams::default(), &Patch::Merge(&grow)).await.unwrap();
    // kube-controller-manager's expander sees an in-tree EBS volume and hands the claim to the CSI driver.
    let claims = world.claims();
    let resizer = wait_for("the claim handed over to a CSI resizer", TIMEOUT, || async {
        let claim = claims.get("data").await.ok()?;
        claim.metadata.annotations?.get("volume.kubernetes.io/storage-resizer").cloned()
    })
    .await;
    assert_eq!(resizer, DRIVER);
    let volumes = world.volumes();
    eventually("the PV at 2Gi", TIMEOUT, || async {
        let Ok(pv) = volumes.get(&pv_name).await else { return false };
        pv.spec.and_then(|s| s.capacity).is_some_and(|c| c.get("storage") == Some(&Quantity("2Gi".into())))
    })
    .await;
    let spec = world.volumes().get(&pv_name).await.unwrap().spec.unwrap();
    assert!(spec.csi.is_none(), "the PV stays in its in-tree form");
    assert_eq!(spec.aws_elastic_block_store, Some(in_tree_source), "the in-tree source is unchanged");
    let rows = plugin_volume_rows(&world.socket);
    let backend = rows.iter().find(|row| row["volume_id"] == volume_id.as_str()).expect("the backend volume");
    assert_eq!(backend["capacity_bytes"], 2 * GIB, "the driver expanded the translated volume handle");

    let metrics = http_get(port, "/metrics").await;
    let series = r#"method_name="/csi.v1.Controller/ControllerExpandVolume",grpc_status_code="OK",migrated="true""#;
    assert!(metrics.contains(series), "missing {series} in /metrics:\n{metrics}");
    let _ = world.claims().delete("data", &DeleteParams::default()).await;
}
