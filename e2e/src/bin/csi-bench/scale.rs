//! `scale` (`make bench-scale`): the sidecars among a large cluster's objects, ours against upstream's, one round at
//! upstream's default client limits. BENCH_SCALE_OBJECTS (50,000) Bound claims and PVs, as many Pending pods using
//! one claim each (the resizer's in-use check caches every pod that has not terminated), and as many ready
//! VolumeSnapshotContents of the driver (csi-snapshotter caches every content) are written once; then
//! - `idle_scale`, `idle_scale_resizer`, `idle_scale_snapshotter`: each sidecar started among them, its time until
//!   its caches are filled and its peak RSS a few seconds later, each start on a quiet control plane ([`crate::quiet::settle`]),
//!   a kind's two sides back to back; `idle_scale_combined` (ours only):
//!   `csi-sidecars --sidecars=provisioner,resizer,snapshotter`, one process whose sidecars share their caches;
//! - `provision_scale` (raised limits): BENCH_SCALE_CLAIMS (1,000) new claims provisioned among them with the
//!   provisioner and the resizer running, as `provision_cached` does (two processes, or ours as one).
//!
//! The note of the run (`scale_world` in the results): the seconds it took to write each kind, the control plane's
//! own memory (kube-apiserver's and etcd's RSS) once everything is written, and how long it then took to go quiet.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::report::Run;
use anyhow::Context;
use csi_sidecars_e2e::processes::rbac::{Sidecar, SidecarIdentity};
use csi_sidecars_e2e::worlds::driver::DriverWorld;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use snapshot_api::VolumeSnapshotContent;

use crate::cached::Setup;
use crate::idle::{IdleWorld, measured, startup};
use crate::sidecar::{Kind, Limits, Side, Start};
use crate::tracker::CREATORS;
use crate::{Runs, progress, sides};

/// How long after its caches are filled a sidecar's memory is read.
const SETTLE: Duration = Duration::from_secs(3);

/// The label of the contents the world writes (cluster-scoped: removed by it at the end).
const CONTENT_LABEL: &str = "bench.csi-sidecars/scale";

pub struct ScaleWorld {
    idle: IdleWorld,
    snapshotter: SidecarIdentity,
    objects: usize,
    /// Seconds to write each kind, and the control plane's RSS in MiB once written.
    pub note: BTreeMap<String, f64>,
}

impl ScaleWorld {
    pub async fn new(objects: usize) -> anyhow::Result<ScaleWorld> {
        let started = Instant::now();
        let idle = IdleWorld::new(objects).await?;
        let mut note = BTreeMap::from([("claims_and_pvs_write_s".to_string(), started.elapsed().as_secs_f64())]);
        let base = &idle.world.base;
        let started = Instant::now();
        write_pods(base, objects).await?;
        note.insert("pods_write_s".into(), started.elapsed().as_secs_f64());
        progress(&format!("  {objects} pods made in {:.1} s", started.elapsed().as_secs_f64()));
        let started = Instant::now();
        write_contents(base, objects).await?;
        note.insert("contents_write_s".into(), started.elapsed().as_secs_f64());
        progress(&format!("  {objects} snapshot contents made in {:.1} s", started.elapsed().as_secs_f64()));
        for (process, rss) in control_plane_rss() {
            progress(&format!("  {process}: {rss:.0} MiB resident"));
            note.insert(format!("{process}_rss_mib"), rss);
        }
        let (client, ns, dir) = (&base.client, base.ns(), base.scenario.dir());
        let snapshotter = SidecarIdentity::create(client, ns, Sidecar::Snapshotter, dir).await;
        Ok(ScaleWorld { idle, snapshotter, objects, note })
    }

