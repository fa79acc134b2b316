//! `snapshot`: N VolumeSnapshots, one of each of N Bound block claims (made before the sidecars start), created at
//! once; done when each is readyToUse. A side is a pair of processes, snapshot-controller and csi-snapshotter, as a
//! user runs them for one driver; their CPU, RSS and requests are added up. `snapshot_ceiling`: a bare client does
//! the writes that make a snapshot ready (create the content, pre-bound; its status: handle, ready; the snapshot's
//! status: bound, ready) under the same limits and concurrency.

use std::time::Instant;

use crate::report::Run;
use anyhow::Context;
use csi_sidecars_e2e::control_plane::snapshot_crds::install_snapshot_crds;
use csi_sidecars_e2e::processes::rbac::SidecarIdentity;
use csi_sidecars_e2e::processes::scenario::Process;
use csi_sidecars_e2e::worlds::driver::DriverWorld;
use csi_sidecars_e2e::worlds::resizer::ResizerWorld;
use futures::StreamExt;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::json;
use snapshot_api::{VolumeSnapshot, VolumeSnapshotClass, VolumeSnapshotContent};

use crate::bound::{ClaimSet, bound_claims};
use crate::limiter::bare_client;
use crate::measure::{Measure, Watched, latencies};
use crate::sidecar::{Kind, Limits, Side, Start};
use crate::tracker::{CREATORS, Tracker, create_all, now, timeout_for};
use crate::{Step, progress};

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

/// The ServiceAccounts of a side's snapshot-controller and csi-snapshotter in a world, with upstream's rules: made
/// once per world, and each side of a round runs as them in turn (requests are told apart by time, the sides never
/// running at once).
pub struct Identities([SidecarIdentity; 2]);

impl Identities {
    pub async fn create(world: &DriverWorld) -> Identities {
        let identity =
            |kind: Kind| SidecarIdentity::create(&world.client, world.ns(), kind.account(), world.scenario.dir());
        Identities([identity(Kind::SnapshotController).await, identity(Kind::Snapshotter).await])
    }
}

/// One side's snapshot-controller and csi-snapshotter, each as its ServiceAccount.
pub struct Pair {
    pub controller: Process,
    pub snapshotter: Process,
    usernames: [String; 2],
}

impl Pair {
    /// Starts both for `side` with `extra` flags (feature gates) and waits until their caches are filled.
    pub async fn start(
        world: &mut DriverWorld,
        identities: &Identities,
        side: Side,
        limits: &Limits,
        extra: &[&str],
    ) -> anyhow::Result<Pair> {
        let mut processes = Vec::new();
        for (kind, identity) in [Kind::SnapshotController, Kind::Snapshotter].into_iter().zip(&identities.0) {
            let start = Start { socket: &world.socket, identity, namespace: world.ns.name(), extra };
            let name = format!("{}-{}", side.name(), kind.binary_name());
            processes.push(start.run(&mut world.scenario, &name, side, kind, limits).await?.0);
        }
        let snapshotter = processes.pop().context("csi-snapshotter")?;
        let controller = processes.pop().context("snapshot-controller")?;
        let usernames = identities.0.each_ref().map(|identity| identity.username().to_string());
        Ok(Pair { controller, snapshotter, usernames })
    }

    pub fn watched(&self) -> Vec<Watched<'_>> {
        vec![
            Watched { process: &self.controller, username: self.usernames[0].clone() },
            Watched { process: &self.snapshotter, username: self.usernames[1].clone() },
        ]
    }
}

/// A round of a scenario whose snapshot-controller acts on every VolumeSnapshot and group in the cluster, whatever
/// its driver: run at once, ours and upstream's each worked on the other's objects and on the ceiling's (a third of
/// their writes in a round). So the ceiling and the sides run one after another, in one world whose claims are made
/// once, and the round's objects are removed between them.
pub struct Round {
    pub ceiling: anyhow::Result<Run>,
    pub sides: Vec<(Side, anyhow::Result<Run>)>,
}

impl Round {
    /// Every run of the round failed with `err` (the world could not be made).
    pub fn failed(err: &anyhow::Error, sides: [Side; 2]) -> Round {
        let failure = || Err(anyhow::anyhow!("{err:#}"));
        Round { ceiling: failure(), sides: sides.into_iter().map(|side| (side, failure())).collect() }
    }
}

/// One round of `snapshot_ceiling` and `snapshot` for both `sides` at `limits`, in one world (see [`Round`]).
pub async fn round(limits: &Limits, count: usize, sides: [Side; 2], step: Step) -> Round {
    let set = ClaimSet { count, backend: true, ..Default::default() };
    let (mut world, names) = match snapshot_world("bench-snapshot", &set).await {
        Ok(made) => made,
        Err(err) => return Round::failed(&err, sides),
    };
    progress(&format!("  {count} Bound claims ready"));
    let identities = Identities::create(&world).await;
    step.announce("ceiling");
    let ceiling = ceiling(&world, limits, &names).await;
    let mut runs = Vec::new();
    for side in sides {
        step.announce(side.name());
        runs.push((side, snapshot(&mut world, &identities, side, limits, &names).await));
    }
    Round { ceiling, sides: runs }
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

/// `snapshot` for `side`: a snapshot of each claim of `names` at once, until every one is ready.
async fn snapshot(
    world: &mut ResizerWorld,
    identities: &Identities,
    side: Side,
    limits: &Limits,
    names: &[String],
) -> anyhow::Result<Run> {
    let count = names.len();
    let pair = Pair::start(world, identities, side, limits, &[]).await?;
    let ns = world.ns().to_string();
    let api: Api<VolumeSnapshot> = Api::namespaced(world.client.clone(), &ns);
    let done = Tracker::start(api.clone(), &ns, ready).await;
    let measure = Measure::before(pair.watched()).await?;

    let t0 = Instant::now();
    let created = create_snapshots(&api, names.to_vec(), &ns).await?;
    let asked = created.into_iter().map(|(s, at)| (s.name_any(), at)).collect();
    let last = done.all_done(count, "snapshots ready", timeout_for(count)).await?;
    let seconds = last.duration_since(t0).as_secs_f64();
    progress(&format!("  every snapshot ready after {seconds:.1} s"));
    let run = measure.after(count, seconds, latencies(&asked, &done.done())).await;
    drop(pair);
    remove_all(&world.client, &ns).await;
    run
}

/// `snapshot_ceiling` at `limits`: no sidecar runs; a snapshot of each claim of `names` is created, and the bare
/// client makes each ready.
async fn ceiling(world: &ResizerWorld, limits: &Limits, names: &[String]) -> anyhow::Result<Run> {
    let count = names.len();
    let ns = world.ns().to_string();
    let api: Api<VolumeSnapshot> = Api::namespaced(world.client.clone(), &ns);
    let snapshots: Vec<VolumeSnapshot> =
        create_snapshots(&api, names.to_vec(), &ns).await?.into_iter().map(|(s, _)| s).collect();
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
/// Removes what a run left with its sidecars stopped: the finalizers of its snapshot objects, then the objects
/// (contents are cluster-scoped and every later snapshot-controller would cache them), and waits until they are gone:
/// the next run in the same world makes objects of the same names. Best effort.
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
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
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
    let deadline = Instant::now() + std::time::Duration::from_secs(30);
    while Instant::now() < deadline {
        match api.list(&ListParams::default()).await {
            Ok(list) if list.items.iter().any(&ours) => tokio::time::sleep(std::time::Duration::from_millis(200)).await,
            _ => return,
        }
    }
    progress(&format!("  {} objects still there 30 s after their removal", K::kind(&())));
}
