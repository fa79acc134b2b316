//! `make demo`: the whole project on a laptop, with no cluster and no container.
//!
//! 1. The local control plane (`e2e/cluster.sh up`), the snapshot CRDs, a Node `node-1` with its CSINode.
//! 2. Both Helm charts installed into the namespace `csi-sidecars` (their ServiceAccounts, roles and Deployments;
//!    the pods never run: there is no kubelet).
//! 3. hostpath-plugin (`hostpath.csi.k8s.io`, node `node-1`) and every sidecar as local processes, each with the
//!    arguments its chart renders and a token of the ServiceAccount its chart created.
//! 4. The examples (`examples/<story>/`), story by story, in the namespace `demo`: each story prints a progress
//!    line per step, then what was expected, what was observed and how long it took.
//!
//! Exits 1 when any story fails. Everything is torn down at the end, unless `KEEP=1`: then the processes and the
//! control plane stay up and the demo prints how to use and stop them.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

use csi_sidecars_e2e::charts::{Chart, container_args, on_this_host, run};
use csi_sidecars_e2e::control_plane::cluster::Cluster;
use csi_sidecars_e2e::control_plane::cluster::repo_root;
use csi_sidecars_e2e::control_plane::snapshot_crds::install_snapshot_crds;
use csi_sidecars_e2e::http::free_port;
use csi_sidecars_e2e::http::try_http_get;
use csi_sidecars_e2e::processes::rbac::account_kubeconfig;
use csi_sidecars_e2e::processes::rbac::policy_rule;
use csi_sidecars_e2e::processes::scenario::{Process, Scenario, binary};
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::CSINode;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;
use snapshot_api::{VolumeGroupSnapshot, VolumeSnapshot};

const DRIVER: &str = "hostpath.csi.k8s.io";
const NODE: &str = "node-1";
const TOPOLOGY_KEY: &str = "topology.hostpath.csi/node";
const SYSTEM_NAMESPACE: &str = "csi-sidecars";
const NAMESPACE: &str = "demo";
const STEP_TIMEOUT: Duration = Duration::from_secs(90);

fn progress(text: &str) {
    eprintln!("[demo] {text}");
}

