//! `snapshot`: N VolumeSnapshots, one of each of N Bound block claims (made before the sidecars start), created at
//! once; done when each is readyToUse. A side is a pair of processes, snapshot-controller and csi-snapshotter, as a
//! user runs them for one driver; their CPU, RSS and requests are added up. `snapshot_ceiling`: a bare client does
//! the writes that make a snapshot ready (create the content, pre-bound; its status: handle, ready; the snapshot's
//! status: bound, ready) under the same limits and concurrency.

use std::time::Instant;

use anyhow::Context;
use csi_sidecars_e2e::bench::Run;
use csi_sidecars_e2e::driver_world::DriverWorld;
use csi_sidecars_e2e::resizer_world::ResizerWorld;
use csi_sidecars_e2e::{Process, SidecarIdentity, install_snapshot_crds};
use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::json;
use snapshot_api::{VolumeSnapshot, VolumeSnapshotClass, VolumeSnapshotContent};

use crate::bound::{ClaimSet, bound_claims};
use crate::limiter::bare_client;
use crate::measure::{Measure, Watched, latencies};
use crate::progress;
use crate::sidecar::{Kind, Limits, Side, Start};
use crate::tracker::{CREATORS, Tracker, create_all, timeout_for};

/// A world of Bound claims for snapshots, with the snapshot CRDs and a Delete VolumeSnapshotClass of its driver.
pub async fn snapshot_world(prefix: &str, set: &ClaimSet) -> anyhow::Result<(ResizerWorld, Vec<String>)> {
    let mut world = crate::bound::world(prefix).await;
    install_snapshot_crds(&world.client).await;
    let class: VolumeSnapshotClass = serde_json::from_value(json!({
        "apiVersion": "snapshot.storage.k8s.io/v1",
        "kind": "VolumeSnapshotClass",
        "metadata": {"name": world.ns()},
        "driver": world.driver,
        "deletionPolicy": "Delete",
    }))?;
    Api::<VolumeSnapshotClass>::all(world.client.clone()).create(&PostParams::default(), &class).await?;
    let names = bound_claims(&mut world, set).await?;
    Ok((world, names))
}

/// One side's snapshot-controller and csi-snapshotter, each as its ServiceAccount with upstream's rules. The
/// processes come first so that they stop before the identities' bindings go.
pub struct Pair {
    pub controller: Process,
    pub snapshotter: Process,
    identities: [SidecarIdentity; 2],
}

impl Pair {
    /// Starts both for `side` with `extra` flags (feature gates) and waits until their caches are filled.
    pub async fn start(world: &mut DriverWorld, side: Side, limits: &Limits, extra: &[&str]) -> anyhow::Result<Pair> {
        let mut identities = Vec::new();
        for kind in [Kind::SnapshotController, Kind::Snapshotter] {
            identities
                .push(SidecarIdentity::create(&world.client, world.ns(), kind.account(), world.scenario.dir()).await);
        }
        let mut processes = Vec::new();
        for (kind, identity) in [Kind::SnapshotController, Kind::Snapshotter].into_iter().zip(&identities) {
            let start = Start { socket: &world.socket, identity, namespace: world.ns.name(), extra };
            let name = format!("{}-{}", side.name(), kind.binary_name());
            processes.push(start.run(&mut world.scenario, &name, side, kind, limits).await?.0);
        }
        let snapshotter = processes.pop().context("csi-snapshotter")?;
        let controller = processes.pop().context("snapshot-controller")?;
        let identities: [SidecarIdentity; 2] = identities.try_into().ok().context("two identities")?;
        Ok(Pair { controller, snapshotter, identities })
    }

    pub fn watched(&self) -> Vec<Watched<'_>> {
        vec![
            Watched { process: &self.controller, username: self.identities[0].username().to_string() },
            Watched { process: &self.snapshotter, username: self.identities[1].username().to_string() },
        ]
    }
}

fn ready(snapshot: &VolumeSnapshot, _namespace: &str) -> Option<(String, bool)> {
    let ready = snapshot.status.as_ref().and_then(|s| s.ready_to_use) == Some(true);
    Some((snapshot.name_any(), ready))
}

fn snapshot_of(claim: &str, class: &str) -> anyhow::Result<VolumeSnapshot> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "snapshot.storage.k8s.io/v1",
        "kind": "VolumeSnapshot",
        "metadata": {"name": format!("s-{claim}")},
        "spec": {"source": {"persistentVolumeClaimName": claim}, "volumeSnapshotClassName": class},
    }))?)
}

/// Creates a snapshot of each claim at once; each as stored and when its create was answered.
async fn create_snapshots(
    api: &Api<VolumeSnapshot>,
    claims: Vec<String>,
    class: &str,
) -> anyhow::Result<Vec<(VolumeSnapshot, Instant)>> {
    let snapshots = claims.iter().map(|claim| snapshot_of(claim, class)).collect::<anyhow::Result<_>>()?;
    create_all(api, snapshots).await
}

