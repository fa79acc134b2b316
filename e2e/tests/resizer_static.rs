//! csi-resizer against the real control plane and the hostpath plugin, as real processes, with statically
//! provisioned volumes: each test creates the backend volume with csictl, a PV naming it and a claim pre-bound to
//! that PV, then changes the claim and watches the resizer act (the world: csi_sidecars_e2e::worlds::resizer).

use std::collections::BTreeMap;
use std::path::PathBuf;

use csi_sidecars_e2e::http::{free_port, http_get};
use csi_sidecars_e2e::wait::eventually;
use csi_sidecars_e2e::worlds::resizer::{ResizerWorld as World, TIMEOUT};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod, Secret};
use k8s_openapi::api::storage::v1::VolumeAttributesClass;
use kube::Api;
use kube::api::{DeleteParams, ObjectMeta, PostParams};
use serde_json::json;

const GIB: i64 = 1 << 30;

fn storage(claim: &PersistentVolumeClaim) -> Option<String> {
    claim.status.as_ref()?.capacity.as_ref()?.get("storage").map(|q| q.0.clone())
}

async fn volume_capacity(pvs: &Api<PersistentVolume>, claim: &PersistentVolumeClaim) -> Option<String> {
    let name = claim.spec.as_ref()?.volume_name.clone()?;
    let pv = pvs.get(&name).await.ok()?;
    pv.spec?.capacity?.get("storage").map(|q| q.0.clone())
}

/// Waits until the claim's `status.capacity` is `size`; `why` says what the wait is for.
async fn wait_for_storage(world: &World, claim: &str, size: &str, why: &str) {
    let claims = world.claims();
    eventually(why, TIMEOUT, || async {
        claims.get(claim).await.ok().is_some_and(|c| storage(&c).as_deref() == Some(size))
    })
    .await;
}

fn condition(claim: &PersistentVolumeClaim, type_: &str) -> Option<String> {
    let conditions = claim.status.as_ref()?.conditions.as_ref()?;
    conditions.iter().find(|c| c.type_ == type_).map(|c| c.status.clone())
}

#[tokio::test]
async fn expands_a_block_claim_and_a_filesystem_claim() {
    let mut world = World::new("rsz-expand", &[]).await;
    let block_id = world.bound_claim("block", true, None).await;
    let fs_id = world.bound_claim("fs", false, None).await;
    let lease_namespace = format!("--leader-election-namespace={}", world.ns());
    let _resizer = world.start_resizer("csi-resizer", &["--leader-election", &lease_namespace]);
    let lease = format!("external-resizer-{}", world.driver.replace('.', "-"));
    let leases: Api<Lease> = Api::namespaced(world.client.clone(), world.ns());
    eventually(&format!("Lease {lease} held"), TIMEOUT, || async {
        leases.get_opt(&lease).await.ok().flatten().and_then(|l| l.spec?.holder_identity).is_some()
    })
    .await;

    for claim in ["block", "fs"] {
        world.patch_claim(claim, json!({"spec": {"resources": {"requests": {"storage": "2Gi"}}}})).await;
    }

    // Block: the driver needs no node step, so the claim's capacity is updated at once.
    let claims = world.claims();
    let pvs = world.pvs();
    eventually("block claim and PV at 2Gi", TIMEOUT, || async {
        let Ok(claim) = claims.get("block").await else { return false };
        storage(&claim).as_deref() == Some("2Gi") && volume_capacity(&pvs, &claim).await.as_deref() == Some("2Gi")
    })
    .await;
    let block = world.claim("block").await;
    let status = block.status.clone().unwrap();
    assert!(!status.allocated_resource_statuses.unwrap_or_default().contains_key("storage"));
    assert_eq!(status.allocated_resources.unwrap()["storage"].0, "2Gi");
    assert_eq!(block.metadata.annotations.unwrap()["volume.kubernetes.io/node-expansion-not-required"], "true");
    assert_eq!(world.backend_volume(&block_id)["capacity_bytes"], 2 * GIB);
    world.wait_for_event("block", "VolumeResizeSuccessful", "Resize volume succeeded").await;
    let (_, component) = world.events("block", "Resizing").await.into_iter().next().expect("Resizing event");
    assert_eq!(component, format!("external-resizer {}", world.driver));

    // Filesystem: the controller step is done, the node step remains.
    eventually("filesystem claim waits for the node, PV at 2Gi", TIMEOUT, || async {
        let Ok(claim) = claims.get("fs").await else { return false };
        condition(&claim, "FileSystemResizePending").as_deref() == Some("True")
            && volume_capacity(&pvs, &claim).await.as_deref() == Some("2Gi")
    })
    .await;
    let fs = world.claim("fs").await;
    assert_eq!(storage(&fs).as_deref(), Some("1Gi"), "kubelet has not finished");
    let status = fs.status.unwrap();
    assert_eq!(status.allocated_resource_statuses.unwrap()["storage"], "NodeResizePending");
    let pv = world.pvs().get(fs.spec.unwrap().volume_name.as_deref().unwrap()).await.unwrap();
    assert_eq!(pv.metadata.annotations.unwrap()["volume.alpha.kubernetes.io/pre-resize-capacity"], "1Gi");
    assert_eq!(world.backend_volume(&fs_id)["capacity_bytes"], 2 * GIB);
    world.wait_for_event("fs", "FileSystemResizeRequired", "Require file system resize").await;
}

