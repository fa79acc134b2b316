//! csi-provisioner against the real control plane and the hostpath plugin, as real processes.

use std::collections::BTreeMap;
use std::time::Duration;

use csi_sidecars_e2e::http::{free_port, http_get};
use csi_sidecars_e2e::processes::scenario::binary;
use csi_sidecars_e2e::wait::eventually;
use csi_sidecars_e2e::worlds::provisioner::{
    PLUGIN_NODE, PROVISIONING_FINALIZER, PV_FINALIZER, ProvisionerWorld as World, TIMEOUT, TOPOLOGY_KEY, claim,
    has_finalizer, plugin_volume_contexts, plugin_volume_rows,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, TypedLocalObjectReference};
use k8s_openapi::api::storage::v1::VolumeAttributesClass;
use kube::Api;
use kube::api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};

#[tokio::test]
async fn provisioner_creates_and_deletes_a_filesystem_volume_with_secrets() {
    let mut world = World::new("prov-fs", &[]).await;
    let secret_value = format!("s3cr3t-{}", world.ns());
    let class = world
        .class(
            "fs",
            &[
                ("csi.storage.k8s.io/provisioner-secret-name", "${pvc.name}-creds"),
                ("csi.storage.k8s.io/provisioner-secret-namespace", "${pvc.namespace}"),
                ("csi.storage.k8s.io/fstype", "ext4"),
                ("color", "blue"),
            ],
            "Delete",
        )
        .await;
    world.secret("data-creds", "password", &secret_value).await;
    let mut provisioner = world.start_provisioner("csi-provisioner", &["-v=10"]);

    world.claim("data", &class, None, "ReadWriteOnce").await;
    let volume_name = world.bound("data").await;

    let claim = world.claims().get("data").await.unwrap();
    assert_eq!(volume_name, format!("pvc-{}", claim.metadata.uid.as_deref().unwrap()));
    eventually("the provisioning finalizer is released", TIMEOUT, || async {
        !has_finalizer(&world.claims().get("data").await.unwrap().metadata, PROVISIONING_FINALIZER)
    })
    .await;
    let pv = world.volumes().get(&volume_name).await.unwrap();
    assert!(has_finalizer(&pv.metadata, PV_FINALIZER));
    let annotations = pv.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(annotations.get("pv.kubernetes.io/provisioned-by"), Some(&world.driver));
    assert_eq!(
        annotations.get("volume.kubernetes.io/provisioner-deletion-secret-name").map(String::as_str),
        Some("data-creds")
    );
    assert_eq!(
        annotations.get("volume.kubernetes.io/provisioner-deletion-secret-namespace").map(String::as_str),
        Some(world.ns())
    );
    let spec = pv.spec.clone().unwrap();
    let csi = spec.csi.clone().unwrap();
    assert_eq!(csi.driver, world.driver);
    assert_eq!(csi.fs_type.as_deref(), Some("ext4"));
    assert_eq!(spec.persistent_volume_reclaim_policy.as_deref(), Some("Delete"));
    assert_eq!(spec.storage_class_name.as_deref(), Some(class.as_str()));
    assert!(csi.volume_attributes.unwrap_or_default().contains_key("storage.kubernetes.io/csiProvisionerIdentity"));
    assert_eq!(world.plugin_volumes(), vec![csi.volume_handle.clone()]);
    world
        .event(
            "data",
            "Provisioning",
            &format!("External provisioner is provisioning volume for claim \"{}/data\"", world.ns()),
        )
        .await;
    world.event("data", "ProvisioningSucceeded", &format!("Successfully provisioned volume {volume_name}")).await;

    world.claims().delete("data", &DeleteParams::default()).await.unwrap();
    eventually("the PV is deleted", TIMEOUT, || async {
        world.volumes().get_opt(&volume_name).await.unwrap().is_none()
    })
    .await;
    world.no_plugin_volumes_left().await;

    let log = provisioner.log();
    assert!(log.contains("CreateVolume"), "the log at -v=10 shows the CSI calls");
    assert!(!log.contains(&secret_value), "the secret value appears in the provisioner log");
    assert_eq!(provisioner.exited(), None, "the provisioner is still running");
}

#[tokio::test]
async fn provisioner_creates_a_block_volume_for_a_read_write_once_pod_claim() {
    let mut world = World::new("prov-block", &[]).await;
    let class = world.class("block", &[], "Delete").await;
    let _provisioner = world.start_provisioner("csi-provisioner", &["--extra-create-metadata"]);

    world.claim("raw", &class, Some("Block"), "ReadWriteOncePod").await;
    let volume_name = world.bound("raw").await;
    let pv = world.volumes().get(&volume_name).await.unwrap();
    let spec = pv.spec.unwrap();
    assert_eq!(spec.volume_mode.as_deref(), Some("Block"));
    assert_eq!(spec.access_modes, Some(vec!["ReadWriteOncePod".to_string()]));
    let csi = spec.csi.unwrap();
    assert_eq!(csi.fs_type, None, "no fsType on a block volume");
    // --extra-create-metadata: the driver was told the claim and PV names (and echoed them as volume context).
    let attributes = csi.volume_attributes.unwrap_or_default();
    assert_eq!(attributes.get("csi.storage.k8s.io/pvc/name").map(String::as_str), Some("raw"));
    assert_eq!(attributes.get("csi.storage.k8s.io/pvc/namespace").map(String::as_str), Some(world.ns()));
    assert_eq!(attributes.get("csi.storage.k8s.io/pv/name"), Some(&volume_name));
    // The plugin's node topology became the PV's node affinity.
    let affinity = serde_json::to_string(&spec.node_affinity).unwrap();
    assert!(affinity.contains("topology.hostpath.csi/node"), "{affinity}");
    // The plugin advertises SINGLE_NODE_MULTI_WRITER, so ReadWriteOncePod reached it as SINGLE_NODE_SINGLE_WRITER.
    assert_eq!(created_access_modes(&world), ["SINGLE_NODE_SINGLE_WRITER"]);

    world.claims().delete("raw", &DeleteParams::default()).await.unwrap();
    world.no_plugin_volumes_left().await;
}

