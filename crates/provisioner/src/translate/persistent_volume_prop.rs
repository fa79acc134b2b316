//! CreateVolume's answer, arbitrary (empty or 64 KiB ids, any capacity, many context keys, any topology): turning it
//! into a PersistentVolume never panics, an empty id is never a handle, and a recorded capacity is never below the
//! request (0 from the driver is the request).

use csi_client::proto::Topology;
use k8s_openapi::api::core::v1::{PersistentVolumeClaimSpec, VolumeResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use proptest::prelude::*;

use super::*;
use crate::translate::create_volume::create_volume_plan;
use sidecar_runtime::quantity::quantity_bytes;

const DRIVER: &str = "hostpath.csi.k8s.io";

fn id() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => Just(String::new()),
        4 => "[a-z0-9-]{1,16}",
        2 => any::<String>(),
        1 => "[a-z]{1,4}".prop_map(|s| s.repeat(65_536 / s.len())),
    ]
}

fn capacity() -> impl Strategy<Value = i64> {
    prop_oneof![Just(0), Just(-1), Just(i64::MIN), Just(i64::MAX), Just(1 << 30), any::<i64>()]
}

fn volume() -> impl Strategy<Value = Volume> {
    let map = || prop::collection::hash_map(any::<String>(), any::<String>(), 0..40);
    (id(), capacity(), map(), prop::collection::vec(map().prop_map(|segments| Topology { segments }), 0..3)).prop_map(
        |(volume_id, capacity_bytes, volume_context, accessible_topology)| Volume {
            capacity_bytes,
            volume_id,
            volume_context,
            content_source: None,
            accessible_topology,
        },
    )
}

fn claim(request: &str) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some("data".into()),
            namespace: Some("apps".into()),
            uid: Some("2a3f9c1e-7d4b-4e8a-9f01-23456789abcd".into()),
            ..Default::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([("storage".to_string(), Quantity(request.into()))])),
                limits: None,
            }),
            storage_class_name: Some("fast".into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn class() -> StorageClass {
    StorageClass {
        metadata: ObjectMeta { name: Some("fast".into()), ..Default::default() },
        provisioner: DRIVER.into(),
        ..Default::default()
    }
}

proptest! {
    #[test]
    fn a_created_volume_has_a_handle_and_at_least_the_requested_capacity(
        volume in volume(),
        request in prop::sample::select(vec!["1", "1Gi", "1500M", "8Ei", "0"]),
    ) {
        let (claim, class, provisioner) = (claim(request), class(), Provisioner::new(DRIVER));
        let Ok(plan) = create_volume_plan(&claim, &class, &provisioner, None) else { return Ok(()) };
        match persistent_volume(&volume, &plan, &SecretReferences::default(), &claim, &class, &provisioner) {
            Ok(pv) => {
                prop_assert!(!volume.volume_id.is_empty());
                let spec = pv.spec.unwrap();
                prop_assert_eq!(&spec.csi.unwrap().volume_handle, &volume.volume_id);
                let recorded = &spec.capacity.unwrap()["storage"];
                let bytes = quantity_bytes(recorded);
                prop_assert!(bytes.is_ok_and(|b| b >= plan.required_bytes), "{recorded:?} < {}", plan.required_bytes);
            }
            Err(VolumeRejection::EmptyVolumeId) => prop_assert!(volume.volume_id.is_empty()),
            Err(VolumeRejection::CapacityTooSmall { created, requested }) => {
                prop_assert!(!volume.volume_id.is_empty());
                prop_assert!(created != 0 && created < requested);
            }
            Err(VolumeRejection::ContentSourceMissing) => prop_assert!(false, "the claim has no data source"),
        }
    }
}
