//! csi-external-health-monitor-controller against the real control plane, under upstream's RBAC
//! (`e2e/rbac/external-health-monitor-controller.yaml`): a volume the driver reports degraded gets a
//! VolumeConditionAbnormal Warning on its claim, naming the driver's message, and a VolumeConditionNormal event once
//! the driver reports it healthy again.

use csi_sidecars_e2e::processes::rbac::{Sidecar, SidecarIdentity};
use csi_sidecars_e2e::processes::scenario::binary;
use csi_sidecars_e2e::wait::wait_for;
use csi_sidecars_e2e::worlds::provisioner::{ProvisionerWorld as World, TIMEOUT};
use k8s_openapi::api::core::v1::Event;
use kube::Api;
use kube::api::ListParams;

/// The events of reason `reason` on the claim `name`, as their messages.
async fn claim_events(world: &World, name: &str, reason: &str) -> Vec<String> {
    let events: Api<Event> = Api::namespaced(world.client.clone(), world.ns());
    let selector = format!("involvedObject.kind=PersistentVolumeClaim,involvedObject.name={name},reason={reason}");
    let listed = events.list(&ListParams::default().fields(&selector)).await.unwrap();
    listed.items.into_iter().map(|e| e.message.unwrap_or_default()).collect()
}

#[tokio::test]
async fn a_degraded_volume_is_reported_on_its_claim_and_its_recovery_too() {
    let mut world = World::new("health", &["--volume-health=get"]).await;
    let class = world.class("health", &[], "Delete").await;
    let _provisioner = world.start_provisioner("csi-provisioner", &[]);
    world.claim("data", &class, None, "ReadWriteOnce").await;
    let pv_name = world.bound("data").await;
    let pv = world.volumes().get(&pv_name).await.unwrap();
    let handle = pv.spec.and_then(|s| s.csi).map(|c| c.volume_handle).expect("a CSI volume");

    let identity =
        SidecarIdentity::create(&world.client, world.ns(), Sidecar::HealthMonitor, world.scenario.dir()).await;
    let args = vec![
        format!("--csi-address={}", world.socket.display()),
        identity.kubeconfig_flag(),
        "--monitor-interval=1s".to_string(),
        "-v=5".to_string(),
    ];
    let program = binary("csi-external-health-monitor-controller");
    let _monitor = world.base.scenario.start("csi-external-health-monitor-controller", &program, &args);

    // The plugin reports the volume DEGRADED while this marker exists, with its text as the message.
    let marker = world.scenario.path("hostpath-plugin-state").join("volumes").join(format!("{handle}.degraded"));
    std::fs::write(&marker, "disk 3 of the mirror failed").unwrap();
    let abnormal = wait_for("a VolumeConditionAbnormal event on the claim", TIMEOUT, || async {
        claim_events(&world, "data", "VolumeConditionAbnormal").await.into_iter().next()
    })
    .await;
    assert!(abnormal.contains("disk 3 of the mirror failed"), "the driver's message is named: {abnormal}");

    std::fs::remove_file(&marker).unwrap();
    wait_for("a VolumeConditionNormal event on the claim", TIMEOUT, || async {
        claim_events(&world, "data", "VolumeConditionNormal").await.into_iter().next()
    })
    .await;
    let pv_after = world.volumes().get(&pv_name).await.unwrap();
    assert_eq!(pv_after.spec.and_then(|s| s.csi).map(|c| c.volume_handle), Some(handle), "the PV is left intact");
}