#[tokio::test]
async fn provisioner_asks_an_older_driver_for_single_node_writer_for_a_read_write_once_pod_claim() {
    let mut world = World::new("prov-rwop-old", &["--no-single-node-multi-writer"]).await;
    let class = world.class("rwop", &[], "Delete").await;
    let _provisioner = world.start_provisioner("csi-provisioner", &[]);

    world.claim("only-one", &class, None, "ReadWriteOncePod").await;
    world.bound("only-one").await;
    // Without SINGLE_NODE_MULTI_WRITER the driver knows no SINGLE_NODE_SINGLE_WRITER (the plugin would refuse it).
    assert_eq!(created_access_modes(&world), ["SINGLE_NODE_WRITER"]);
}

/// The access modes the plugin's one volume was created with, as it recorded them.
fn created_access_modes(world: &World) -> Vec<String> {
    let contexts = plugin_volume_contexts(&world.socket);
    assert_eq!(contexts.len(), 1, "{contexts:?}");
    let modes = contexts[0]["hostpath.csi.k8s.io/created-access-modes"].as_str().unwrap_or_default();
    modes.split(',').map(str::to_string).collect()
}

#[tokio::test]
async fn provisioner_keeps_retained_volumes() {
    let mut world = World::new("prov-retain", &[]).await;
    let class = world.class("retain", &[], "Retain").await;
    let _provisioner = world.start_provisioner("csi-provisioner", &[]);

    world.claim("keep", &class, None, "ReadWriteOnce").await;
    let volume_name = world.bound("keep").await;
    world.claims().delete("keep", &DeleteParams::default()).await.unwrap();
    eventually("the PV is Released", TIMEOUT, || async {
        let pv = world.volumes().get(&volume_name).await.unwrap();
        pv.status.and_then(|s| s.phase).as_deref() == Some("Released")
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let pv = world.volumes().get(&volume_name).await.unwrap();
    assert!(pv.metadata.deletion_timestamp.is_none(), "a retained PV is not deleted");
    assert!(!has_finalizer(&pv.metadata, PV_FINALIZER), "no deletion finalizer on a retained PV");
    assert_eq!(world.plugin_volumes().len(), 1, "the retained volume stays in the plugin");
}

#[tokio::test]
async fn provisioner_reports_bad_classes_and_missing_secrets_without_stalling_others() {
    let mut world = World::new("prov-errors", &[]).await;
    let unknown_key = world.class("unknown", &[("csi.storage.k8s.io/no-such-key", "x")], "Delete").await;
    let no_secret = world
        .class(
            "nosecret",
            &[
                ("csi.storage.k8s.io/provisioner-secret-name", "missing"),
                ("csi.storage.k8s.io/provisioner-secret-namespace", "${pvc.namespace}"),
            ],
            "Delete",
        )
        .await;
    let good = world.class("good", &[], "Delete").await;
    let _provisioner = world.start_provisioner("csi-provisioner", &[]);

    world.claim("bad-key", &unknown_key, None, "ReadWriteOnce").await;
    world.claim("no-secret", &no_secret, None, "ReadWriteOnce").await;
    world.claim("fine", &good, None, "ReadWriteOnce").await;

    world.bound("fine").await;
    world
        .event("bad-key", "ProvisioningFailed", "found unknown parameter key \"csi.storage.k8s.io/no-such-key\"")
        .await;
    world.event("no-secret", "ProvisioningFailed", "error getting secret missing in namespace").await;
    for name in ["bad-key", "no-secret"] {
        let claim = world.claims().get(name).await.unwrap();
        assert_eq!(claim.status.and_then(|s| s.phase).as_deref(), Some("Pending"), "{name}");
        assert!(!has_finalizer(&claim.metadata, PROVISIONING_FINALIZER), "{name}: no call was made");
    }
    assert_eq!(world.plugin_volumes().len(), 1, "only the good claim got a volume");

    // Retried with backoff: providing the secret lets the claim through.
    world.secret("missing", "password", "x").await;
    world.bound("no-secret").await;
}

#[tokio::test]
async fn provisioner_crash_between_create_volume_and_pv_leaks_nothing() {
    let faults = tempfile::NamedTempFile::new().unwrap();
    let fault_path = faults.path().to_path_buf();
    // Every CreateVolume creates the volume, then answers as if the response were lost.
    std::fs::write(&fault_path, r#"{"CreateVolume": {"code": "DeadlineExceeded", "after_work": true}}"#).unwrap();
    let fault_flag = format!("--fault-config={}", fault_path.display());
    let mut world = World::new("prov-crash", &[fault_flag.as_str()]).await;
    let class = world.class("crash", &[], "Delete").await;
    let mut provisioner = world.start_provisioner("csi-provisioner", &[]);

    world.claim("doomed", &class, None, "ReadWriteOnce").await;
    eventually("the driver created the volume", TIMEOUT, || async { world.plugin_volumes().len() == 1 }).await;
    let claim = world.claims().get("doomed").await.unwrap();
    let uid = claim.metadata.uid.clone().unwrap();
    let entry = world.journal().await.remove(&uid).expect("in-flight provisioning is recorded in the journal");
    assert_eq!((entry["namespace"].as_str(), entry["name"].as_str()), (Some(world.ns()), Some("doomed")));
    assert!(!has_finalizer(&claim.metadata, PROVISIONING_FINALIZER), "the journal, not a finalizer, protects it");
    assert!(claim.spec.unwrap().volume_name.is_none());

    // Crash before the PV is written, then the user gives up on the claim: nothing holds it back any more.
    provisioner.kill9();
    world.claims().delete("doomed", &DeleteParams::default()).await.unwrap();
    eventually("the claim is gone", TIMEOUT, || async { world.claims().get_opt("doomed").await.unwrap().is_none() })
        .await;
    assert_eq!(world.plugin_volumes().len(), 1, "the volume waits for the restart");

    std::fs::write(&fault_path, "{}").unwrap();
    let _restarted = world.start_provisioner("csi-provisioner-restarted", &[]);
    world.no_plugin_volumes_left().await;
    eventually("the journal entry is gone", TIMEOUT, || async { world.journal().await.is_empty() }).await;
    let pvs = world.volumes().list(&ListParams::default()).await.unwrap();
    let leftover = pvs
        .items
        .iter()
        .any(|pv| pv.spec.as_ref().and_then(|s| s.csi.as_ref()).is_some_and(|csi| csi.driver == world.driver));
    assert!(!leftover, "no PV was written for the deleted claim");
}

/// Found by `make chaos`: the cleanup of a deleted claim whose volume id was never recorded repeats CreateVolume to
/// learn it, and took RESOURCE_EXHAUSTED (out of room or throttled for a moment) for "the driver has no volume":
/// it forgot the claim, and the volume made by the first call leaked.
#[tokio::test]
async fn cleanup_after_resource_exhausted_still_deletes_the_volume() {
    let faults = tempfile::NamedTempFile::new().unwrap();
    let fault_path = faults.path().to_path_buf();
    std::fs::write(&fault_path, r#"{"CreateVolume": {"code": "DeadlineExceeded", "after_work": true}}"#).unwrap();
    let fault_flag = format!("--fault-config={}", fault_path.display());
    let mut world = World::new("prov-exhausted", &[fault_flag.as_str()]).await;
    let class = world.class("exhausted", &[], "Delete").await;
    let mut provisioner = world.start_provisioner("csi-provisioner", &[]);
    world.claim("doomed", &class, None, "ReadWriteOnce").await;
    eventually("the driver created the volume", TIMEOUT, || async { world.plugin_volumes().len() == 1 }).await;
    provisioner.kill9();
    world.claims().delete("doomed", &DeleteParams::default()).await.unwrap();
    eventually("the claim is gone", TIMEOUT, || async { world.claims().get_opt("doomed").await.unwrap().is_none() })
        .await;

    // The restarted provisioner's CreateVolume, repeated to learn the volume id, is answered RESOURCE_EXHAUSTED.
    std::fs::write(&fault_path, r#"{"CreateVolume": {"code": "ResourceExhausted"}}"#).unwrap();
    let _restarted = world.start_provisioner("csi-provisioner-restarted", &[]);
    let exhausted = "injected fault instead of the work method=\"CreateVolume\" code=ResourceExhausted";
    eventually("the cleanup met RESOURCE_EXHAUSTED", TIMEOUT, || async { world.plugin.log().contains(exhausted) })
        .await;
    std::fs::write(&fault_path, "{}").unwrap();
    world.no_plugin_volumes_left().await;
    eventually("the journal entry is gone", TIMEOUT, || async { world.journal().await.is_empty() }).await;
}

#[tokio::test]
async fn provisioner_replicas_elect_one_leader() {
    let mut world = World::new("prov-ha", &[]).await;
    let class = world.class("ha", &[], "Delete").await;
    let ns = world.ns().to_string();
    let election = [
        "--leader-election".to_string(),
        format!("--leader-election-namespace={ns}"),
        "--leader-election-lease-duration=6s".to_string(),
        "--leader-election-renew-deadline=4s".to_string(),
        "--leader-election-retry-period=1s".to_string(),
    ];
    let election: Vec<&str> = election.iter().map(String::as_str).collect();
    let args = world.provisioner_args(&election);
    let mut first =
        world.scenario.start_with_env("replica-a", &binary("csi-provisioner"), &args, &[("POD_NAME", "replica-a")]);
    let leases: Api<Lease> = Api::namespaced(world.client.clone(), &ns);
    // The Lease is named after the driver, as upstream names it.
    let lease_name = world.driver.replace('.', "-");
    let holder = || async {
        leases.get_opt(&lease_name).await.ok().flatten().and_then(|l| l.spec?.holder_identity).unwrap_or_default()
    };
    eventually("replica-a leads", TIMEOUT, || async { holder().await == "replica-a" }).await;
    let _second =
        world.scenario.start_with_env("replica-b", &binary("csi-provisioner"), &args, &[("POD_NAME", "replica-b")]);

    world.claim("one", &class, None, "ReadWriteOnce").await;
    world.bound("one").await;
    assert_eq!(holder().await, "replica-a");

    first.kill9();
    eventually("replica-b takes over", TIMEOUT, || async { holder().await == "replica-b" }).await;
    world.claim("two", &class, None, "ReadWriteOnce").await;
    world.bound("two").await;
    assert_eq!(world.plugin_volumes().len(), 2, "each claim got exactly one volume");
}

#[tokio::test]
async fn provisioner_waits_for_the_selected_node_and_uses_its_topology() {
    let mut world = World::new("prov-wffc", &[]).await;
    let node = world.node("node").await;
    let class = world.class_with_binding("late", &[], "Delete", "WaitForFirstConsumer").await;
    // Topology for late binding does not depend on --immediate-topology: the default flags apply.
    let args = world.provisioner_args(&["--immediate-topology=true", "--strict-topology"]);
    let _provisioner = world.scenario.start("csi-provisioner", &binary("csi-provisioner"), &args);

    let mut pending = claim("late", &class, None, "ReadWriteOnce");
    world.claim_object(pending.clone()).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let waiting = world.claims().get("late").await.unwrap();
    assert_eq!(waiting.status.and_then(|s| s.phase).as_deref(), Some("Pending"));
    assert!(world.plugin_volumes().is_empty(), "nothing is provisioned before a node is selected");

    // What the scheduler does once a pod using the claim is placed.
    pending.metadata.name = Some("scheduled".into());
    pending.metadata.annotations = Some(BTreeMap::from([("volume.kubernetes.io/selected-node".to_string(), node)]));
    world.claim_object(pending).await;
    let volume_name = world.bound("scheduled").await;
    let pv = world.volumes().get(&volume_name).await.unwrap();
    let affinity = serde_json::to_value(pv.spec.unwrap().node_affinity).unwrap();
    let term = &affinity["required"]["nodeSelectorTerms"][0]["matchExpressions"][0];
    assert_eq!(term["key"], TOPOLOGY_KEY);
    assert_eq!(term["values"][0], PLUGIN_NODE);
}

#[tokio::test]
async fn provisioner_passes_volume_attributes_class_parameters() {
    let mut world = World::new("prov-vac", &[]).await;
    let class = world.class("vac", &[], "Delete").await;
    let vacs: Api<VolumeAttributesClass> = Api::all(world.client.clone());
    let gold = format!("{}-gold", world.ns());
    let foreign = format!("{}-foreign", world.ns());
    for (name, driver) in [(&gold, world.driver.clone()), (&foreign, "other.csi.e2e".to_string())] {
        let vac = VolumeAttributesClass {
            metadata: ObjectMeta { name: Some(name.clone()), ..Default::default() },
            driver_name: driver,
            parameters: Some(BTreeMap::from([("iops".to_string(), "300".to_string())])),
        };
        vacs.create(&PostParams::default(), &vac).await.unwrap();
    }
    let _provisioner = world.start_provisioner("csi-provisioner", &[]);

    let mut fast = claim("fast", &class, None, "ReadWriteOnce");
    fast.spec.as_mut().unwrap().volume_attributes_class_name = Some(gold.clone());
    world.claim_object(fast).await;
    let mut wrong = claim("wrong", &class, None, "ReadWriteOnce");
    wrong.spec.as_mut().unwrap().volume_attributes_class_name = Some(foreign.clone());
    world.claim_object(wrong).await;

    let volume_name = world.bound("fast").await;
    let pv = world.volumes().get(&volume_name).await.unwrap();
    assert_eq!(pv.spec.unwrap().volume_attributes_class_name.as_deref(), Some(gold.as_str()));
    let listed = plugin_volume_contexts(&world.socket);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["hostpath.csi.k8s.io/iops"], "300", "mutable parameters reached the driver: {listed:?}");
    world.event("wrong", "ProvisioningFailed", "does not match driver name").await;

    for name in [gold, foreign] {
        let _ = vacs.delete(&name, &DeleteParams::default()).await;
    }
}

#[tokio::test]
async fn provisioner_clones_a_claim_and_protects_the_source_meanwhile() {
    let mut world = World::new("prov-clone", &[]).await;
    let class = world.class("clone", &[], "Delete").await;
    let _provisioner = world.start_provisioner("csi-provisioner", &[]);

    world.claim("source", &class, None, "ReadWriteOnce").await;
    let source_volume = world.bound("source").await;
    let source_handle = world.volumes().get(&source_volume).await.unwrap().spec.unwrap().csi.unwrap().volume_handle;

    let mut copy = claim("copy", &class, None, "ReadWriteOnce");
    copy.spec.as_mut().unwrap().data_source = Some(TypedLocalObjectReference {
        api_group: None,
        kind: "PersistentVolumeClaim".into(),
        name: "source".into(),
    });
    world.claim_object(copy).await;
    let copy_volume = world.bound("copy").await;
    let copy_handle = world.volumes().get(&copy_volume).await.unwrap().spec.unwrap().csi.unwrap().volume_handle;
    let rows = plugin_volume_rows(&world.socket);
    let row = rows.iter().find(|r| r["volume_id"] == copy_handle.as_str()).expect("the clone in the plugin");
    assert_eq!(row["content_source"]["volume_id"], source_handle.as_str(), "cloned from the source volume");
    let source = world.claims().get("source").await.unwrap();
    assert!(has_finalizer(&source.metadata, "provisioner.storage.kubernetes.io/cloning-protection"));

    // No pending clone needs the source any more: deleting it goes through.
    world.claims().delete("source", &DeleteParams::default()).await.unwrap();
    eventually("the source claim is gone", TIMEOUT, || async {
        world.claims().get_opt("source").await.unwrap().is_none()
    })
    .await;
}

#[tokio::test]
async fn provisioner_retries_failed_deletions_and_reports_them() {
    let faults = tempfile::NamedTempFile::new().unwrap();
    let fault_path = faults.path().to_path_buf();
    std::fs::write(&fault_path, r#"{"DeleteVolume": {"code": "Internal", "message": "backend busy"}}"#).unwrap();
    let fault_flag = format!("--fault-config={}", fault_path.display());
    let mut world = World::new("prov-delfail", &[fault_flag.as_str()]).await;
    let class = world.class("delfail", &[], "Delete").await;
    let port = free_port();
    let endpoint = format!("--http-endpoint=127.0.0.1:{port}");
    let _provisioner = world.start_provisioner("csi-provisioner", &[endpoint.as_str()]);

    world.claim("stubborn", &class, None, "ReadWriteOnce").await;
    let volume_name = world.bound("stubborn").await;
    world.claims().delete("stubborn", &DeleteParams::default()).await.unwrap();

    // Events about PVs go to the default namespace, as client-go records them.
    let events: Api<Event> = Api::namespaced(world.client.clone(), "default");
    let params = ListParams::default().fields(&format!("involvedObject.name={volume_name}"));
    eventually("a VolumeFailedDelete event on the PV", TIMEOUT, || async {
        events.list(&params).await.unwrap().items.iter().any(|e| {
            e.reason.as_deref() == Some("VolumeFailedDelete")
                && e.message.as_deref().is_some_and(|m| m.contains("backend busy"))
        })
    })
    .await;
    assert!(world.volumes().get_opt(&volume_name).await.unwrap().is_some(), "the PV stays until the volume is gone");

    std::fs::write(&fault_path, "{}").unwrap();
    eventually("the PV is deleted once the driver agrees", TIMEOUT, || async {
        world.volumes().get_opt(&volume_name).await.unwrap().is_none()
    })
    .await;
    world.no_plugin_volumes_left().await;

    let metrics = http_get(port, "/metrics").await;
    for name in [
        "controller_persistentvolumeclaim_provision_total{class=",
        "controller_persistentvolume_delete_failed_total{class=",
        "controller_persistentvolume_delete_total{class=",
        "csi_sidecar_operations_seconds_bucket{",
    ] {
        assert!(metrics.contains(name), "missing {name} in /metrics:\n{metrics}");
    }
}

#[tokio::test]
async fn provisioner_gives_an_exhausted_node_back_to_the_scheduler() {
    let faults = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(faults.path(), r#"{"CreateVolume": {"code": "ResourceExhausted", "message": "node is full"}}"#)
        .unwrap();
    let fault_flag = format!("--fault-config={}", faults.path().display());
    let mut world = World::new("prov-full", &[fault_flag.as_str()]).await;
    let node = world.node("node").await;
    let class = world.class_with_binding("full", &[], "Delete", "WaitForFirstConsumer").await;
    let _provisioner = world.start_provisioner("csi-provisioner", &[]);

    let mut scheduled = claim("scheduled", &class, None, "ReadWriteOnce");
    scheduled.metadata.annotations = Some(BTreeMap::from([("volume.kubernetes.io/selected-node".to_string(), node)]));
    world.claim_object(scheduled).await;
    world.event("scheduled", "ProvisioningFailed", "node is full").await;
    eventually("the selected node is removed", TIMEOUT, || async {
        let claim = world.claims().get("scheduled").await.unwrap();
        let annotations = claim.metadata.annotations.clone().unwrap_or_default();
        !annotations.contains_key("volume.kubernetes.io/selected-node")
            && !has_finalizer(&claim.metadata, PROVISIONING_FINALIZER)
    })
    .await;
    assert!(world.plugin_volumes().is_empty());
}

#[tokio::test]
async fn provisioner_deletes_the_volume_of_a_pv_deleted_before_its_claim() {
    let mut world = World::new("prov-pvfirst", &[]).await;
    let class = world.class("pvfirst", &[], "Delete").await;
    let _provisioner = world.start_provisioner("csi-provisioner", &[]);

    world.claim("data", &class, None, "ReadWriteOnce").await;
    let volume_name = world.bound("data").await;
    eventually("the PV carries the deletion finalizer", TIMEOUT, || async {
        has_finalizer(&world.volumes().get(&volume_name).await.unwrap().metadata, PV_FINALIZER)
    })
    .await;
    world.volumes().delete(&volume_name, &DeleteParams::default()).await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(world.plugin_volumes().len(), 1, "a bound volume is not deleted");

    world.claims().delete("data", &DeleteParams::default()).await.unwrap();
    eventually("the PV is gone", TIMEOUT, || async { world.volumes().get_opt(&volume_name).await.unwrap().is_none() })
        .await;
    world.no_plugin_volumes_left().await;
}

#[tokio::test]
async fn provisioner_sends_the_cluster_topology_for_immediate_binding() {
    let mut world = World::new("prov-topo", &[]).await;
    let class = world.class("topo", &[], "Delete").await;
    // Later flags win: the upstream default, aggregated topology for Immediate classes.
    let _provisioner = world.start_provisioner("csi-provisioner", &["--immediate-topology=true"]);

    world.claim("early", &class, None, "ReadWriteOnce").await;
    // No CSINode lists the driver yet: nothing to aggregate, the claim waits and is retried.
    world.event("early", "ProvisioningFailed", "no available topology found").await;
    assert!(world.plugin_volumes().is_empty());

    world.node("node").await;
    let volume_name = world.bound("early").await;
    let pv = world.volumes().get(&volume_name).await.unwrap();
    let affinity = serde_json::to_value(pv.spec.unwrap().node_affinity).unwrap();
    assert_eq!(affinity["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"][0], PLUGIN_NODE);
}

/// Immediate binding offers each key set the driver registered, over the nodes that registered it (external-provisioner
/// v6.4.0, #1582): a Node labelled with the driver's key where the driver is not registered is left out, and a node
/// registered with another key set is offered under that set.
#[tokio::test]
async fn immediate_topology_covers_each_registered_key_set_and_only_registered_nodes() {
    const RACK: &str = "example.com/rack";
    let mut world = World::new("prov-keysets", &[]).await;
    let class = world.class("keysets", &[], "Delete").await;
    world.node("node").await;
    world.node_with("stray", &[(TOPOLOGY_KEY, "stray-node")], None).await;
    world.node_with("rack", &[(RACK, "rack-7"), (TOPOLOGY_KEY, "rack-node")], Some(&[RACK])).await;
    // Later flags win over the world's --immediate-topology=false: the upstream default.
    let provisioner = world.start_provisioner("csi-provisioner", &["--immediate-topology=true", "-v=5"]);

    world.claim("data", &class, None, "ReadWriteOnce").await;
    world.bound("data").await;
    let log = provisioner.log();
    let request = log
        .lines()
        .find(|line| line.contains("CreateVolume") && line.contains("requisite"))
        .unwrap_or_else(|| panic!("no CreateVolume request logged:\n{log}"));
    assert!(request.contains(PLUGIN_NODE), "the registered node's segment: {request}");
    assert!(request.contains("rack-7"), "the other registered key set: {request}");
    assert!(!request.contains("stray-node"), "a node without the driver: {request}");
    assert!(!request.contains("rack-node"), "a label the driver did not register on that node: {request}");
}

#[tokio::test]
async fn provisioner_killed_inside_create_volume_leaks_nothing() {
    let faults = tempfile::NamedTempFile::new().unwrap();
    let fault_path = faults.path().to_path_buf();
    // The volume is created at once, but the answer comes only 5 s later: the kill lands inside the call.
    std::fs::write(&fault_path, r#"{"CreateVolume": {"after_work": true, "latency_ms": 5000}}"#).unwrap();
    let fault_flag = format!("--fault-config={}", fault_path.display());
    let mut world = World::new("prov-kill", &[fault_flag.as_str()]).await;
    let class = world.class("kill", &[], "Delete").await;
    let mut provisioner = world.start_provisioner("csi-provisioner", &[]);

    world.claim("doomed", &class, None, "ReadWriteOnce").await;
    eventually("the driver created the volume", TIMEOUT, || async { world.plugin_volumes().len() == 1 }).await;
    provisioner.kill9();
    assert!(
        !provisioner.log().contains("CSI call succeeded method=\"/csi.v1.Controller/CreateVolume\""),
        "the kill was meant to land before CreateVolume answered"
    );
    world.claims().delete("doomed", &DeleteParams::default()).await.unwrap();

    std::fs::write(&fault_path, "{}").unwrap();
    let _restarted = world.start_provisioner("csi-provisioner-restarted", &[]);
    eventually("the claim is gone", TIMEOUT, || async { world.claims().get_opt("doomed").await.unwrap().is_none() })
        .await;
    world.no_plugin_volumes_left().await;
    eventually("the journal entry is gone", TIMEOUT, || async { world.journal().await.is_empty() }).await;
}

#[tokio::test]
async fn provisioner_killed_after_recording_the_volume_id_deletes_only_the_volume_of_its_name() {
    killed_after_recording_the_volume_id("prov-recorded", ClaimWhenRecorded::Gone).await;
}

#[tokio::test]
async fn provisioner_killed_after_recording_the_volume_id_of_a_claim_being_deleted_deletes_its_volume() {
    // The claim is still in the API, being deleted, while the second provisioner recovers it: it works from the
    // claim (every annotation of it), and the entry it records must still be one the journal takes once the claim
    // is gone, or the third rejects it and the volume leaks.
    killed_after_recording_the_volume_id("prov-recorded-del", ClaimWhenRecorded::BeingDeleted).await;
}

/// Where the claim stands while the second provisioner learns and records its volume id.
#[derive(Clone, Copy, PartialEq)]
enum ClaimWhenRecorded {
    Gone,
    BeingDeleted,
}

/// A test's own finalizer, holding a deleted claim in the API.
const HOLD_FINALIZER: &str = "e2e.csi-sidecars.test/hold";

async fn killed_after_recording_the_volume_id(prefix: &str, claim_then: ClaimWhenRecorded) {
    let faults = tempfile::NamedTempFile::new().unwrap();
    let fault_path = faults.path().to_path_buf();
    // First a kill inside CreateVolume (the answer comes 5 s late), with the claim deleted meanwhile.
    std::fs::write(&fault_path, r#"{"CreateVolume": {"after_work": true, "latency_ms": 5000}}"#).unwrap();
    let fault_flag = format!("--fault-config={}", fault_path.display());
    let mut world = World::new(prefix, &[fault_flag.as_str()]).await;
    let class = world.class("recorded", &[], "Delete").await;
    let mut first = world.start_provisioner("csi-provisioner", &[]);
    world.claim("doomed", &class, None, "ReadWriteOnce").await;
    eventually("the driver created the volume", TIMEOUT, || async { world.plugin_volumes().len() == 1 }).await;
    first.kill9();
    if claim_then == ClaimWhenRecorded::BeingDeleted {
        hold_claim(&world, "doomed", true).await;
    }
    world.claims().delete("doomed", &DeleteParams::default()).await.unwrap();
    match claim_then {
        ClaimWhenRecorded::Gone => {
            eventually("the claim is gone", TIMEOUT, || async {
                world.claims().get_opt("doomed").await.unwrap().is_none()
            })
            .await
        }
        ClaimWhenRecorded::BeingDeleted => {
            eventually("the claim is being deleted, held by the test's finalizer alone", TIMEOUT, || async {
                let claim = world.claims().get("doomed").await.unwrap();
                claim.metadata.finalizers.unwrap_or_default() == [HOLD_FINALIZER]
            })
            .await
        }
    }

    // The second learns the volume id by CreateVolume and records it, then dies inside the slow DeleteVolume.
    std::fs::write(&fault_path, r#"{"DeleteVolume": {"latency_ms": 30000}}"#).unwrap();
    let mut second = world.start_provisioner("csi-provisioner-second", &[]);
    let volume = world.plugin_volumes()[0].clone();
    eventually("the volume id is recorded in the journal", TIMEOUT, || async {
        world.journal().await.values().any(|entry| entry["volumeId"].as_str() == Some(volume.as_str()))
    })
    .await;
    second.kill9();
    if claim_then == ClaimWhenRecorded::BeingDeleted {
        hold_claim(&world, "doomed", false).await;
        eventually("the claim is gone", TIMEOUT, || async {
            world.claims().get_opt("doomed").await.unwrap().is_none()
        })
        .await;
    }

    // The third proves which volume is the entry's before deleting: one CreateVolume by the claim's name
    // (idempotent, it gives the recorded volume back), then DeleteVolume of that id. A recorded id is never
    // deleted on the entry's word alone (docs/architecture.md#in-flight-journal): the journal is untrusted input.
    std::fs::write(&fault_path, "{}").unwrap();
    let port = free_port();
    let endpoint = format!("--http-endpoint=127.0.0.1:{port}");
    let third = world.start_provisioner("csi-provisioner-third", &[endpoint.as_str()]);
    world.no_plugin_volumes_left().await;
    eventually("the journal entry is gone", TIMEOUT, || async { world.journal().await.is_empty() }).await;
    assert_eq!(create_volume_calls(port).await, 1, "one CreateVolume by name proved the recorded volume");
    assert!(!third.log().contains("in-flight journal entry rejected"), "the entry recorded is the journal's own");
}

/// Adds (`hold`) or removes the test's own finalizer on the claim `name`, its other finalizers kept.
async fn hold_claim(world: &World, name: &str, hold: bool) {
    let claim = world.claims().get(name).await.unwrap();
    let mut finalizers: Vec<String> =
        claim.metadata.finalizers.unwrap_or_default().into_iter().filter(|f| f != HOLD_FINALIZER).collect();
    if hold {
        finalizers.push(HOLD_FINALIZER.to_string());
    }
    let patch =
        serde_json::json!({"metadata": {"finalizers": finalizers, "resourceVersion": claim.metadata.resource_version}});
    world.claims().patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
}

#[tokio::test]
async fn provisioner_falls_back_to_the_finalizer_when_the_journal_cannot_be_written() {
    let faults = tempfile::NamedTempFile::new().unwrap();
    // The answer comes late, so the claim is seen in flight.
    std::fs::write(faults.path(), r#"{"CreateVolume": {"latency_ms": 3000}}"#).unwrap();
    let fault_flag = format!("--fault-config={}", faults.path().display());
    let mut world = World::new("prov-fallback", &[fault_flag.as_str()]).await;
    let class = world.class("fallback", &[], "Delete").await;
    // Its Leases in a namespace where its Role grants nothing: the journal cannot be read or written.
    let _provisioner = world.start_provisioner("csi-provisioner", &["--leader-election-namespace=default"]);
    world.claim("data", &class, None, "ReadWriteOnce").await;
    eventually("the claim carries the finalizer while in flight", TIMEOUT, || async {
        has_finalizer(&world.claims().get("data").await.unwrap().metadata, PROVISIONING_FINALIZER)
    })
    .await;
    world.bound("data").await;
    eventually("the finalizer is released once Bound", TIMEOUT, || async {
        !has_finalizer(&world.claims().get("data").await.unwrap().metadata, PROVISIONING_FINALIZER)
    })
    .await;
}

/// The number of CreateVolume calls the provisioner's metrics have seen.
async fn create_volume_calls(port: u16) -> u64 {
    let metrics = http_get(port, "/metrics").await;
    metrics
        .lines()
        .filter(|l| l.starts_with("csi_sidecar_operations_seconds_count{") && l.contains("CreateVolume"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

#[tokio::test]
async fn provisioner_waits_the_slow_retry_after_an_infeasible_error() {
    let faults = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(faults.path(), r#"{"CreateVolume": {"code": "InvalidArgument", "message": "no such tier"}}"#)
        .unwrap();
    let fault_flag = format!("--fault-config={}", faults.path().display());
    let mut world = World::new("prov-slow", &[fault_flag.as_str()]).await;
    let class = world.class("slow", &[], "Delete").await;
    let port = free_port();
    let endpoint = format!("--http-endpoint=127.0.0.1:{port}");
    // --retry-interval-max=5s (the world's): the claim is tried again after 5 s, not sooner.
    let _provisioner = world.start_provisioner("csi-provisioner", &[endpoint.as_str()]);

    world.claim("infeasible", &class, None, "ReadWriteOnce").await;
    world.event("infeasible", "ProvisioningFailed", "Retries will be delayed").await;
    // The failed attempt must not be repeated ahead of its delay (it writes no claim now: the in-flight journal
    // records it; with the fallback finalizer, those claim writes must not queue it again either). 7 s hold at most the first call and the one 5 s later.
    tokio::time::sleep(Duration::from_secs(7)).await;
    let calls = create_volume_calls(port).await;
    assert!((1..=2).contains(&calls), "{calls} CreateVolume calls in 7 s despite the 5 s slow retry");

    std::fs::write(faults.path(), "{}").unwrap();
    world.bound("infeasible").await;
}

#[tokio::test]
async fn provisioner_does_not_delete_a_volume_still_attached() {
    use k8s_openapi::api::storage::v1::{VolumeAttachment, VolumeAttachmentSource, VolumeAttachmentSpec};
    // A driver that needs attaching (PUBLISH_UNPUBLISH_VOLUME): its volumes must be detached before deletion.
    let mut world = World::new("prov-attached", &["--attach-required"]).await;
    let class = world.class("attached", &[], "Delete").await;
    let _provisioner = world.start_provisioner("csi-provisioner", &[]);
    world.claim("busy", &class, None, "ReadWriteOnce").await;
    // The attachment exists before the claim is even Bound, as a pod's would long before its claim is deleted: the
    // provisioner sees attachments through a watch (as upstream, through an informer), so one created a moment
    // before the deletion could still be unseen. The PV's name is known from the claim's UID.
    let uid = world.claims().get("busy").await.unwrap().metadata.uid.unwrap();
    let volume_name = format!("pvc-{uid}");

    let attachments: Api<VolumeAttachment> = Api::all(world.client.clone());
    let attachment_name = format!("{}-busy", world.ns());
    let attachment = VolumeAttachment {
        metadata: ObjectMeta { name: Some(attachment_name.clone()), ..Default::default() },
        spec: VolumeAttachmentSpec {
            attacher: world.driver.clone(),
            node_name: "node-x".into(),
            source: VolumeAttachmentSource { persistent_volume_name: Some(volume_name.clone()), ..Default::default() },
        },
        status: None,
    };
    attachments.create(&PostParams::default(), &attachment).await.unwrap();
    assert_eq!(world.bound("busy").await, volume_name);
    world.claims().delete("busy", &DeleteParams::default()).await.unwrap();

    let events: Api<Event> = Api::namespaced(world.client.clone(), "default");
    let params = ListParams::default().fields(&format!("involvedObject.name={volume_name}"));
    // A postponed deletion, not a failure: a Normal VolumeDelete (external-provisioner v6.4.0, #1588).
    let still_attached = format!("persistentvolume {volume_name} is still attached to node node-x, waiting for detach");
    eventually("a Normal VolumeDelete event naming the node", TIMEOUT, || async {
        events.list(&params).await.unwrap().items.iter().any(|e| {
            e.type_.as_deref() == Some("Normal")
                && e.reason.as_deref() == Some("VolumeDelete")
                && e.message.as_deref() == Some(still_attached.as_str())
        })
    })
    .await;
    let warnings: Vec<_> = events
        .list(&params)
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .collect();
    assert!(warnings.is_empty(), "no Warning while waiting for the detach: {warnings:?}");
    assert!(world.volumes().get_opt(&volume_name).await.unwrap().is_some(), "the PV stays while attached");
    assert_eq!(world.plugin_volumes().len(), 1, "no DeleteVolume while attached");

    attachments.delete(&attachment_name, &DeleteParams::default()).await.unwrap();
    eventually("the PV goes once detached", TIMEOUT, || async {
        world.volumes().get_opt(&volume_name).await.unwrap().is_none()
    })
    .await;
    world.no_plugin_volumes_left().await;
}