/// Polls `check` until it answers, or gives up after [`STEP_TIMEOUT`] with a text naming `what`.
async fn until<T, F, Fut>(what: &str, mut check: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    progress(&format!("  waiting for {what}"));
    let started = Instant::now();
    loop {
        if let Some(value) = check().await {
            return Ok(value);
        }
        if started.elapsed() > STEP_TIMEOUT {
            return Err(format!("timed out after {}s waiting for {what}", STEP_TIMEOUT.as_secs()));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The running world: admin client, the plugin and the sidecars.
struct Demo {
    client: kube::Client,
    scenario: Scenario,
    processes: Vec<Process>,
    metrics: Vec<(String, u16)>,
}

impl Demo {
    fn claims(&self) -> Api<PersistentVolumeClaim> {
        Api::namespaced(self.client.clone(), NAMESPACE)
    }

    /// `kubectl apply` of `examples/<story>/<file>` in the demo namespace.
    fn apply(&self, story: &str, file: &str) -> Result<(), String> {
        progress(&format!("  kubectl apply -f examples/{story}/{file}"));
        let path = repo_root().join("examples").join(story).join(file).display().to_string();
        run("kubectl", &["apply".into(), "-n".into(), NAMESPACE.into(), "-f".into(), path], None).map(|_| ())
    }

    /// Waits until claim `name` is Bound; returns it.
    async fn bound(&self, name: &str) -> Result<PersistentVolumeClaim, String> {
        let claims = self.claims();
        until(&format!("claim {name} Bound"), || async {
            let claim = claims.get(name).await.ok()?;
            (claim.status.as_ref()?.phase.as_deref()? == "Bound").then_some(claim)
        })
        .await
    }

    async fn volume_of(&self, claim: &PersistentVolumeClaim) -> Result<PersistentVolume, String> {
        let name = claim.spec.as_ref().and_then(|s| s.volume_name.clone()).unwrap_or_default();
        Api::<PersistentVolume>::all(self.client.clone()).get(&name).await.map_err(|e| format!("PV {name}: {e}"))
    }

    async fn current_class(&self, name: &str, class: &str) -> Result<(), String> {
        let claims = self.claims();
        until(&format!("claim {name} in VolumeAttributesClass {class}"), || async {
            let status = claims.get(name).await.ok()?.status?;
            (status.current_volume_attributes_class_name.as_deref() == Some(class)).then_some(())
        })
        .await
    }
}

/// A node the scheduler could pick, with the plugin registered as a kubelet would publish it.
async fn node(client: &kube::Client) -> Result<(), String> {
    let params = PatchParams::apply("csi-sidecars-demo").force();
    let node = json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": NODE, "labels": {TOPOLOGY_KEY: NODE}}});
    Api::<Node>::all(client.clone()).patch(NODE, &params, &Patch::Apply(&node)).await.map_err(|e| e.to_string())?;
    let csi_node = json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": NODE},
        "spec": {"drivers": [{"name": DRIVER, "nodeID": NODE, "topologyKeys": [TOPOLOGY_KEY]}]}});
    Api::<CSINode>::all(client.clone())
        .patch(NODE, &params, &Patch::Apply(&csi_node))
        .await
        .map_err(|e| e.to_string())?;
    Ok(())
}

fn helm_install(chart: Chart, release: &str, sets: &[&str]) -> Result<String, String> {
    progress(&format!("helm install {release} charts/{}", chart.name()));
    let mut args: Vec<String> = ["install", release, &chart.dir().display().to_string(), "-n", SYSTEM_NAMESPACE]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(sets.iter().flat_map(|s| ["--set".to_string(), s.to_string()]));
    run("helm", &args, None)?;
    run("helm", &["get".into(), "manifest".into(), release.into(), "-n".into(), SYSTEM_NAMESPACE.into()], None)
}

async fn start(client: kube::Client) -> Result<Demo, String> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for name in [SYSTEM_NAMESPACE, NAMESPACE] {
        if namespaces.get_opt(name).await.map_err(|e| e.to_string())?.is_some() {
            return Err(format!(
                "namespace {name} exists: a demo is still up (KEEP=1?); stop it with `make cluster-down`"
            ));
        }
        let object = serde_json::from_value(json!({"metadata": {"name": name}})).expect("a namespace");
        namespaces.create(&PostParams::default(), &object).await.map_err(|e| e.to_string())?;
    }
    install_snapshot_crds(&client).await;
    node(&client).await?;
    let controller =
        helm_install(Chart::SnapshotController, "snapshot-controller", &["featureGates.volumeGroupSnapshot=true"])?;
    let sidecars = helm_install(
        Chart::CsiSidecars,
        "hostpath",
        &[
            &format!("driver.name={DRIVER}"),
            "snapshotter.enabled=true",
            "snapshotter.groupSnapshots=true",
            "provisioner.rbac.secrets=true",
            "resizer.rbac.secrets=true",
            "snapshotter.rbac.secrets=true",
        ],
    )?;

    let mut scenario = Scenario::new("demo");
    let socket = scenario.path("csi.sock");
    let state = scenario.path("hostpath-state");
    let plugin_args = vec![
        format!("--endpoint=unix://{}", socket.display()),
        format!("--state-dir={}", state.display()),
        format!("--node-id={NODE}"),
        format!("--driver-name={DRIVER}"),
    ];
    progress("starting hostpath-plugin");
    let mut processes = vec![scenario.start("hostpath-plugin", &binary("hostpath-plugin"), &plugin_args)];

    let socket = socket.display().to_string();
    let vars = [("ADDRESS", socket.as_str()), ("NAMESPACE", SYSTEM_NAMESPACE)];
    let sidecar_account = "hostpath-csi-sidecars";
    let runs = [
        ("csi-provisioner", &sidecars, sidecar_account, policy_rule("", "persistentvolumes", "create")),
        ("csi-resizer", &sidecars, sidecar_account, policy_rule("", "persistentvolumeclaims/status", "patch")),
        (
            "csi-snapshotter",
            &sidecars,
            sidecar_account,
            policy_rule("snapshot.storage.k8s.io", "volumesnapshotcontents", "update"),
        ),
        (
            "snapshot-controller",
            &controller,
            "snapshot-controller",
            policy_rule("snapshot.storage.k8s.io", "volumesnapshots", "update"),
        ),
    ];
    let mut metrics = Vec::new();
    for (name, manifest, account, probe) in runs {
        let kubeconfig = account_kubeconfig(&client, SYSTEM_NAMESPACE, account, &probe, scenario.dir()).await;
        let port = free_port();
        let args = on_this_host(container_args(manifest, name, &vars), port, &kubeconfig);
        progress(&format!("starting {name} as ServiceAccount {account}: {}", args.join(" ")));
        processes.push(scenario.start(name, &binary(name), &args));
        metrics.push((name.to_string(), port));
    }
    for (name, port) in &metrics {
        until(&format!("{name} healthy (/healthz/leader-election on :{port})"), || async {
            let (status, _) = try_http_get(*port, "/healthz/leader-election").await?;
            (status == 200).then_some(())
        })
        .await?;
    }
    Ok(Demo { client, scenario, processes, metrics })
}

