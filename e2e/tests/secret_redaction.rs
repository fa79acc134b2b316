//! No secret value in any log or Event, with every sidecar and the plugin at `-v=10`.
//!
//! One world holds a Secret with a distinctive value for every secret a sidecar reads or passes on: the
//! StorageClass names provisioner, controller-publish, node-stage, node-publish, controller-expand, node-expand and
//! controller-modify secrets; the VolumeSnapshotClass the snapshotter and snapshotter-list secrets; the
//! VolumeGroupSnapshotClass the group-snapshotter secret. Every path that reads one runs: CreateVolume, expansion,
//! modification, CreateSnapshot, CreateVolumeGroupSnapshot, and the deletions of all three. Then every log of the
//! scenario (the sidecars', snapshot-controller's and the plugin's) and every Event in the cluster are searched for
//! every value, as written and in base64: no hit may be found.

use std::collections::BTreeMap;

use csi_sidecars_e2e::control_plane::cluster::Cluster;
use csi_sidecars_e2e::control_plane::snapshot_crds::install_snapshot_crds;
use csi_sidecars_e2e::processes::rbac::{Sidecar, SidecarIdentity};
use csi_sidecars_e2e::processes::scenario::binary;
use csi_sidecars_e2e::wait::eventually;
use csi_sidecars_e2e::worlds::group::{GATE, GATE_OFF, Groups, labelled_claim, start_with};
use csi_sidecars_e2e::worlds::provisioner::{ProvisionerWorld as World, TIMEOUT, claim};
use csi_sidecars_e2e::worlds::snapshot::{Snapshots, ready};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::api::storage::v1::{StorageClass, VolumeAttributesClass};
use kube::api::{DeleteParams, ListParams, ObjectMeta, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use snapshot_api::{VolumeGroupSnapshotClass, VolumeSnapshotContent};

const VERBOSE: &str = "-v=10";
const PREFIX: &str = "csi.storage.k8s.io/";

/// Every secret kind, as the class parameter names it (`<kind>-secret-name`).
const CLAIM_SECRETS: [&str; 7] = [
    "provisioner",
    "controller-publish",
    "node-stage",
    "node-publish",
    "controller-expand",
    "node-expand",
    "controller-modify",
];
const SNAPSHOT_SECRETS: [&str; 2] = ["snapshotter", "snapshotter-list"];
const GROUP_SECRETS: [&str; 1] = ["group-snapshotter"];
/// The secrets a sidecar reads itself; the others only go into the PV as references, for the kubelet.
const READ_SECRETS: [&str; 6] =
    ["provisioner", "controller-expand", "controller-modify", "snapshotter", "snapshotter-list", "group-snapshotter"];

/// The value of the Secret of `kind`: distinctive, so that any hit is a leak.
fn secret_value(kind: &str, nonce: &str) -> String {
    format!("{kind}-SECRET-VALUE-{nonce}")
}

/// The class parameters naming the Secret of each kind (`<kind>-secret`, in `namespace`).
fn secret_parameters(kinds: &[&str], namespace: &str) -> BTreeMap<String, String> {
    let mut parameters = BTreeMap::new();
    for kind in kinds {
        parameters.insert(format!("{PREFIX}{kind}-secret-name"), format!("{kind}-secret"));
        parameters.insert(format!("{PREFIX}{kind}-secret-namespace"), namespace.to_string());
    }
    parameters
}

fn base64(value: &str) -> String {
    let encoded = serde_json::to_value(ByteString(value.as_bytes().to_vec())).unwrap();
    encoded.as_str().unwrap().to_string()
}

/// Every `*.log` of the scenario, by file name.
fn logs(dir: &std::path::Path) -> Vec<(String, String)> {
    let mut logs = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if name.ends_with(".log") {
            logs.push((name, std::fs::read_to_string(entry.path()).unwrap_or_default()));
        }
    }
    logs
}