#[tokio::test]
async fn modifies_silver_to_gold() {
    let mut world = World::new("rsz-modify", &[]).await;
    let silver = world.create_attribute_class("silver", &[("iops", "1000")]).await;
    let gold = world.create_attribute_class("gold", &[("iops", "5000"), ("throughput", "50MiB/s")]).await;
    let _resizer = world.start_resizer("csi-resizer", &[]);
    let volume_id = world.bound_claim("data", false, Some(&silver)).await;

    world.set_attribute_class("data", &gold).await;
    world.wait_for_current_class("data", &gold).await;
    assert_eq!(world.backend_parameter(&volume_id, "iops").as_deref(), Some("5000"));
    assert_eq!(world.backend_parameter(&volume_id, "throughput").as_deref(), Some("50MiB/s"));
    let claim = world.claim("data").await;
    let pv = world.pvs().get(claim.spec.unwrap().volume_name.as_deref().unwrap()).await.unwrap();
    assert_eq!(pv.spec.unwrap().volume_attributes_class_name.as_deref(), Some(gold.as_str()));
    let conditions = claim.status.unwrap().conditions.unwrap_or_default();
    assert!(!conditions.iter().any(|c| c.type_ == "ModifyingVolume" || c.type_ == "ModifyVolumeError"));
    world.wait_for_event("data", "VolumeModify", &gold).await;
    world.wait_for_event("data", "VolumeModifySuccessful", &gold).await;
}

#[tokio::test]
async fn expansion_and_modification_of_one_claim_both_finish() {
    let mut world = World::new("rsz-both", &[]).await;
    let silver = world.create_attribute_class("silver", &[("iops", "1000")]).await;
    let gold = world.create_attribute_class("gold", &[("iops", "5000")]).await;
    let _resizer = world.start_resizer("csi-resizer", &[]);
    let volume_id = world.bound_claim("data", true, Some(&silver)).await;

    // One edit asks for both; the claim's single queue key runs them one after the other.
    let patch = json!({"spec": {"volumeAttributesClassName": gold, "resources": {"requests": {"storage": "2Gi"}}}});
    world.patch_claim("data", patch).await;
    world.wait_for_current_class("data", &gold).await;
    wait_for_storage(&world, "data", "2Gi", "claim at 2Gi").await;
    let backend = world.backend_volume(&volume_id);
    assert_eq!(backend["capacity_bytes"], 2 * GIB);
    assert_eq!(backend["volume_context"]["hostpath.csi.k8s.io/iops"], "5000");
}

#[tokio::test]
async fn an_unknown_parameter_is_infeasible_and_going_back_clears_it() {
    let mut world = World::new("rsz-infeasible", &[]).await;
    let silver = world.create_attribute_class("silver", &[("iops", "1000")]).await;
    let bad = world.create_attribute_class("bad", &[("colour", "blue")]).await;
    let port = free_port();
    let endpoint = format!("--http-endpoint=127.0.0.1:{port}");
    // A slow-set period longer than the test: the refused modification is not tried again, so the counts are exact.
    let _resizer = world.start_resizer("csi-resizer", &[&endpoint, "--retry-interval-max=2m"]);
    let volume_id = world.bound_claim("data", true, Some(&silver)).await;

    world.set_attribute_class("data", &bad).await;
    world.wait_for_modify_status("data", Some(&bad), "Infeasible").await;
    let claim = world.claim("data").await;
    let status = claim.status.unwrap();
    assert_eq!(status.current_volume_attributes_class_name.as_deref(), Some(silver.as_str()), "old class current");
    let error = status.conditions.unwrap_or_default().into_iter().find(|c| c.type_ == "ModifyVolumeError");
    assert_eq!(error.and_then(|c| c.reason).as_deref(), Some("InvalidArgument"));
    world.wait_for_event("data", "VolumeModifyFailed", "InvalidArgument").await;

    world.set_attribute_class("data", &silver).await;
    world.wait_for_current_class("data", &silver).await;
    let conditions = world.claim("data").await.status.unwrap().conditions.unwrap_or_default();
    assert!(!conditions.iter().any(|c| c.type_ == "ModifyVolumeError"), "{conditions:?}");
    assert_eq!(world.backend_parameter(&volume_id, "iops").as_deref(), Some("1000"));

    // One refused ControllerModifyVolume (to bad), one good (back to silver); no expansion.
    let metrics = http_get(port, "/metrics").await;
    for sample in [
        "\ncontroller_modify_volume_total 2\n",
        "\ncontroller_modify_volume_errors_total 1\n",
        "\ncontroller_expand_volume_total 0\n",
        "\ncontroller_expand_volume_errors_total 0\n",
    ] {
        assert!(metrics.contains(sample), "missing {sample:?} in /metrics:\n{metrics}");
    }
}