    /// One sidecar of `kind` for `side`, started among the objects and measured.
    async fn run(&mut self, kind: Kind, side: Side, limits: &Limits) -> anyhow::Result<Run> {
        let name = format!("scale-{}-{}", side.name(), kind.binary_name());
        let (mut process, started) = match kind {
            Kind::Snapshotter => {
                let DriverWorld { scenario, socket, ns, .. } = &mut self.idle.world.base;
                let start = Start { socket, identity: &self.snapshotter, namespace: ns.name(), extra: &[] };
                startup(start.run(scenario, &name, side, kind, limits)).await?
            }
            _ => startup(self.idle.start_one(&name, kind, side, limits)).await?,
        };
        tokio::time::sleep(SETTLE).await;
        Ok(measured(&mut process, &started, self.objects))
    }

    /// Ours only: the three sidecars in one process.
    async fn run_combined(&mut self, limits: &Limits) -> anyhow::Result<Run> {
        let (mut process, started) =
            startup(self.idle.start_combined("scale-combined", limits, &crate::ALL_THREE)).await?;
        tokio::time::sleep(SETTLE).await;
        Ok(measured(&mut process, &started, self.objects))
    }

    /// Removes the cluster-scoped contents (the namespace takes the rest along).
    async fn remove_contents(&self) {
        let contents: Api<VolumeSnapshotContent> = Api::all(self.idle.world.base.client.clone());
        let ours = ListParams::default().labels(&format!("{CONTENT_LABEL}={}", self.idle.world.ns()));
        if let Err(err) = contents.delete_collection(&DeleteParams::default(), &ours).await {
            progress(&format!("  snapshot contents left behind: {err}"));
        }
    }
}

/// One Pending pod per claim (no scheduler places them, so they never terminate): what the resizer's in-use check
/// caches.
async fn write_pods(world: &DriverWorld, objects: usize) -> anyhow::Result<()> {
    let ns = world.ns();
    // Pods are admitted only once their namespace's default ServiceAccount exists.
    let accounts: Api<ServiceAccount> = Api::namespaced(world.client.clone(), ns);
    let default: ServiceAccount = serde_json::from_value(serde_json::json!({"metadata": {"name": "default"}}))?;
    if let Err(err) = accounts.create(&PostParams::default(), &default).await {
        anyhow::ensure!(matches!(&err, kube::Error::Api(s) if s.code == 409), "create ServiceAccount: {err}");
    }
    let pods: Api<Pod> = Api::namespaced(world.client.clone(), ns);
    let written: Vec<anyhow::Result<()>> = futures::stream::iter(0..objects)
        .map(|i| {
            let pods = pods.clone();
            async move {
                let claim = crate::bound::claim_name(i);
                let pod: Pod = serde_json::from_value(serde_json::json!({
                    "metadata": {"name": format!("user-{claim}"), "labels": {"app": "bench-scale"}},
                    "spec": {"automountServiceAccountToken": false,
                        "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}],
                        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}
                }))?;
                pods.create(&PostParams::default(), &pod).await.context("create pod")?;
                Ok(())
            }
        })
        .buffer_unordered(CREATORS)
        .collect()
        .await;
    written.into_iter().collect()
}

