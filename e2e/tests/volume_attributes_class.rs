//! VolumeAttributesClass (storage.k8s.io/v1, GA in 1.34) round-trips through
//! the API, its parameters are immutable, and the cluster's protection
//! controller keeps a class that a claim still uses.

use std::collections::BTreeMap;
use std::time::Duration;

use csi_sidecars_e2e::control_plane::cluster::Cluster;
use csi_sidecars_e2e::control_plane::namespace::TestNamespace;
use csi_sidecars_e2e::wait::eventually;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PersistentVolumeClaimSpec, VolumeResourceRequirements};
use k8s_openapi::api::storage::v1::VolumeAttributesClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::Api;
use kube::api::{DeleteParams, ObjectMeta, PostParams};

const TIMEOUT: Duration = Duration::from_secs(60);

fn class(name: &str, iops: &str) -> VolumeAttributesClass {
    VolumeAttributesClass {
        metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
        driver_name: "hostpath.csi.k8s.io".into(),
        parameters: Some(BTreeMap::from([
            ("iops".to_string(), iops.to_string()),
            ("throughput".to_string(), "50MiB/s".to_string()),
        ])),
    }
}

#[tokio::test]
async fn a_class_round_trips_and_its_parameters_are_immutable() {
    let client = Cluster::shared().client().await;
    let ns = TestNamespace::create(&client, "vac").await;
    let classes: Api<VolumeAttributesClass> = Api::all(client.clone());
    let name = format!("{}-gold", ns.name());

    classes.create(&PostParams::default(), &class(&name, "3000")).await.unwrap();
    let stored = classes.get(&name).await.unwrap();
    assert_eq!(stored.driver_name, "hostpath.csi.k8s.io");
    assert_eq!(stored.parameters.as_ref().unwrap()["iops"], "3000");
    assert_eq!(stored.parameters.as_ref().unwrap()["throughput"], "50MiB/s");
    // Admission adds the protection finalizer on create.
    assert!(stored.metadata.finalizers.unwrap_or_default().contains(&"kubernetes.io/vac-protection".to_string()));

    let mut changed = classes.get(&name).await.unwrap();
    changed.parameters.as_mut().unwrap().insert("iops".into(), "9000".into());
    let err = classes.replace(&name, &PostParams::default(), &changed).await.unwrap_err();
    match err {
        kube::Error::Api(status) => assert!(status.is_invalid(), "{status:?}"),
        other => panic!("expected Invalid, got {other:?}"),
    }
    assert_eq!(classes.get(&name).await.unwrap().parameters.unwrap()["iops"], "3000");

    classes.delete(&name, &DeleteParams::default()).await.unwrap();
    eventually("unused class deleted", TIMEOUT, || async { classes.get_opt(&name).await.unwrap().is_none() }).await;
}

#[tokio::test]
async fn a_class_in_use_by_a_claim_is_kept_until_the_claim_goes() {
    let client = Cluster::shared().client().await;
    let ns = TestNamespace::create(&client, "vacuse").await;
    let classes: Api<VolumeAttributesClass> = Api::all(client.clone());
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns.name());
    let name = format!("{}-silver", ns.name());
    classes.create(&PostParams::default(), &class(&name, "1000")).await.unwrap();

    let claim = PersistentVolumeClaim {
        metadata: ObjectMeta { name: Some("uses-silver".into()), ..Default::default() },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            storage_class_name: Some(format!("{}-none", ns.name())),
            volume_attributes_class_name: Some(name.clone()),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([("storage".to_string(), Quantity("1Gi".into()))])),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    claims.create(&PostParams::default(), &claim).await.unwrap();

    classes.delete(&name, &DeleteParams::default()).await.unwrap();
    // The protection controller must notice the claim and keep the finalizer;
    // give it time to act, then check the class is still there, marked deleted.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let held = classes.get(&name).await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    assert!(held.metadata.finalizers.unwrap_or_default().contains(&"kubernetes.io/vac-protection".to_string()));

    claims.delete("uses-silver", &DeleteParams::default()).await.unwrap();
    eventually("class released once the claim is gone", TIMEOUT, || async {
        classes.get_opt(&name).await.unwrap().is_none()
    })
    .await;
}