#[tokio::test]
async fn a_missing_class_is_pending_until_it_is_created() {
    let mut world = World::new("rsz-pending", &[]).await;
    let silver = world.create_attribute_class("silver", &[("iops", "1000")]).await;
    let _resizer = world.start_resizer("csi-resizer", &[]);
    let volume_id = world.bound_claim("data", false, Some(&silver)).await;

    let late = format!("{}-late", world.ns());
    world.set_attribute_class("data", &late).await;
    world.wait_for_modify_status("data", None, "Pending").await;
    world.wait_for_event("data", "VolumeModifyFailed", &late).await;
    assert_eq!(
        world.claim("data").await.status.unwrap().current_volume_attributes_class_name.as_deref(),
        Some(silver.as_str())
    );

    // The same sidecar picks the claim up as soon as the class exists (no restart, no spec change).
    world.create_attribute_class("late", &[("iops", "7000")]).await;
    world.wait_for_current_class("data", &late).await;
    assert_eq!(world.backend_parameter(&volume_id, "iops").as_deref(), Some("7000"));
}

#[tokio::test]
async fn a_deadline_exceeded_modification_is_retried_to_success() {
    let faults = tempfile_path("rsz-deadline");
    std::fs::write(
        &faults,
        r#"{"ControllerModifyVolume": {"code": "DeadlineExceeded", "probability": 1.0, "times": 1}}"#,
    )
    .unwrap();
    let fault_flag = format!("--fault-config={}", faults.display());
    let mut world = World::new("rsz-deadline", &[&fault_flag]).await;
    let silver = world.create_attribute_class("silver", &[("iops", "1000")]).await;
    let gold = world.create_attribute_class("gold", &[("iops", "5000")]).await;
    let volume_id = world.bound_claim("data", false, Some(&silver)).await;
    let port = free_port();
    let http = format!("--http-endpoint=127.0.0.1:{port}");
    let _resizer = world.start_resizer("csi-resizer", &[&http]);

    world.set_attribute_class("data", &gold).await;
    world.wait_for_event("data", "VolumeModifyFailed", "DeadlineExceeded").await;
    world.wait_for_current_class("data", &gold).await;
    assert_eq!(world.backend_parameter(&volume_id, "iops").as_deref(), Some("5000"));
    let claim = world.claim("data").await;
    let conditions = claim.status.unwrap().conditions.unwrap_or_default();
    assert!(!conditions.iter().any(|c| c.type_ == "ModifyVolumeError"), "cleared on success: {conditions:?}");

    // The KEP's counters: two attempts, one failed.
    let metrics = http_get(port, "/metrics").await;
    assert!(metrics.contains("controller_modify_volume_total 2"), "{metrics}");
    assert!(metrics.contains("controller_modify_volume_errors_total 1"), "{metrics}");
    let _ = std::fs::remove_file(&faults);
}

