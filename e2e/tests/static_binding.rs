//! The cluster's PV binder against static volumes, following the raw block
//! binding matrix: a claim binds a volume only when their volume modes match
//! (an unset mode means Filesystem); a Block claim never binds a Filesystem PV.

use std::collections::BTreeMap;
use std::time::Duration;

use csi_sidecars_e2e::control_plane::cluster::Cluster;
use csi_sidecars_e2e::control_plane::namespace::TestNamespace;
use csi_sidecars_e2e::wait::{eventually, wait_for};
use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, Event, PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeSpec, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::Api;
use kube::api::{DeleteParams, ListParams, ObjectMeta, PostParams};

const BIND_TIMEOUT: Duration = Duration::from_secs(60);

fn pv(name: &str, class: &str, mode: Option<&str>) -> PersistentVolume {
    PersistentVolume {
        metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
        spec: Some(PersistentVolumeSpec {
            capacity: Some(BTreeMap::from([("storage".to_string(), Quantity("1Gi".into()))])),
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            storage_class_name: Some(class.into()),
            volume_mode: mode.map(String::from),
            persistent_volume_reclaim_policy: Some("Retain".into()),
            csi: Some(CSIPersistentVolumeSource {
                driver: "hostpath.csi.k8s.io".into(),
                volume_handle: format!("handle-{name}"),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn pvc(name: &str, class: &str, mode: Option<&str>) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            storage_class_name: Some(class.into()),
            volume_mode: mode.map(String::from),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([("storage".to_string(), Quantity("1Gi".into()))])),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[tokio::test]
async fn static_volumes_bind_only_when_volume_modes_match() {
    let cluster = Cluster::shared();
    let client = cluster.client().await;
    let ns = TestNamespace::create(&client, "bind").await;
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns.name());
    let events: Api<Event> = Api::namespaced(client.clone(), ns.name());

    // (PV mode, claim mode, binds?) — None is "not set".
    let matrix: [(Option<&str>, Option<&str>, bool); 9] = [
        (None, None, true),
        (None, Some("Block"), false),
        (None, Some("Filesystem"), true),
        (Some("Block"), None, false),
        (Some("Block"), Some("Block"), true),
        (Some("Block"), Some("Filesystem"), false),
        (Some("Filesystem"), Some("Filesystem"), true),
        (Some("Filesystem"), Some("Block"), false),
        (Some("Filesystem"), None, true),
    ];

    // Each row gets its own class name (no StorageClass object needed for
    // static binding), so rows cannot bind each other's volumes, nor rows of
    // other tests.
    let mut rows = Vec::new();
    for (i, (pv_mode, claim_mode, binds)) in matrix.iter().enumerate() {
        let class = format!("{}-row{i}", ns.name());
        let pv_name = format!("{}-pv{i}", ns.name());
        let claim_name = format!("claim{i}");
        pvs.create(&PostParams::default(), &pv(&pv_name, &class, *pv_mode)).await.unwrap();
        claims.create(&PostParams::default(), &pvc(&claim_name, &class, *claim_mode)).await.unwrap();
        rows.push((pv_name, claim_name, *pv_mode, *claim_mode, *binds));
    }

    for (pv_name, claim_name, pv_mode, claim_mode, binds) in &rows {
        let row = format!("PV mode {pv_mode:?} / claim mode {claim_mode:?}");
        if *binds {
            let bound_to = wait_for(&format!("{row}: claim bound"), BIND_TIMEOUT, || async {
                let claim = claims.get(claim_name).await.ok()?;
                let phase = claim.status.as_ref()?.phase.clone()?;
                (phase == "Bound").then(|| claim.spec.and_then(|s| s.volume_name).unwrap_or_default())
            })
            .await;
            assert_eq!(&bound_to, pv_name, "{row}");
            let volume = pvs.get(pv_name).await.unwrap();
            let claim_ref = volume.spec.unwrap().claim_ref.unwrap();
            assert_eq!(claim_ref.name.as_deref(), Some(claim_name.as_str()), "{row}");
            assert_eq!(claim_ref.namespace.as_deref(), Some(ns.name()), "{row}");
        } else {
            // The binder has looked at the claim once it reported on it; only
            // then is "still Pending" a result rather than a race.
            eventually(&format!("{row}: binder reported on the claim"), BIND_TIMEOUT, || async {
                let listed = events
                    .list(&ListParams::default().fields(&format!("involvedObject.name={claim_name}")))
                    .await
                    .map(|l| l.items)
                    .unwrap_or_default();
                listed.iter().any(|e| {
                    e.source.as_ref().and_then(|s| s.component.as_deref()) == Some("persistentvolume-controller")
                        || e.reporting_component.as_deref() == Some("persistentvolume-controller")
                })
            })
            .await;
            let claim = claims.get(claim_name).await.unwrap();
            assert_eq!(claim.status.and_then(|s| s.phase).as_deref(), Some("Pending"), "{row}");
            let volume = pvs.get(pv_name).await.unwrap();
            assert!(volume.spec.unwrap().claim_ref.is_none(), "{row}: the volume was claimed");
            assert_eq!(volume.status.and_then(|s| s.phase).as_deref(), Some("Available"), "{row}");
        }
    }

    // PVs are cluster-scoped: remove ours. The claims go with the namespace.
    for (pv_name, ..) in &rows {
        let _ = pvs.delete(pv_name, &DeleteParams::default()).await;
    }
}
