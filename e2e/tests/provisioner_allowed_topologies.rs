//! csi-provisioner with StorageClasses that restrict where volumes may be made (`allowedTopologies`): the allowed
//! segments are the CreateVolume requirements, whatever `--immediate-topology` says, and a node outside them is
//! refused.

use std::collections::BTreeMap;

use csi_sidecars_e2e::worlds::provisioner::{PLUGIN_NODE, ProvisionerWorld as World, TOPOLOGY_KEY, claim};
use k8s_openapi::api::core::v1::{TopologySelectorLabelRequirement, TopologySelectorTerm};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};

/// A class `<namespace>-<suffix>` of the world's driver allowing the plugin's topology key at `values`.
async fn class_allowing(world: &mut World, suffix: &str, binding: &str, values: &[&str]) -> String {
    let name = format!("{}-{suffix}", world.ns());
    let class = StorageClass {
        metadata: ObjectMeta { name: Some(name.clone()), ..Default::default() },
        provisioner: world.driver.clone(),
        reclaim_policy: Some("Delete".into()),
        volume_binding_mode: Some(binding.into()),
        allowed_topologies: Some(vec![TopologySelectorTerm {
            match_label_expressions: Some(vec![TopologySelectorLabelRequirement {
                key: TOPOLOGY_KEY.into(),
                values: values.iter().map(|v| v.to_string()).collect(),
            }]),
        }]),
        ..Default::default()
    };
    Api::<StorageClass>::all(world.client.clone()).create(&PostParams::default(), &class).await.unwrap();
    world.classes.push(name.clone());
    name
}

/// The world's provisioner runs with `--immediate-topology=false`: an Immediate class without allowedTopologies
/// sends no requirements, so the plugin (which refuses requirements that do not include its node) would make a
/// volume for any class. With allowedTopologies: a class that includes the plugin's node is served and its PV
/// is pinned to that node; a class that does not is refused by the driver (nothing made, an event naming the
/// node); a late-binding claim whose selected node lies outside the class's topologies is refused by the
/// provisioner before the driver is called.
#[tokio::test]
async fn allowed_topologies_are_the_requirements_and_a_node_outside_them_is_refused() {
    let mut world = World::new("prov-allowed-topo", &[]).await;
    let node = world.node("node").await;
    let near = class_allowing(&mut world, "near", "Immediate", &["elsewhere", PLUGIN_NODE]).await;
    let far = class_allowing(&mut world, "far", "Immediate", &["elsewhere"]).await;
    let far_late = class_allowing(&mut world, "far-late", "WaitForFirstConsumer", &["elsewhere"]).await;
    let _provisioner = world.start_provisioner("csi-provisioner", &[]);

    world.claim("near", &near, None, "ReadWriteOnce").await;
    world.claim("far", &far, None, "ReadWriteOnce").await;
    let mut scheduled = claim("far-late", &far_late, None, "ReadWriteOnce");
    scheduled.metadata.annotations =
        Some(BTreeMap::from([("volume.kubernetes.io/selected-node".to_string(), node.clone())]));
    world.claim_object(scheduled).await;

    let volume = world.bound("near").await;
    let affinity =
        serde_json::to_value(world.volumes().get(&volume).await.unwrap().spec.unwrap().node_affinity).unwrap();
    let term = &affinity["required"]["nodeSelectorTerms"][0]["matchExpressions"][0];
    assert_eq!((term["key"].as_str(), term["values"][0].as_str()), (Some(TOPOLOGY_KEY), Some(PLUGIN_NODE)));

    world
        .event("far", "ProvisioningFailed", &format!("volume can only be provisioned on node \"{PLUGIN_NODE}\""))
        .await;
    world
        .event(
            "far-late",
            "ProvisioningFailed",
            &format!("from selected node \"{node}\" is not in requisite: [[{{{TOPOLOGY_KEY} elsewhere}}]]"),
        )
        .await;
    assert_eq!(world.plugin_volumes().len(), 1, "only the allowed class got a volume");
    for name in ["far", "far-late"] {
        let pending = world.claims().get(name).await.unwrap();
        assert_eq!(pending.status.and_then(|s| s.phase).as_deref(), Some("Pending"), "{name}");
    }
}