#[tokio::test]
async fn a_resizer_killed_mid_modification_resumes_the_same_target() {
    let faults = tempfile_path("rsz-kill");
    let fault_flag = format!("--fault-config={}", faults.display());
    let mut world = World::new("rsz-kill", &[&fault_flag]).await;
    let silver = world.create_attribute_class("silver", &[("iops", "1000")]).await;
    let gold = world.create_attribute_class("gold", &[("iops", "5000")]).await;
    let volume_id = world.bound_claim("data", false, Some(&silver)).await;

    // The driver holds the call long enough to kill the sidecar in the middle of it.
    std::fs::write(&faults, r#"{"ControllerModifyVolume": {"latency_ms": 120000, "times": 1}}"#).unwrap();
    let mut first = world.start_resizer("csi-resizer-1", &["--timeout=300s"]);
    world.set_attribute_class("data", &gold).await;
    world.wait_for_modify_status("data", Some(&gold), "InProgress").await;
    eventually("the first sidecar is in the driver call", TIMEOUT, || async {
        first.log().contains("modifying volume")
    })
    .await;
    first.kill9();

    // While no sidecar runs, the user goes back to silver; the driver is fast again.
    std::fs::write(&faults, "{}").unwrap();
    world.set_attribute_class("data", &silver).await;
    let _second = world.start_resizer("csi-resizer-2", &[]);

    // The locked target (gold) is finished first, then silver is applied as a new modification.
    world.wait_for_event("data", "VolumeModifySuccessful", &format!("vac {gold} ")).await;
    world.wait_for_current_class("data", &silver).await;
    world.wait_for_event("data", "VolumeModifySuccessful", &format!("vac {silver} ")).await;
    assert_eq!(world.backend_parameter(&volume_id, "iops").as_deref(), Some("1000"));
    let _ = std::fs::remove_file(&faults);
}

#[tokio::test]
async fn a_class_of_another_driver_is_infeasible() {
    let mut world = World::new("rsz-otherdriver", &[]).await;
    let silver = world.create_attribute_class("silver", &[("iops", "1000")]).await;
    let foreign = format!("{}-foreign", world.ns());
    let class = VolumeAttributesClass {
        metadata: ObjectMeta { name: Some(foreign.clone()), ..Default::default() },
        driver_name: "other.csi.e2e".into(),
        parameters: Some(BTreeMap::from([("iops".to_string(), "9000".to_string())])),
    };
    Api::<VolumeAttributesClass>::all(world.client.clone()).create(&PostParams::default(), &class).await.unwrap();
    world.attribute_classes.push(foreign.clone());
    let _resizer = world.start_resizer("csi-resizer", &[]);
    let volume_id = world.bound_claim("data", false, Some(&silver)).await;

    world.set_attribute_class("data", &foreign).await;
    world.wait_for_modify_status("data", Some(&foreign), "Infeasible").await;
    world.wait_for_event("data", "VolumeModifyFailed", "other.csi.e2e").await;
    let (message, _) = world.events("data", "VolumeModifyFailed").await.into_iter().next().unwrap();
    assert!(message.contains(&world.driver), "names both drivers: {message}");
    assert_eq!(world.backend_parameter(&volume_id, "iops"), None, "the driver was never called");
}

#[tokio::test]
async fn an_offline_only_expansion_waits_until_no_pod_uses_the_claim() {
    let faults = tempfile_path("rsz-inuse");
    std::fs::write(&faults, r#"{"ControllerExpandVolume": {"code": "FailedPrecondition", "times": 1}}"#).unwrap();
    let fault_flag = format!("--fault-config={}", faults.display());
    let mut world = World::new("rsz-inuse", &[&fault_flag]).await;
    let volume_id = world.bound_claim("data", true, None).await;
    let pods: Api<Pod> = Api::namespaced(world.client.clone(), world.ns());
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "user"},
        "spec": {
            "automountServiceAccountToken": false,
            "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
        }
    }))
    .unwrap();
    let create_pod = || async { pods.create(&PostParams::default(), &pod).await.is_ok() };
    eventually("pod created (the namespace's service account may lag)", TIMEOUT, create_pod).await;
    let _resizer = world.start_resizer("csi-resizer", &[]);

    world.patch_claim("data", json!({"spec": {"resources": {"requests": {"storage": "2Gi"}}}})).await;
    world.wait_for_event("data", "VolumeResizeFailed", "FailedPrecondition").await;
    world.wait_for_event("data", "VolumeResizeFailed", "volume is currently in-use").await;
    assert_eq!(storage(&world.claim("data").await).as_deref(), Some("1Gi"));
    assert_eq!(world.backend_volume(&volume_id)["capacity_bytes"], GIB);

    pods.delete("user", &DeleteParams::default().grace_period(0)).await.unwrap();
    wait_for_storage(&world, "data", "2Gi", "claim at 2Gi once the pod is gone").await;
    assert_eq!(world.backend_volume(&volume_id)["capacity_bytes"], 2 * GIB);
    let _ = std::fs::remove_file(&faults);
}

