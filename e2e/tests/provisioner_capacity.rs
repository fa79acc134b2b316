//! csi-provisioner publishing CSIStorageCapacity (`--enable-capacity`) against the real control plane and the
//! hostpath plugin, whose GetCapacity reports its `--capacity` minus its volumes.

use std::collections::BTreeMap;
use std::time::Duration;

use csi_sidecars_e2e::http::{free_port, http_get};
use csi_sidecars_e2e::processes::scenario::{Process, binary};
use csi_sidecars_e2e::wait::{eventually, wait_for};
use csi_sidecars_e2e::worlds::provisioner::{PLUGIN_NODE, ProvisionerWorld as World, TIMEOUT, TOPOLOGY_KEY, claim};
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use k8s_openapi::api::storage::v1::{CSIStorageCapacity, StorageClass};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::Api;
use kube::api::{DeleteParams, ListParams, ObjectMeta, PostParams};

const SELECTOR: &str = "csi.storage.k8s.io/managed-by=external-provisioner";

fn capacities(world: &World) -> Api<CSIStorageCapacity> {
    Api::namespaced(world.client.clone(), world.ns())
}

async fn published(world: &World) -> Vec<CSIStorageCapacity> {
    let list = capacities(world).list(&ListParams::default().labels(SELECTOR)).await.unwrap();
    list.items.into_iter().filter(|c| c.metadata.deletion_timestamp.is_none()).collect()
}

/// Waits for the one object of `class` to report `capacity`; returns it.
async fn capacity_of(world: &World, class: &str, capacity: &str) -> CSIStorageCapacity {
    wait_for(&format!("CSIStorageCapacity of {class} at {capacity}"), TIMEOUT, || async {
        let objects: Vec<_> = published(world).await.into_iter().filter(|c| c.storage_class_name == class).collect();
        match objects.as_slice() {
            [object] if object.capacity == Some(Quantity(capacity.into())) => Some(object.clone()),
            _ => None,
        }
    })
    .await
}

fn start(world: &mut World, name: &str, extra: &[&str], env: &[(&str, &str)]) -> Process {
    let mut flags = vec!["--enable-capacity", "--capacity-poll-interval=2s"];
    flags.extend_from_slice(extra);
    let args = world.provisioner_args(&flags);
    world.scenario.start_with_env(name, &binary("csi-provisioner"), &args, env)
}

#[tokio::test]
async fn provisioner_publishes_capacity_per_class_and_segment_and_follows_changes() {
    let mut world = World::new("prov-cap", &["--capacity=10Gi"]).await;
    let node = world.node("node").await;
    let late = world.class_with_binding("late", &[], "Delete", "WaitForFirstConsumer").await;
    let immediate = world.class("now", &[], "Delete").await;
    let port = free_port();
    let endpoint = format!("--http-endpoint=127.0.0.1:{port}");
    let namespace = world.ns().to_string();
    let _provisioner = start(
        &mut world,
        "csi-provisioner",
        &["--capacity-ownerref-level=-1", &endpoint],
        &[("NAMESPACE", &namespace)],
    );

    let object = capacity_of(&world, &late, "10Gi").await;
    assert!(object.metadata.name.as_deref().is_some_and(|n| n.starts_with("csisc-")), "generateName csisc-");
    let labels = object.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("csi.storage.k8s.io/drivername"), Some(&world.driver));
    let topology = object.node_topology.clone().unwrap().match_labels.unwrap_or_default();
    assert_eq!(topology, BTreeMap::from([(TOPOLOGY_KEY.to_string(), PLUGIN_NODE.to_string())]), "the node's segment");
    assert_eq!(object.maximum_volume_size, Some(Quantity("10Gi".into())), "the largest volume fitting what is left");
    assert_eq!(object.metadata.owner_references, None, "level -1: no owner");
    assert!(published(&world).await.iter().all(|c| c.storage_class_name != immediate), "65: no Immediate class");

    // A provisioned volume takes its share: the published capacity follows without waiting for a poll.
    let mut scheduled = claim("data", &late, None, "ReadWriteOnce");
    scheduled.metadata.annotations = Some(BTreeMap::from([("volume.kubernetes.io/selected-node".to_string(), node)]));
    world.claim_object(scheduled).await;
    world.bound("data").await;
    let shrunk = capacity_of(&world, &late, "10239Mi").await;
    assert_eq!(shrunk.metadata.name, object.metadata.name, "66: the object is updated, not replaced");

    let metrics = http_get(port, "/metrics").await;
    for line in [
        "csistoragecapacities_desired_goal 1",
        "csistoragecapacities_desired_current 1",
        "csistoragecapacities_obsolete 0",
    ] {
        assert!(metrics.contains(line), "missing {line:?} in /metrics:\n{metrics}");
    }

    // An object someone deletes is published again; one whose class is gone is deleted.
    let name = shrunk.metadata.name.clone().unwrap();
    capacities(&world).delete(&name, &DeleteParams::default()).await.unwrap();
    let recreated = capacity_of(&world, &late, "10239Mi").await;
    assert_ne!(recreated.metadata.name.as_deref(), Some(name.as_str()), "67: re-created");
    Api::<StorageClass>::all(world.client.clone()).delete(&late, &DeleteParams::default()).await.unwrap();
    eventually("67: the object of a deleted class goes", TIMEOUT, || async { published(&world).await.is_empty() })
        .await;
}

