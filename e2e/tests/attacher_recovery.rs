//! csi-attacher killed (-9) in the middle of its work, and the driver contradicting the VolumeAttachments: nothing
//! is attached twice, nothing in use is detached, and ListVolumes' published nodes bring status and driver back
//! together.

use csi_sidecars_e2e::processes::scenario::PLUGIN_NODE_ID;
use csi_sidecars_e2e::wait::{eventually, wait_for};
use csi_sidecars_e2e::worlds::attacher::{AttacherWorld as World, TIMEOUT};
use k8s_openapi::api::storage::v1::VolumeAttachment;
use serde_json::json;

fn attached(va: &VolumeAttachment) -> bool {
    va.status.as_ref().is_some_and(|s| s.attached)
}

#[tokio::test]
async fn killed_between_publish_and_the_status_write_nothing_is_attached_twice_or_detached() {
    let mut world = World::new("attach-kill", true).await;
    world.register_node().await;
    let (mut attacher, _) = world.start_attacher("csi-attacher", &[]);
    // An attachment in use, attached before the crash.
    let (in_use_pv, in_use_volume) = world.volume("in-use", None).await;
    let in_use = world.attach("in-use", &in_use_pv, &[]).await;
    world.wait_attached(&in_use).await;

    // The driver attaches, then takes its time to answer: the attacher dies before it can write the status.
    world.set_faults(json!({"ControllerPublishVolume": {"after_work": true, "latency_ms": 30000}}));
    let (pv, volume_id) = world.volume("data", None).await;
    let va = world.attach("data", &pv, &[]).await;
    wait_for("the driver attached the volume", TIMEOUT, || async {
        world.published_nodes(&volume_id).contains(&PLUGIN_NODE_ID.to_string()).then_some(())
    })
    .await;
    attacher.kill9();
    let before = world.attachments().get(&va).await.unwrap();
    assert!(!attached(&before), "killed before the status write");
    assert_eq!(before.metadata.finalizers.unwrap_or_default().len(), 1, "the finalizer was written before the call");

    world.set_faults(json!({}));
    let (_restarted, _) = world.start_attacher("csi-attacher-restarted", &[]);
    world.wait_attached(&va).await;
    assert_eq!(world.published_nodes(&volume_id), vec![PLUGIN_NODE_ID.to_string()], "attached once, to its node");
    assert!(world.plugin_requests("ControllerPublishVolume", &volume_id) >= 2, "asked again after the restart");
    for volume in [&volume_id, &in_use_volume] {
        assert_eq!(world.plugin_requests("ControllerUnpublishVolume", volume), 0, "nothing detached");
    }
    assert!(attached(&world.attachments().get(&in_use).await.unwrap()));
    assert_eq!(world.published_nodes(&in_use_volume), vec![PLUGIN_NODE_ID.to_string()], "still in use");
}

#[tokio::test]
async fn killed_during_a_detach_the_successor_finishes_it() {
    let mut world = World::new("detach-kill", true).await;
    world.register_node().await;
    let (mut attacher, _) = world.start_attacher("csi-attacher", &[]);
    let (pv, volume_id) = world.volume("data", None).await;
    let va = world.attach("data", &pv, &[]).await;
    world.wait_attached(&va).await;

    world.set_faults(json!({"ControllerUnpublishVolume": {"after_work": true, "latency_ms": 30000}}));
    world.delete_attachment(&va).await;
    wait_for("the driver detached the volume", TIMEOUT, || async {
        world.published_nodes(&volume_id).is_empty().then_some(())
    })
    .await;
    attacher.kill9();
    assert!(world.attachments().get_opt(&va).await.unwrap().is_some(), "killed before the finalizer went");

    world.set_faults(json!({}));
    let (_restarted, _) = world.start_attacher("csi-attacher-restarted", &[]);
    world.wait_gone(&va).await;
    assert!(world.plugin_requests("ControllerUnpublishVolume", &volume_id) >= 2, "detached again: idempotent");
    let volume = world.pvs().get(&pv).await.unwrap();
    let finalizers = volume.metadata.finalizers.unwrap_or_default();
    assert!(finalizers.iter().any(|f| f.starts_with("external-attacher/")), "the PV is not deleted: it keeps it");
}

#[tokio::test]
async fn list_volumes_published_nodes_bring_status_and_driver_back_together() {
    let mut world = World::new("attach-reconcile", true).await;
    world.register_node().await;
    let (_attacher, _) = world.start_attacher("csi-attacher", &["--reconcile-sync=1s"]);

    // Attached, then detached behind the attacher's back: it is attached again.
    let (pv, volume_id) = world.volume("lost", None).await;
    let va = world.attach("lost", &pv, &[]).await;
    world.wait_attached(&va).await;
    world.csictl(&["unpublish-volume", &volume_id, "--node-id", PLUGIN_NODE_ID]);
    eventually("the volume attached again", TIMEOUT, || async {
        world.published_nodes(&volume_id) == vec![PLUGIN_NODE_ID.to_string()]
    })
    .await;
    assert!(world.plugin_requests("ControllerPublishVolume", &volume_id) >= 2);

    // Detached (the finalizer gone, another keeps the VolumeAttachment), then attached behind the attacher's back:
    // it is detached again, though it no longer carries the attacher's finalizer.
    let (pv, volume_id) = world.volume("stray", None).await;
    let stray = world.attach("stray", &pv, &["e2e.test/keep"]).await;
    world.wait_attached(&stray).await;
    world.delete_attachment(&stray).await;
    world
        .wait_attachment(&stray, "detached, only the test's finalizer left", |va| {
            !attached(va) && va.metadata.finalizers.as_deref() == Some(&["e2e.test/keep".to_string()][..])
        })
        .await;
    assert!(world.published_nodes(&volume_id).is_empty());
    world.csictl(&["publish-volume", &volume_id, "--node-id", PLUGIN_NODE_ID]);
    eventually("the stray attachment detached again", TIMEOUT, || async {
        world.published_nodes(&volume_id).is_empty()
    })
    .await;
    assert!(world.plugin_requests("ControllerUnpublishVolume", &volume_id) >= 2);
    world.drop_finalizers(&stray, &[]).await;
    world.wait_gone(&stray).await;
}