#[tokio::test]
async fn the_expand_secret_is_read_live_and_never_logged() {
    let mut world = World::new("rsz-secret", &[]).await;
    world.expand_secret = Some("expand-secret".into());
    let volume_id = world.bound_claim("data", true, None).await;
    let resizer = world.start_resizer("csi-resizer", &["-v=6"]);

    world.patch_claim("data", json!({"spec": {"resources": {"requests": {"storage": "2Gi"}}}})).await;
    world.wait_for_event("data", "VolumeResizeFailed", "error getting secret expand-secret").await;
    // Upstream's wording, one line naming the Secret: not a dump of the API server's answer.
    let messages: Vec<String> = world.events("data", "VolumeResizeFailed").await.into_iter().map(|(m, _)| m).collect();
    let expected =
        format!("error getting secret expand-secret in namespace {}: secrets \"expand-secret\" not found", world.ns());
    assert!(
        messages.iter().any(|m| m.ends_with(&expected) && m.len() < 300 && !m.contains('\n')),
        "no one-line event ending in {expected:?}: {messages:?}"
    );
    assert_eq!(world.backend_volume(&volume_id)["capacity_bytes"], GIB, "the driver was not called");

    // Created after the failure: the next attempt reads it (no cache, no restart).
    let secret = Secret {
        metadata: ObjectMeta { name: Some("expand-secret".into()), ..Default::default() },
        string_data: Some(BTreeMap::from([("password".to_string(), "s3cr3t-expand-value".to_string())])),
        ..Default::default()
    };
    Api::<Secret>::namespaced(world.client.clone(), world.ns()).create(&PostParams::default(), &secret).await.unwrap();
    wait_for_storage(&world, "data", "2Gi", "claim at 2Gi once the secret exists").await;
    assert_eq!(world.backend_volume(&volume_id)["capacity_bytes"], 2 * GIB);
    let log = resizer.log();
    assert!(log.contains("ControllerExpandVolume"), "the call is logged at -v=6");
    assert!(!log.contains("s3cr3t-expand-value"), "a secret value was logged");
}

/// `--resize-timeout` bounds each ControllerExpandVolume (external-resizer v2.3.0): a call the driver holds longer
/// fails with DeadlineExceeded and is retried; the retry, answered at once, expands the volume.
#[tokio::test]
async fn resize_timeout_bounds_each_expansion_call() {
    let faults = tempfile_path("rsz-resize-timeout");
    std::fs::write(&faults, r#"{"ControllerExpandVolume": {"latency_ms": 4000, "times": 1}}"#).unwrap();
    let fault_flag = format!("--fault-config={}", faults.display());
    let mut world = World::new("rsz-resize-timeout", &[&fault_flag]).await;
    let volume_id = world.bound_claim("data", true, None).await;
    let _resizer = world.start_resizer("csi-resizer", &["--resize-timeout=1s"]);

    world.patch_claim("data", json!({"spec": {"resources": {"requests": {"storage": "2Gi"}}}})).await;
    world.wait_for_event("data", "VolumeResizeFailed", "DeadlineExceeded").await;
    wait_for_storage(&world, "data", "2Gi", "claim at 2Gi after the retry").await;
    assert_eq!(world.backend_volume(&volume_id)["capacity_bytes"], 2 * GIB);
    let _ = std::fs::remove_file(&faults);
}

/// `--timeout` given on the command line is every call's limit, whatever `--modify-timeout` says (external-resizer
/// cmd/csi-resizer/main.go, resolveOperationTimeouts): a modification the driver answers after 3 s passes at the
/// first attempt under `--modify-timeout=1s --timeout=30s`.
#[tokio::test]
async fn an_explicit_timeout_overrides_the_modify_timeout() {
    let faults = tempfile_path("rsz-modify-timeout");
    std::fs::write(&faults, r#"{"ControllerModifyVolume": {"latency_ms": 3000, "times": 1}}"#).unwrap();
    let fault_flag = format!("--fault-config={}", faults.display());
    let mut world = World::new("rsz-modify-timeout", &[&fault_flag]).await;
    let silver = world.create_attribute_class("silver", &[("iops", "1000")]).await;
    let gold = world.create_attribute_class("gold", &[("iops", "5000")]).await;
    let volume_id = world.bound_claim("data", false, Some(&silver)).await;
    let _resizer = world.start_resizer("csi-resizer", &["--modify-timeout=1s", "--timeout=30s"]);

    world.set_attribute_class("data", &gold).await;
    world.wait_for_current_class("data", &gold).await;
    assert_eq!(world.backend_parameter(&volume_id, "iops").as_deref(), Some("5000"));
    let failures = world.events("data", "VolumeModifyFailed").await;
    assert!(failures.is_empty(), "the slow call was not cut off at --modify-timeout: {failures:?}");
    let _ = std::fs::remove_file(&faults);
}

/// A fault file path outside the scenario (it must exist before the plugin starts).
fn tempfile_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("{name}-{}-faults.json", std::process::id()))
}