/// One story's result.
struct Outcome {
    story: &'static str,
    expected: &'static str,
    observed: Result<String, String>,
    took: Duration,
}

async fn storage_classes(demo: &Demo) -> Result<String, String> {
    demo.apply("storage-classes", "10-classes.yaml")?;
    demo.apply("storage-classes", "20-claims.yaml")?;
    let mut seen = Vec::new();
    for name in ["fast-data", "slow-archive"] {
        let claim = demo.bound(name).await?;
        let volume = demo.volume_of(&claim).await?;
        let spec = volume.spec.unwrap_or_default();
        let size = spec.capacity.unwrap_or_default().get("storage").map(|q| q.0.clone()).unwrap_or_default();
        seen.push(format!("{name} Bound ({}, {size})", spec.storage_class_name.unwrap_or_default()));
    }
    Ok(seen.join("; "))
}

async fn topology(demo: &Demo) -> Result<String, String> {
    demo.apply("topology", "10-class.yaml")?;
    demo.apply("topology", "20-claim-and-pod.yaml")?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let claim = demo.claims().get("web-data").await.map_err(|e| e.to_string())?;
    let phase = claim.status.and_then(|s| s.phase).unwrap_or_default();
    if phase != "Pending" {
        return Err(format!("web-data is {phase} before any node was selected"));
    }
    progress(&format!("  playing the scheduler: selected-node={NODE}"));
    let patch = json!({"metadata": {"annotations": {"volume.kubernetes.io/selected-node": NODE}}});
    demo.claims().patch("web-data", &PatchParams::default(), &Patch::Merge(patch)).await.map_err(|e| e.to_string())?;
    let claim = demo.bound("web-data").await?;
    let affinity = demo.volume_of(&claim).await?.spec.and_then(|s| s.node_affinity).and_then(|a| a.required);
    let terms = serde_json::to_string(&affinity).unwrap_or_default();
    if !terms.contains(TOPOLOGY_KEY) || !terms.contains(NODE) {
        return Err(format!("PV node affinity {terms} does not name {TOPOLOGY_KEY}={NODE}"));
    }
    Ok(format!("Pending until a node was selected, then Bound; PV affinity {TOPOLOGY_KEY} In [{NODE}]"))
}

async fn raw_block(demo: &Demo) -> Result<String, String> {
    demo.apply("raw-block", "10-dynamic-block.yaml")?;
    let claim = demo.bound("db-raw").await?;
    let mode = demo.volume_of(&claim).await?.spec.and_then(|s| s.volume_mode).unwrap_or_default();
    if mode != "Block" {
        return Err(format!("db-raw's PV has volumeMode {mode}"));
    }
    demo.apply("raw-block", "20-static-block.yaml")?;
    let claim = demo.bound("mariadb-raw").await?;
    let volume = claim.spec.and_then(|s| s.volume_name).unwrap_or_default();
    Ok(format!("db-raw Bound to a Block PV; mariadb-raw Bound to {volume}"))
}