/// Ready snapshot contents of the world's driver, as csi-snapshotter leaves them once a snapshot is taken: what it
/// caches. Retained, bound to snapshots that do not exist (no snapshot-controller runs here).
async fn write_contents(world: &DriverWorld, objects: usize) -> anyhow::Result<()> {
    let ns = world.ns().to_string();
    let contents: Api<VolumeSnapshotContent> = Api::all(world.client.clone());
    let written: Vec<anyhow::Result<()>> = futures::stream::iter(0..objects)
        .map(|i| {
            let (contents, ns, driver) = (contents.clone(), ns.clone(), world.driver.clone());
            async move {
                let name = format!("{ns}-content-{i:05}");
                let content: VolumeSnapshotContent = serde_json::from_value(serde_json::json!({
                    "apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotContent",
                    "metadata": {"name": name, "labels": {CONTENT_LABEL: ns}},
                    "spec": {"volumeSnapshotRef": {"apiVersion": "snapshot.storage.k8s.io/v1",
                            "kind": "VolumeSnapshot", "namespace": ns, "name": format!("snap-{i:05}")},
                        "deletionPolicy": "Retain", "driver": driver, "volumeSnapshotClassName": ns,
                        "source": {"volumeHandle": format!("idle-{ns}-{}", crate::bound::claim_name(i))}}
                }))?;
                contents.create(&PostParams::default(), &content).await.context("create content")?;
                let status = serde_json::json!({"status": {"snapshotHandle": format!("snap-{ns}-{i:05}"),
                    "creationTime": 1_764_151_200_000_000_000_i64, "restoreSize": 1_073_741_824_i64,
                    "readyToUse": true}});
                let patch = Patch::Merge(status);
                contents.patch_status(&name, &PatchParams::default(), &patch).await.context("content status")?;
                Ok(())
            }
        })
        .buffer_unordered(CREATORS)
        .collect()
        .await;
    written.into_iter().collect()
}

/// kube-apiserver's and etcd's resident memory in MiB.
fn control_plane_rss() -> Vec<(String, f64)> {
    crate::quiet::control_plane()
        .into_iter()
        .filter(|(process, _)| *process != "kube-controller-manager")
        .filter_map(|(process, pid)| {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
            let kib: f64 = status.lines().find(|l| l.starts_with("VmRSS:"))?.split_whitespace().nth(1)?.parse().ok()?;
            Some((process.replace('-', "_"), kib / 1024.0))
        })
        .collect()
}

/// The scale run: the world written once, every sidecar started among it, then provisioning among it.
pub async fn scale_round(objects: usize, claims: usize, runs: &mut Runs) -> Option<BTreeMap<String, f64>> {
    progress(&format!("scale: making {objects} Bound claims and PVs, pods using them and snapshot contents"));
    let mut world = match ScaleWorld::new(objects).await {
        Ok(world) => world,
        Err(err) => {
            progress(&format!("scale: FAILED: {err:#}"));
            return None;
        }
    };
    let limits = Limits::DEFAULT;
    let kinds = [
        ("idle_scale", Kind::Provisioner),
        ("idle_scale_resizer", Kind::Resizer),
        ("idle_scale_snapshotter", Kind::Snapshotter),
    ];
    world.note.insert("settle_s".into(), crate::quiet::settle().await);
    // Each kind's two sides back to back, the side that goes first alternating, each on a quiet control plane.
    for (round, (scenario, kind)) in (1..).zip(kinds) {
        for side in sides(round) {
            progress(&format!("{scenario}: {} among {objects} of each", side.name()));
            crate::quiet::settle().await;
            runs.record(scenario, side.name(), &limits, world.run(kind, side, &limits).await);
        }
    }
    progress("idle_scale_combined: ours, provisioner, resizer and snapshotter in one process");
    crate::quiet::settle().await;
    runs.record("idle_scale_combined", Side::Ours.name(), &limits, world.run_combined(&limits).await);
    let raised = Limits::raised();
    match world.idle.provisioning_class().await {
        Ok(class) => {
            for side in sides(1) {
                progress(&format!("provision_scale: {} provisioner and resizer, {claims} new claims", side.name()));
                let run = world.idle.provision_cached(Setup::Separate(side), &raised, &class, claims).await;
                runs.record("provision_scale", side.name(), &raised, run);
                if side == Side::Ours {
                    progress(&format!("provision_scale_combined: ours in one process, {claims} new claims"));
                    let run = world.idle.provision_cached(Setup::Combined, &raised, &class, claims).await;
                    runs.record("provision_scale_combined", side.name(), &raised, run);
                }
            }
            world.idle.remove_provisioning_class(&class).await;
        }
        Err(err) => progress(&format!("provision_scale: FAILED: {err:#}")),
    }
    world.remove_contents().await;
    Some(world.note)
}
