//! csi-attacher against the real control plane, no node: VolumeAttachments created as kube-controller-manager's
//! attach-detach controller creates them, attached and detached through the hostpath plugin under upstream's RBAC,
//! the results in the VolumeAttachment's status (upstream's RBAC grants no events).

use csi_sidecars_e2e::http::http_get;
use csi_sidecars_e2e::processes::scenario::PLUGIN_NODE_ID;
use csi_sidecars_e2e::wait::{eventually, wait_for};
use csi_sidecars_e2e::worlds::attacher::{AttacherWorld as World, TIMEOUT};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::Api;
use kube::api::DeleteParams;
use serde_json::json;

fn finalizers(va: &VolumeAttachment) -> Vec<String> {
    va.metadata.finalizers.clone().unwrap_or_default()
}

/// Waits until `status.attachError` is `expected` (message, errorCode). An earlier error may come first: the
/// attacher may see a VolumeAttachment before the PV it names reaches its cache.
async fn wait_attach_error(world: &World, va: &str, expected: (String, Option<i32>)) -> VolumeAttachment {
    let what = format!("attachError {expected:?}");
    world.wait_attachment(va, &what, |va| attach_error(va).as_ref() == Some(&expected)).await
}

/// Whether `/metrics` has a sample of `metric` with every one of `labels` (in any order: Go's client sorts them).
fn has_sample(metrics: &str, metric: &str, labels: &[&str]) -> bool {
    metrics.lines().any(|line| line.starts_with(&format!("{metric}{{")) && labels.iter().all(|l| line.contains(l)))
}

fn attach_error(va: &VolumeAttachment) -> Option<(String, Option<i32>)> {
    let error = va.status.as_ref()?.attach_error.as_ref()?;
    Some((error.message.clone().unwrap_or_default(), error.error_code))
}