async fn volume_attributes_classes(demo: &Demo) -> Result<String, String> {
    let story = "volume-attributes-classes";
    demo.apply(story, "10-classes.yaml")?;
    demo.apply(story, "20-claim-silver.yaml")?;
    demo.bound("cassandra-data").await?;
    demo.current_class("cassandra-data", "silver").await?;
    demo.apply(story, "30-later-claim-gold.yaml")?;
    demo.current_class("cassandra-data", "gold").await?;
    demo.apply(story, "40-later-claim-infeasible.yaml")?;
    demo.bound("reports-data").await?;
    demo.current_class("reports-data", "silver").await?;
    progress("  kubectl patch pvc reports-data: volumeAttributesClassName=platinum-typo");
    let patch = json!({"spec": {"volumeAttributesClassName": "platinum-typo"}});
    demo.claims()
        .patch("reports-data", &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map_err(|e| e.to_string())?;
    let claims = demo.claims();
    until("reports-data's modification Infeasible", || async {
        let status = claims.get("reports-data").await.ok()?.status?;
        (status.modify_volume_status?.status == "Infeasible").then_some(())
    })
    .await?;
    Ok("cassandra-data silver -> gold; reports-data to platinum-typo Infeasible, still silver".into())
}

async fn secrets(demo: &Demo) -> Result<String, String> {
    for file in ["10-secret.yaml", "20-class.yaml", "30-claim.yaml"] {
        demo.apply("secrets", file)?;
    }
    let claim = demo.bound("orders-db").await?;
    let volume = demo.volume_of(&claim).await?;
    let annotations = volume.metadata.annotations.unwrap_or_default();
    let secret = annotations.get("volume.kubernetes.io/provisioner-deletion-secret-name").cloned().unwrap_or_default();
    if secret != "orders-db-creds" {
        return Err(format!("PV's deletion secret is {secret:?}"));
    }
    Ok(format!("orders-db Bound; PV deletion secret {secret} (template resolved)"))
}

async fn ready_snapshot(demo: &Demo, name: &str) -> Result<(), String> {
    let api: Api<VolumeSnapshot> = Api::namespaced(demo.client.clone(), NAMESPACE);
    until(&format!("VolumeSnapshot {name} readyToUse"), || async {
        (api.get(name).await.ok()?.status?.ready_to_use == Some(true)).then_some(())
    })
    .await
}

async fn snapshots(demo: &Demo) -> Result<String, String> {
    demo.apply("snapshots", "10-class.yaml")?;
    demo.bound("app-data").await?;
    demo.apply("snapshots", "20-snapshot.yaml")?;
    ready_snapshot(demo, "app-data-monday").await?;
    demo.apply("snapshots", "30-restore.yaml")?;
    demo.bound("app-data-restored").await?;
    Ok("app-data-monday readyToUse; app-data-restored Bound".into())
}

async fn clone(demo: &Demo) -> Result<String, String> {
    demo.apply("clone", "10-source.yaml")?;
    demo.bound("golden-image").await?;
    demo.apply("clone", "20-clone.yaml")?;
    demo.bound("golden-image-copy").await?;
    Ok("golden-image-copy Bound from golden-image".into())
}

async fn group_snapshot(demo: &Demo) -> Result<String, String> {
    let story = "group-snapshot";
    demo.apply(story, "10-claims.yaml")?;
    demo.bound("pg-data").await?;
    demo.bound("pg-wal").await?;
    demo.apply(story, "20-group-snapshot.yaml")?;
    let groups: Api<VolumeGroupSnapshot> = Api::namespaced(demo.client.clone(), NAMESPACE);
    until("VolumeGroupSnapshot pg-before-upgrade readyToUse", || async {
        (groups.get("pg-before-upgrade").await.ok()?.status?.ready_to_use == Some(true)).then_some(())
    })
    .await?;
    let snapshots: Api<VolumeSnapshot> = Api::namespaced(demo.client.clone(), NAMESPACE);
    let members: BTreeMap<String, String> = until("2 ready members", || async {
        let list = snapshots.list(&Default::default()).await.ok()?;
        let members: BTreeMap<String, String> = list
            .items
            .into_iter()
            .filter(|s| {
                s.status.as_ref().and_then(|s| s.volume_group_snapshot_name.as_deref()) == Some("pg-before-upgrade")
            })
            .filter(|s| s.status.as_ref().and_then(|s| s.ready_to_use) == Some(true))
            .filter_map(|s| Some((s.spec.source.persistent_volume_claim_name?, s.metadata.name?)))
            .collect();
        (members.len() == 2).then_some(members)
    })
    .await?;
    let path = repo_root().join("examples").join(story).join("30-later-restore.yaml");
    let mut text = std::fs::read_to_string(&path).map_err(|e| e.to_string())?;
    for (claim, member) in &members {
        text = text.replace(&format!("member-of-{claim}"), member);
    }
    progress("  kubectl apply -f examples/group-snapshot/30-later-restore.yaml (member names filled in)");
    run("kubectl", &["apply".into(), "-n".into(), NAMESPACE.into(), "-f".into(), "-".into()], Some(&text))?;
    demo.bound("pg-data-restored").await?;
    demo.bound("pg-wal-restored").await?;
    // Member names are snapshot-<64 hex digits>; the start tells them apart.
    let pairs: Vec<String> = members
        .iter()
        .map(|(claim, member)| format!("{claim}-restored from {}…", member.get(..17).unwrap_or(member)))
        .collect();
    Ok(format!("group ready; {} Bound", pairs.join(", ")))
}

async fn stories(demo: &Demo) -> Vec<Outcome> {
    let mut outcomes = Vec::new();
    macro_rules! story {
        ($name:literal, $expected:literal, $run:expr) => {{
            progress(&format!("story {}: expecting {}", $name, $expected));
            let started = Instant::now();
            let observed = $run.await;
            let took = started.elapsed();
            match &observed {
                Ok(text) => progress(&format!("story {}: ok in {:.1}s: {text}", $name, took.as_secs_f64())),
                Err(text) => progress(&format!("story {}: FAILED in {:.1}s: {text}", $name, took.as_secs_f64())),
            }
            outcomes.push(Outcome { story: $name, expected: $expected, observed, took });
        }};
    }
    story!("storage-classes", "two claims Bound, one per class", storage_classes(demo));
    story!("topology", "Pending until a node is selected, then Bound on node-1", topology(demo));
    story!("raw-block", "a dynamic Block claim and a static Block PV Bound", raw_block(demo));
    story!("volume-attributes-classes", "silver -> gold; a bad class Infeasible", volume_attributes_classes(demo));
    story!("secrets", "Bound with the claim's own templated secret", secrets(demo));
    story!("snapshots", "snapshot ready, restore Bound", snapshots(demo));
    story!("clone", "clone Bound", clone(demo));
    story!("group-snapshot", "group of app=postgresql ready, members restored", group_snapshot(demo));
    outcomes
}

fn summary(outcomes: &[Outcome]) {
    println!("\n| story | expected | observed | time | result |\n|---|---|---|---|---|");
    for o in outcomes {
        let (observed, result) = match &o.observed {
            Ok(text) => (text.as_str(), "ok"),
            Err(text) => (text.as_str(), "FAILED"),
        };
        println!("| {} | {} | {} | {:.1}s | {} |", o.story, o.expected, observed, o.took.as_secs_f64(), result);
    }
}

fn keep(demo: Demo) {
    let kubeconfig = Cluster::shared().kubeconfig().display().to_string();
    let pids: Vec<String> = demo.processes.iter().map(|p| p.pid().to_string()).collect();
    println!("\nKEEP=1: everything stays up.\n  export KUBECONFIG={kubeconfig}");
    println!("  kubectl -n {NAMESPACE} get pvc,volumesnapshot,volumegroupsnapshot");
    for (name, port) in &demo.metrics {
        println!("  {name}: http://127.0.0.1:{port}/metrics");
    }
    println!("  logs: {}/*.log", demo.scenario.dir().display());
    println!("  stop: kill {} && make cluster-down", pids.join(" "));
    // The processes outlive the demo, and so must the folder with their sockets, state and logs.
    std::mem::forget(demo);
}

#[tokio::main]
async fn main() {
    let started = Instant::now();
    progress("starting the control plane (e2e/cluster.sh up)");
    let client = Cluster::shared().client().await;
    let demo = match start(client).await {
        Ok(demo) => demo,
        Err(error) => {
            progress(&format!("set-up failed: {error}"));
            std::process::exit(1);
        }
    };
    progress(&format!("set up in {:.1}s", started.elapsed().as_secs_f64()));
    let outcomes = stories(&demo).await;
    summary(&outcomes);
    let failed = outcomes.iter().filter(|o| o.observed.is_err()).count();
    println!(
        "\n{} of {} stories passed in {:.1}s",
        outcomes.len() - failed,
        outcomes.len(),
        started.elapsed().as_secs_f64()
    );
    if failed > 0 {
        for process in &demo.processes {
            let log = process.log();
            let lines: Vec<&str> = log.lines().collect();
            eprintln!("===== {} (last 40 of {} lines) =====", process.name(), lines.len());
            lines[lines.len().saturating_sub(40)..].iter().for_each(|line| eprintln!("{line}"));
        }
    }
    if std::env::var("KEEP").is_ok_and(|v| v == "1") {
        keep(demo);
    } else {
        drop(demo);
        progress("tearing down (e2e/cluster.sh down)");
        let _ = std::process::Command::new("bash").arg(repo_root().join("e2e/cluster.sh")).arg("down").status();
    }
    std::process::exit(if failed == 0 { 0 } else { 1 });
}