/// One round of `snapshot` for `side` at `limits`.
pub async fn snapshot(side: Side, limits: &Limits, count: usize) -> anyhow::Result<Run> {
    let set = ClaimSet { count, backend: true, ..Default::default() };
    let (mut world, names) = snapshot_world("bench-snapshot", &set).await?;
    progress(&format!("  {count} Bound claims ready"));
    let pair = Pair::start(&mut world, side, limits, &[]).await?;
    let ns = world.ns().to_string();
    let api: Api<VolumeSnapshot> = Api::namespaced(world.client.clone(), &ns);
    let done = Tracker::start(api.clone(), &ns, ready).await;
    let measure = Measure::before(pair.watched()).await?;

    let t0 = Instant::now();
    let created = create_snapshots(&api, names, &ns).await?;
    let asked = created.into_iter().map(|(s, at)| (s.name_any(), at)).collect();
    let last = done.all_done(count, "snapshots ready", timeout_for(count)).await?;
    let seconds = last.duration_since(t0).as_secs_f64();
    progress(&format!("  every snapshot ready after {seconds:.1} s"));
    let run = measure.after(count, seconds, latencies(&asked, &done.done())).await;
    drop(pair);
    remove_all(&world.client, &ns).await;
    run
}

/// One round of `snapshot_ceiling` at `limits`: the snapshots exist (no sidecar runs); the bare client makes each
/// ready.
pub async fn ceiling(limits: &Limits, count: usize) -> anyhow::Result<Run> {
    let set = ClaimSet { count, backend: true, ..Default::default() };
    let (world, names) = snapshot_world("bench-snapshot-ceiling", &set).await?;
    let ns = world.ns().to_string();
    let api: Api<VolumeSnapshot> = Api::namespaced(world.client.clone(), &ns);
    let snapshots: Vec<VolumeSnapshot> =
        create_snapshots(&api, names, &ns).await?.into_iter().map(|(s, _)| s).collect();
    let contents: Api<VolumeSnapshotContent> = Api::all(world.client.clone());
    let (driver, class) = (world.driver.clone(), ns.clone());
    let run = bare_client(snapshots, limits, limits.concurrency(Kind::Snapshotter), |snapshot, limiter| {
        let (api, contents, driver, class, ns) =
            (api.clone(), contents.clone(), driver.clone(), class.clone(), ns.clone());
        async move {
            let name = snapshot.name_any();
            let claim = name.trim_start_matches("s-").to_string();
            let content_name = format!("snapcontent-{}", snapshot.uid().unwrap_or_default());
            let content: VolumeSnapshotContent = serde_json::from_value(json!({
                "apiVersion": "snapshot.storage.k8s.io/v1",
                "kind": "VolumeSnapshotContent",
                "metadata": {"name": content_name},
                "spec": {
                    "volumeSnapshotRef": {"namespace": ns, "name": name, "uid": snapshot.uid()},
                    "deletionPolicy": "Delete",
                    "driver": driver,
                    "volumeSnapshotClassName": class,
                    "source": {"volumeHandle": format!("{ns}-{claim}")},
                },
            }))?;
            limiter.acquire().await;
            contents.create(&PostParams::default(), &content).await.context("create content")?;
            limiter.acquire().await;
            let status = json!({"status": {
                "snapshotHandle": format!("bench-{name}"), "readyToUse": true, "restoreSize": 1i64 << 30,
                "creationTime": 1_800_000_000_000_000_000i64,
            }});
            contents.patch_status(&content_name, &PatchParams::default(), &Patch::Merge(status)).await?;
            limiter.acquire().await;
            let status = json!({"status": {
                "boundVolumeSnapshotContentName": content_name, "readyToUse": true, "restoreSize": "1Gi",
                "creationTime": now(),
            }});
            api.patch_status(&name, &PatchParams::default(), &Patch::Merge(status)).await.context("snapshot status")?;
            Ok(())
        }
    })
    .await?;
    progress(&format!("  {count} snapshots made ready in {:.1} s", run.seconds));
    remove_all(&world.client, &ns).await;
    Ok(run)
}

/// Now, as a status' `creationTime`.
pub fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

/// Removes what a round left with its sidecars stopped: the finalizers of its snapshot objects, then the objects
/// (contents are cluster-scoped and every later snapshot-controller would cache them). Best effort.
pub async fn remove_all(client: &kube::Client, namespace: &str) {
    let started = Instant::now();
    remove::<VolumeSnapshot>(Api::namespaced(client.clone(), namespace), |_| true).await;
    let ours =
        |content: &VolumeSnapshotContent| content.spec.volume_snapshot_ref.namespace.as_deref() == Some(namespace);
    remove::<VolumeSnapshotContent>(Api::all(client.clone()), ours).await;
    remove_groups(client, namespace).await;
    progress(&format!("  snapshot objects removed in {:.1} s", started.elapsed().as_secs_f64()));
}

async fn remove_groups(client: &kube::Client, namespace: &str) {
    use snapshot_api::{VolumeGroupSnapshot, VolumeGroupSnapshotContent};
    remove::<VolumeGroupSnapshot>(Api::namespaced(client.clone(), namespace), |_| true).await;
    let ours = |content: &VolumeGroupSnapshotContent| {
        content.spec.volume_group_snapshot_ref.namespace.as_deref() == Some(namespace)
    };
    remove::<VolumeGroupSnapshotContent>(Api::all(client.clone()), ours).await;
}

async fn remove<K>(api: Api<K>, ours: impl Fn(&K) -> bool)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let Ok(list) = api.list(&ListParams::default()).await else { return };
    let names: Vec<String> = list.items.iter().filter(|o| ours(o)).map(|o| o.name_any()).collect();
    futures::stream::iter(names)
        .for_each_concurrent(CREATORS, |name| {
            let api = api.clone();
            async move {
                let patch = json!({"metadata": {"finalizers": null}});
                let _ = api.patch(&name, &PatchParams::default(), &Patch::Merge(patch)).await;
                let _ = api.delete(&name, &DeleteParams::default()).await;
            }
        })
        .await;
}