#[tokio::test]
async fn provisioner_owns_capacity_objects_by_its_pod_and_covers_immediate_classes_on_request() {
    let mut world = World::new("prov-cap-owner", &["--capacity=1Gi"]).await;
    world.node("node").await;
    let immediate = world.class("now", &[], "Delete").await;
    // The provisioner's own Pod, as the API has it when the sidecar runs in one (nothing schedules it here).
    let pod = Pod {
        metadata: ObjectMeta { name: Some("csi-provisioner-0".into()), ..Default::default() },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "csi-provisioner".into(),
                image: Some("csi-provisioner".into()),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    let pod =
        Api::<Pod>::namespaced(world.client.clone(), world.ns()).create(&PostParams::default(), &pod).await.unwrap();
    let namespace = world.ns().to_string();
    let env = [("NAMESPACE", namespace.as_str()), ("POD_NAME", "csi-provisioner-0")];
    let _provisioner = start(
        &mut world,
        "csi-provisioner",
        &["--capacity-ownerref-level=0", "--capacity-for-immediate-binding"],
        &env,
    );

    let object = capacity_of(&world, &immediate, "1Gi").await;
    let owners = object.metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(owners.len(), 1, "{owners:?}");
    assert_eq!((owners[0].kind.as_str(), owners[0].name.as_str()), ("Pod", "csi-provisioner-0"));
    assert_eq!(owners[0].uid, pod.metadata.uid.clone().unwrap());
    assert_eq!(owners[0].controller, Some(true));
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(published(&world).await.len(), 1, "one object per class and segment, also after polls");
}

#[tokio::test]
async fn provisioner_refuses_capacity_without_its_namespace() {
    let mut world = World::new("prov-cap-env", &[]).await;
    let mut provisioner = start(&mut world, "csi-provisioner", &["--capacity-ownerref-level=-1"], &[]);
    assert_ne!(provisioner.wait_exit(TIMEOUT).await, 0);
    assert!(
        provisioner.log().contains("need NAMESPACE env variable for CSIStorageCapacity objects"),
        "{}",
        provisioner.log()
    );
}

#[tokio::test]
async fn node_local_provisioner_publishes_its_own_segment() {
    let mut world = World::new("prov-cap-node", &["--capacity=2Gi"]).await;
    let late = world.class_with_binding("late", &[], "Delete", "WaitForFirstConsumer").await;
    let namespace = world.ns().to_string();
    // No Node or CSINode objects: a node-local provisioner takes its segment from NodeGetInfo (external-provisioner's
    // capacity controller in node mode).
    let env = [("NAMESPACE", namespace.as_str()), ("NODE_NAME", "node-a")];
    let _provisioner =
        start(&mut world, "csi-provisioner", &["--node-deployment", "--capacity-ownerref-level=-1"], &env);

    let object = wait_for("the node's CSIStorageCapacity", TIMEOUT, || async {
        let list = capacities(&world).list(&ListParams::default()).await.ok()?;
        list.items.into_iter().find(|c| c.storage_class_name == late)
    })
    .await;
    let labels = object.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("csi.storage.k8s.io/managed-by").map(String::as_str), Some("external-provisioner-node-a"));
    let topology = object.node_topology.clone().unwrap().match_labels.unwrap_or_default();
    assert_eq!(topology, BTreeMap::from([(TOPOLOGY_KEY.to_string(), PLUGIN_NODE.to_string())]));
    assert_eq!(object.capacity, Some(Quantity("2Gi".into())));
}