#[tokio::test]
async fn no_secret_value_reaches_a_log_or_an_event_at_v10() {
    install_snapshot_crds(&Cluster::shared().client().await).await;
    let mut world = World::new("secrets", &[VERBOSE]).await;
    let ns = world.ns().to_string();
    let nonce = format!("{:x}", std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos());
    let kinds: Vec<&str> = CLAIM_SECRETS.iter().chain(&SNAPSHOT_SECRETS).chain(&GROUP_SECRETS).copied().collect();
    for kind in &kinds {
        world.secret(&format!("{kind}-secret"), "password", &secret_value(kind, &nonce)).await;
    }

    let class_name = format!("{ns}-secrets");
    let class = StorageClass {
        metadata: ObjectMeta { name: Some(class_name.clone()), ..Default::default() },
        provisioner: world.driver.clone(),
        parameters: Some(secret_parameters(&CLAIM_SECRETS, &ns)),
        reclaim_policy: Some("Delete".into()),
        allow_volume_expansion: Some(true),
        volume_binding_mode: Some("Immediate".into()),
        ..Default::default()
    };
    Api::<StorageClass>::all(world.client.clone()).create(&PostParams::default(), &class).await.unwrap();
    world.classes.push(class_name.clone());
    let vacs: Api<VolumeAttributesClass> = Api::all(world.client.clone());
    let [silver, gold] = [format!("{ns}-silver"), format!("{ns}-gold")];
    for (name, iops) in [(&silver, "1000"), (&gold, "5000")] {
        let vac = VolumeAttributesClass {
            metadata: ObjectMeta { name: Some(name.clone()), ..Default::default() },
            driver_name: world.driver.clone(),
            parameters: Some(BTreeMap::from([("iops".to_string(), iops.to_string())])),
        };
        vacs.create(&PostParams::default(), &vac).await.unwrap();
    }

    let resizer_identity = SidecarIdentity::create(&world.client, &ns, Sidecar::Resizer, world.scenario.dir()).await;
    let _provisioner = world.start_provisioner("csi-provisioner", &[VERBOSE]);
    let resizer_args = vec![
        format!("--csi-address={}", world.socket.display()),
        resizer_identity.kubeconfig_flag(),
        "--retry-interval-start=500ms".to_string(),
        "--retry-interval-max=5s".to_string(),
        VERBOSE.to_string(),
    ];
    let _resizer = world.scenario.start("csi-resizer", &binary("csi-resizer"), &resizer_args);
    let _controller =
        start_with(&mut world, Sidecar::SnapshotController, "snapshot-controller", &[GATE, VERBOSE]).await;
    let _snapshotter = start_with(&mut world, Sidecar::Snapshotter, "csi-snapshotter", &[GATE_OFF, VERBOSE]).await;
    let _group_snapshotter =
        start_with(&mut world, Sidecar::Snapshotter, "csi-group-snapshotter", &[GATE, VERBOSE]).await;

    // Create, expand and modify.
    let mut data = claim("data", &class_name, Some("Block"), "ReadWriteOnce");
    data.metadata.labels = Some(BTreeMap::from([("app".to_string(), "secret".to_string())]));
    data.spec.as_mut().unwrap().volume_attributes_class_name = Some(silver.clone());
    world.claim_object(data).await;
    labelled_claim(&world, "other", &class_name, &[("app", "secret")]).await;
    world.bound("data").await;
    world.bound("other").await;
    let patch = json!({"spec": {"resources": {"requests": {"storage": "2Mi"}}, "volumeAttributesClassName": gold}});
    world.claims().patch("data", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(patch)).await.unwrap();
    let claims = world.claims();
    eventually("claim data expanded to 2Mi and modified to gold", TIMEOUT, || async {
        let Ok(claim) = claims.get("data").await else { return false };
        let status = claim.status.unwrap_or_default();
        let size = status.capacity.and_then(|c| c.get("storage").cloned()).map(|q| q.0);
        size.as_deref() == Some("2Mi") && status.current_volume_attributes_class_name.as_deref() == Some(gold.as_str())
    })
    .await;

    // Snapshot and group snapshot, then their deletions.
    let mut snaps = Snapshots::new(&world);
    let snapshot_parameters = secret_parameters(&SNAPSHOT_SECRETS, &ns);
    let parameters: Vec<(&str, &str)> = snapshot_parameters.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let snapshot_class = snaps.class_with("secrets", &parameters).await;
    snaps.snapshot_of_claim("single", "data", Some(&snapshot_class)).await;
    snaps.wait_snapshot("single", "ready", ready).await;
    // A pre-provisioned content of the class: csi-snapshotter asks ListSnapshots with the list secret.
    let pv = world.volumes().get(&world.bound("data").await).await.unwrap();
    let volume_id = pv.spec.and_then(|s| s.csi).map(|csi| csi.volume_handle).unwrap();
    let handle = world.csictl(&["create-snapshot", &format!("{ns}-listed"), "--source-volume-id", &volume_id]);
    let content: VolumeSnapshotContent = serde_json::from_value(json!({
        "apiVersion": "snapshot.storage.k8s.io/v1",
        "kind": "VolumeSnapshotContent",
        "metadata": {"name": format!("{ns}-listed")},
        "spec": {
            "volumeSnapshotRef": {"name": "listed", "namespace": ns},
            "deletionPolicy": "Delete",
            "driver": world.driver,
            "volumeSnapshotClassName": snapshot_class,
            "source": {"snapshotHandle": handle["snapshot_id"]},
        },
    }))
    .unwrap();
    snaps.contents().create(&PostParams::default(), &content).await.unwrap();
    snaps.snapshot_of_content("listed", &format!("{ns}-listed")).await;
    snaps.wait_snapshot("listed", "ready", ready).await;

    let group_class = format!("{ns}-group-secrets");
    let object: VolumeGroupSnapshotClass = serde_json::from_value(json!({
        "apiVersion": "groupsnapshot.storage.k8s.io/v1",
        "kind": "VolumeGroupSnapshotClass",
        "metadata": {"name": group_class},
        "driver": world.driver,
        "deletionPolicy": "Delete",
        "parameters": secret_parameters(&GROUP_SECRETS, &ns),
    }))
    .unwrap();
    Api::<VolumeGroupSnapshotClass>::all(world.client.clone()).create(&PostParams::default(), &object).await.unwrap();
    let groups = Groups { world: &world, class: group_class };
    let group = groups.group_of_class("both", json!({"matchLabels": {"app": "secret"}})).await;
    groups.ready("both").await;
    groups.ready_members(&group, 2).await;

    groups.groups().delete("both", &DeleteParams::default()).await.unwrap();
    groups.gone("both").await;
    for name in ["single", "listed"] {
        snaps.snapshots().delete(name, &DeleteParams::default()).await.unwrap();
        snaps.gone(name).await;
    }
    eventually("the storage snapshots are deleted", TIMEOUT, || async {
        world.csictl(&["list-snapshots"]).as_array().is_none_or(Vec::is_empty)
    })
    .await;
    for name in ["data", "other"] {
        world.claims().delete(name, &DeleteParams::default()).await.unwrap();
    }
    world.no_plugin_volumes_left().await;

    // Every log and every Event, for every value as written and in base64.
    let events: Vec<String> = Api::<Event>::all(world.client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|e| {
            format!(
                "Event {}/{}: {}",
                e.namespace().unwrap_or_default(),
                e.name_any(),
                serde_json::to_string(e).unwrap()
            )
        })
        .collect();
    let mut haystacks = logs(world.scenario.dir());
    let names: Vec<String> = haystacks.iter().map(|(name, _)| name.clone()).collect();
    for expected in [
        "csi-provisioner",
        "csi-resizer",
        "snapshot-controller",
        "csi-snapshotter",
        "csi-group-snapshotter",
        "hostpath-plugin",
    ] {
        assert!(names.contains(&format!("{expected}.log")), "{expected}'s log is searched: {names:?}");
    }
    let lines: usize = haystacks.iter().map(|(_, text)| text.lines().count()).sum();
    assert!(lines > 1000, "the logs are verbose ({lines} lines): -v=10 reached every process");
    // The search reaches where a leak would be: each Secret a sidecar reads was read, and its request is logged.
    let everything: String = haystacks.iter().map(|(_, text)| text.as_str()).collect();
    for kind in READ_SECRETS {
        let request = format!("/api/v1/namespaces/{ns}/secrets/{kind}-secret ");
        assert!(everything.contains(&request), "the {kind} secret was read (GET logged at -v=10)");
    }
    haystacks.push(("events".to_string(), events.join("\n")));
    let mut leaks = Vec::new();
    for kind in &kinds {
        let value = secret_value(kind, &nonce);
        for needle in [value.clone(), base64(&value)] {
            for (source, text) in &haystacks {
                if let Some(line) = text.lines().find(|line| line.contains(&needle)) {
                    leaks.push(format!("{kind} secret in {source}: {line}"));
                }
            }
        }
    }
    assert!(leaks.is_empty(), "secret values leaked:\n{}", leaks.join("\n"));
    let _ = vacs.delete(&silver, &DeleteParams::default()).await;
    let _ = vacs.delete(&gold, &DeleteParams::default()).await;
    let _ = group;
}