#[tokio::test]
async fn a_volume_is_attached_then_detached_under_upstream_names() {
    let mut world = World::new("attach", true).await;
    world.register_node().await;
    let ns = world.ns().to_string();
    let election = format!("--leader-election-namespace={ns}");
    let (attacher, port) = world.start_attacher("csi-attacher", &["--leader-election", &election]);
    let (pv, volume_id) = world.volume("data", None).await;
    let va = world.attach("data", &pv, &[]).await;

    let attached = world.wait_attached(&va).await;
    let ours = format!("external-attacher/{}", world.driver.replace('.', "-"));
    assert_eq!(finalizers(&attached), vec![ours.clone()], "the VolumeAttachment's finalizer");
    let annotations = attached.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(annotations.get("csi.alpha.kubernetes.io/node-id").map(String::as_str), Some(PLUGIN_NODE_ID));
    assert_eq!(attach_error(&attached), None);
    let volume = world.pvs().get(&pv).await.unwrap();
    assert!(volume.metadata.finalizers.unwrap_or_default().contains(&ours), "the PV's finalizer");
    assert_eq!(world.published_nodes(&volume_id), vec![PLUGIN_NODE_ID.to_string()], "the driver attached it");

    // The Lease is upstream's, so ours and theirs contend for one during an upgrade.
    let lease_name = format!("external-attacher-leader-{}", world.driver.replace('.', "-"));
    let leases: Api<Lease> = Api::namespaced(world.client.clone(), &ns);
    let lease = leases.get(&lease_name).await.unwrap_or_else(|e| panic!("Lease {lease_name}: {e}"));
    assert!(lease.spec.and_then(|s| s.holder_identity).is_some_and(|h| !h.is_empty()));

    // Upstream's metric names, and the backlog of each direction.
    let metrics = http_get(port, "/metrics").await;
    let publish = [r#"method_name="/csi.v1.Controller/ControllerPublishVolume""#, r#"grpc_status_code="OK""#];
    assert!(has_sample(&metrics, "csi_sidecar_operations_seconds_count", &publish), "{metrics}");
    for needle in [
        r#"workqueue_depth{name="csi-attacher-va-detach"} 0"#,
        r#"workqueue_oldest_item_age_seconds{name="csi-attacher-va"} 0"#,
        r#"workqueue_oldest_item_age_seconds{name="csi-attacher-va-detach"} 0"#,
        r#"workqueue_depth{name="csi-attacher-pv"} 0"#,
    ] {
        assert!(metrics.contains(needle), "missing {needle} in\n{metrics}");
    }

    world.delete_attachment(&va).await;
    world.wait_gone(&va).await;
    assert!(world.published_nodes(&volume_id).is_empty(), "the driver detached it");
    // The PV keeps the finalizer while it exists, and loses it once deleted with no VolumeAttachment naming it.
    let volume = world.pvs().get(&pv).await.unwrap();
    assert!(volume.metadata.finalizers.unwrap_or_default().contains(&ours));
    world.pvs().delete(&pv, &DeleteParams::default()).await.unwrap();
    let pvs = world.pvs();
    eventually(&format!("PV {pv} gone"), TIMEOUT, || async { matches!(pvs.get_opt(&pv).await, Ok(None)) }).await;
    drop(attacher);
}

#[tokio::test]
async fn failures_are_written_to_the_status_and_heal() {
    let mut world = World::new("attach-errors", true).await;
    let _attacher = world.start_attacher("csi-attacher", &[]);
    let (pv, volume_id) = world.volume("data", None).await;

    // No CSINode for the node yet: the attach waits, saying why.
    let va = world.attach("data", &pv, &[]).await;
    let node = world.node.clone();
    wait_attach_error(&world, &va, (format!(r#"csinode.storage.k8s.io "{node}" not found"#), None)).await;
    world.register_node().await;
    world
        .wait_attachment(&va, "attached, the error gone", |va| {
            va.status.as_ref().is_some_and(|s| s.attached && s.attach_error.is_none())
        })
        .await;

    // The driver's error, with its gRPC code; the VolumeAttachment still carries the finalizer written before the
    // call, so it will be detached before it goes.
    world.set_faults(json!({"ControllerPublishVolume": {"code": "ResourceExhausted", "message": "no slot left"}}));
    let (other_pv, _) = world.volume("other", None).await;
    let other = world.attach("other", &other_pv, &[]).await;
    let expected = "rpc error: code = ResourceExhausted desc = no slot left".to_string();
    let failed = wait_attach_error(&world, &other, (expected, Some(8))).await;
    assert!(!failed.status.as_ref().unwrap().attached);
    assert_eq!(finalizers(&failed).len(), 1);

    // A detach the driver refuses stays, with its error, until the driver agrees.
    world.set_faults(json!({"ControllerUnpublishVolume": {"code": "Internal", "message": "still mounted"}}));
    world.delete_attachment(&va).await;
    let stuck = world
        .wait_attachment(&va, "detachError", |va| va.status.as_ref().is_some_and(|s| s.detach_error.is_some()))
        .await;
    let message = stuck.status.unwrap().detach_error.unwrap().message.unwrap_or_default();
    assert_eq!(message, "rpc error: code = Internal desc = still mounted");
    assert_eq!(world.published_nodes(&volume_id), vec![PLUGIN_NODE_ID.to_string()], "not detached yet");
    world.set_faults(json!({}));
    world.wait_gone(&va).await;
    world.wait_attached(&other).await;
    assert!(world.published_nodes(&volume_id).is_empty());
}

#[tokio::test]
async fn the_publish_secret_is_read_live_and_a_missing_one_is_named() {
    let mut world = World::new("attach-secret", true).await;
    world.register_node().await;
    let _attacher = world.start_attacher("csi-attacher", &[]);
    let (pv, _) = world.volume("data", Some("publish-credentials")).await;
    let va = world.attach("data", &pv, &[]).await;
    let ns = world.ns().to_string();
    let expected =
        format!(r#"failed to load secret "{ns}/publish-credentials": secrets "publish-credentials" not found"#);
    wait_attach_error(&world, &va, (expected, None)).await;

    world.secret("publish-credentials", "password", "s3cr3t-publish-value").await;
    world.wait_attached(&va).await;
    // The value went to the driver (whose log shows it redacted) and nowhere else.
    assert!(world.plugin.log().contains("***stripped***"), "the request carried the secret");
    let attacher_log = world.scenario.path("csi-attacher.log");
    let logged = std::fs::read_to_string(attacher_log).unwrap();
    assert!(!logged.contains("s3cr3t-publish-value") && !world.plugin.log().contains("s3cr3t-publish-value"));
}

#[tokio::test]
async fn a_driver_that_attaches_nothing_gets_its_attachments_marked_attached_without_a_call() {
    let mut world = World::new("attach-trivial", false).await;
    let (_attacher, port) = world.start_attacher("csi-attacher", &[]);
    let (pv, volume_id) = world.volume("data", None).await;
    let va = world.attach("data", &pv, &[]).await;
    let attached = world.wait_attached(&va).await;
    assert!(finalizers(&attached).is_empty(), "nothing to detach, no finalizer");
    let volume = world.pvs().get(&pv).await.unwrap();
    assert!(!volume.metadata.finalizers.unwrap_or_default().iter().any(|f| f.starts_with("external-attacher/")));
    assert_eq!(world.plugin_requests("ControllerPublishVolume", &volume_id), 0, "no call");
    let metrics = http_get(port, "/metrics").await;
    assert!(!metrics.contains("ControllerPublishVolume"), "{metrics}");
    world.delete_attachment(&va).await;
    world.wait_gone(&va).await;
}

#[tokio::test]
async fn an_attach_is_not_queued_behind_a_burst_of_detaches() {
    let mut world = World::new("attach-burst", true).await;
    world.register_node().await;
    // One worker per queue, and every detach held by the driver for a minute.
    let (_attacher, port) = world.start_attacher("csi-attacher", &["--worker-threads=1"]);
    let mut detaching = Vec::new();
    for i in 0..4 {
        let (pv, _) = world.volume(&format!("old-{i}"), None).await;
        let va = world.attach(&format!("old-{i}"), &pv, &[]).await;
        world.wait_attached(&va).await;
        detaching.push(va);
    }
    world.set_faults(json!({"ControllerUnpublishVolume": {"latency_ms": 60000}}));
    for va in &detaching {
        world.delete_attachment(va).await;
    }
    let backlog = wait_for("the detach backlog in /metrics", TIMEOUT, || async {
        let metrics = http_get(port, "/metrics").await;
        let depth = metrics.lines().find(|l| l.starts_with(r#"workqueue_depth{name="csi-attacher-va-detach"}"#))?;
        (depth.rsplit(' ').next()? != "0").then_some(metrics)
    })
    .await;
    assert!(backlog.contains(r#"workqueue_oldest_item_age_seconds{name="csi-attacher-va-detach"}"#), "{backlog}");

    let (pv, _) = world.volume("new", None).await;
    let va = world.attach("new", &pv, &[]).await;
    world.wait_attached(&va).await;
    let attachments = world.attachments();
    let mut still_detaching = 0;
    for old in &detaching {
        still_detaching += usize::from(attachments.get_opt(old).await.unwrap().is_some());
    }
    assert!(still_detaching >= 3, "the attach finished while the detaches still waited ({still_detaching} left)");
    world.set_faults(json!({}));
}

#[tokio::test]
async fn an_in_tree_volume_handed_to_the_driver_is_attached_in_its_csi_form() {
    let mut world = World::for_driver("attach-migrated", "pd.csi.storage.gke.io").await;
    world.register_node().await;
    let (_attacher, port) = world.start_attacher("csi-attacher", &[]);
    let disk = format!("{}-disk", world.ns());
    let pv = world.in_tree_volume("gce", &disk).await;
    let va = world.attach("gce", &pv, &[]).await;
    // The driver is asked for the translated handle (the plugin has no such disk: its answer shows what it got).
    let handle = format!("projects/UNSPECIFIED/zones/UNSPECIFIED/disks/{disk}");
    let expected = format!("rpc error: code = NotFound desc = volume {handle} does not exist");
    wait_attach_error(&world, &va, (expected, Some(5))).await;
    let ours = "external-attacher/pd-csi-storage-gke-io".to_string();
    let volume = world.pvs().get(&pv).await.unwrap();
    assert!(volume.metadata.finalizers.unwrap_or_default().contains(&ours), "the PV's finalizer");
    let metrics = http_get(port, "/metrics").await;
    let publish = r#"method_name="/csi.v1.Controller/ControllerPublishVolume""#;
    let migrated = [publish, r#"grpc_status_code="NotFound""#, r#"migrated="true""#];
    let counted = has_sample(&metrics, "csi_sidecar_operations_seconds_count", &migrated);
    assert!(counted, "calls for an in-tree PV count as migrated:\n{metrics}");

    // No pv.kubernetes.io/migrated-to naming the driver: migration is off for this PV, so once no VolumeAttachment
    // names it the finalizer goes, although the PV stays, and kube-controller-manager can take it back.
    world.delete_attachment(&va).await;
    world.wait_gone(&va).await;
    let pvs = world.pvs();
    eventually("the PV's finalizer gone", TIMEOUT, || async {
        let volume = pvs.get(&pv).await.unwrap();
        !volume.metadata.finalizers.unwrap_or_default().contains(&ours)
    })
    .await;
}
