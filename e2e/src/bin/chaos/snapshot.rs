//! Phase snapshots: VolumeSnapshots of surviving claims created at a steady pace and a quarter of them deleted
//! soon after (some while being cut), under CreateSnapshot/DeleteSnapshot faults, with the two csi-snapshotter
//! replicas and the two snapshot-controller replicas SIGKILLed in turn and (on a cluster of its own) kube-apiserver
//! restarted once; then the phase settles under faults until every surviving snapshot is ready and every deleted
//! one gone.
//!
//! Beside them, the mass deletion of external-snapshotter#1446: `CHAOS_MASS_SNAPSHOTS` snapshots made together and,
//! once all are ready (or half `CHAOS_QUIESCE_SECONDS` after the kills at the latest), deleted at once with one
//! delete-collection, at the sidecars' default client limits: snapshot-controller's being-deleted writes wait their
//! turn behind all the others.
//!
//! The snapshot sidecars ([`Snapshotting`]) serve the group phase too: snapshot-controller makes the group and
//! member contents and the member VolumeSnapshots, csi-snapshotter makes the members' contents ready and frees
//! them once their group is deleted.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::time::{Duration, Instant};

use csi_sidecars_e2e::chaos::fault_plan::{FaultMix, SNAPSHOT_METHODS};
use csi_sidecars_e2e::chaos::invariants::unsettled;
use csi_sidecars_e2e::chaos::sizes::{Phase, Sizes, picked};
use csi_sidecars_e2e::control_plane::snapshot_crds::install_snapshot_crds;
use csi_sidecars_e2e::processes::rbac::Sidecar;
use csi_sidecars_e2e::worlds::group::GATE_OFF;
use futures::StreamExt;
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;
use snapshot_api::{VolumeSnapshot, VolumeSnapshotClass};

use crate::world::{Deletions, KillTurns, LeaderPause, ProgressEvery, Replicas, Restarts, World, settle, with_retries};

const TICK: Duration = Duration::from_millis(100);
/// The label of the snapshots deleted together.
const MASS_LABEL: (&str, &str) = ("chaos-mass", "1");

/// The snapshot sidecars of the snapshot and group phases, two replicas each, and the run's VolumeSnapshotClass;
/// what must go at the end of the run.
pub struct Snapshotting {
    pub class: String,
    pub controllers: Replicas,
    pub snapshotters: Replicas,
    /// The VolumeSnapshots the snapshot phase created and did not delete.
    pub survivors: BTreeSet<String>,
    /// The VolumeSnapshots the snapshot phase deleted.
    pub deleted: BTreeSet<String>,
}

impl Snapshotting {
    /// Installs the snapshot CRDs and starts snapshot-controller (group snapshots on when `groups`) and
    /// csi-snapshotter (its groups off: csi-group-snapshotter serves them).
    pub async fn start(world: &mut World, groups: bool) -> anyhow::Result<Snapshotting> {
        install_snapshot_crds(&world.client).await;
        let class = driver_class::<VolumeSnapshotClass>(world).await?;
        let gate: &[&str] = if groups { &[] } else { &[GATE_OFF] };
        let controllers =
            Replicas::start_controller(world, "snapshot-controller", Sidecar::SnapshotController, gate).await;
        let snapshotters = Replicas::start(world, "csi-snapshotter", Sidecar::Snapshotter, &[GATE_OFF]).await;
        Ok(Snapshotting { class, controllers, snapshotters, survivors: BTreeSet::new(), deleted: BTreeSet::new() })
    }

    /// Starts again the replicas that exited on their own.
    pub fn supervise(&mut self, world: &mut World) {
        self.controllers.supervise(world);
        self.snapshotters.supervise(world);
    }

    pub fn exits(&self) -> u64 {
        self.controllers.exits + self.snapshotters.exits
    }
}

pub async fn run(
    world: &mut World,
    sizes: &Sizes,
    mix: &FaultMix,
    claims: &BTreeSet<String>,
    snapshotting: &mut Snapshotting,
) -> anyhow::Result<()> {
    world.faults_on(SNAPSHOT_METHODS, mix)?;
    let faults_before = world.faults_injected();
    let class = snapshotting.class.clone();
    let sources: Vec<&String> = claims.iter().collect();
    let window = sizes.kill_window();
    let spacing = window.mul_f64(0.7) / sizes.snapshots.max(1) as u32;
    // csi-snapshotter first, snapshot-controller half a period ahead of it.
    let mut kills = KillTurns::new(sizes, window);
    let mut restarts = Restarts::plan(sizes, Phase::Snapshot, "snapshot", window);
    let mut pause = LeaderPause::plan("snapshot", window);
    println!(
        "{} snapshot: {} VolumeSnapshots of {} claims over {:.0} s, a quarter deleted, {} more deleted together, {} \
         kills of csi-snapshotter and {} of snapshot-controller{}",
        world.clock(),
        sizes.snapshots,
        sources.len(),
        window.as_secs_f64(),
        sizes.mass_snapshots,
        kills.planned().0,
        kills.planned().1,
        restarts.planned()
    );
    let snapshots: Api<VolumeSnapshot> = Api::namespaced(world.client.clone(), world.ns());
    let (post, delete) = (PostParams::default(), DeleteParams::default());
    let started = Instant::now();
    let mut created = 0usize;
    let mut deleted = BTreeSet::new();
    let mut to_delete = Deletions::default();
    let mut progress = ProgressEvery::default();
    let mut mass = MassDeletion::create(&snapshots, &class, &sources, sizes.mass_snapshots).await?;
    loop {
        let now = started.elapsed();
        while created < sizes.snapshots && !sources.is_empty() && spacing * created as u32 <= now {
            let name = format!("s-{created:04}");
            let snapshot: VolumeSnapshot = serde_json::from_value(json!({
                "apiVersion": "snapshot.storage.k8s.io/v1",
                "kind": "VolumeSnapshot",
                "metadata": {"name": name},
                "spec": {
                    "volumeSnapshotClassName": class,
                    "source": {"persistentVolumeClaimName": sources[created % sources.len()]},
                },
            }))?;
            with_retries(&format!("create snapshot {name}"), &[409], || snapshots.create(&post, &snapshot)).await?;
            if picked(created, 0.25) {
                to_delete.soon(now, created, name);
            } else {
                snapshotting.survivors.insert(name);
            }
            created += 1;
        }
        while let Some(name) = to_delete.next_due(started.elapsed()) {
            with_retries(&format!("delete snapshot {name}"), &[404], || snapshots.delete(&name, &delete)).await?;
            deleted.insert(name);
        }
        kills.kill_due(now, world, &mut snapshotting.snapshotters, &mut snapshotting.controllers);
        restarts.run_due(now, world).await?;
        pause.run_due(now, world, &mut snapshotting.snapshotters).await;
        // Ready ones are what #1446 deletes; kills may hold their making up past the window, so wait a while.
        let give_up = now >= window + sizes.quiesce_timeout / 2;
        mass.delete_when_ready(world, &snapshots, give_up, &mut deleted).await?;
        snapshotting.supervise(world);
        if progress.due() {
            println!(
                "{} snapshot: created {created}/{}, deleted {}, ready {}, kills {}, faults {}",
                world.clock(),
                sizes.snapshots,
                deleted.len(),
                count_ready(readiness(&snapshots, snapshot_ready).await),
                world.kills,
                world.faults_injected()
            );
        }
        let finished = (created == sizes.snapshots || sources.is_empty()) && to_delete.is_empty();
        if finished && kills.done() && restarts.done() && pause.done() && mass.deleted && now >= window {
            break;
        }
        tokio::time::sleep(TICK).await;
    }
    snapshotting.deleted.extend(deleted.iter().cloned());
    let survivors = snapshotting.survivors.clone();
    let supervise = |world: &mut World| snapshotting.supervise(world);
    settle(world, "snapshot", sizes.quiesce_timeout, supervise, || async {
        Some(unsettled(&readiness(&snapshots, snapshot_ready).await?, &survivors, &deleted))
    })
    .await;
    let faults = world.faults_injected() - faults_before;
    println!("{} snapshot: done: {created} created, {} deleted, {faults} faults", world.clock(), deleted.len());
    Ok(())
}

/// The snapshots made together to be deleted together.
struct MassDeletion {
    names: BTreeSet<String>,
    deleted: bool,
    /// When readiness was last looked at.
    looked: Option<Instant>,
}

impl MassDeletion {
    /// Creates `count` labelled snapshots of `sources` in turn, all at once.
    async fn create(
        snapshots: &Api<VolumeSnapshot>,
        class: &str,
        sources: &[&String],
        count: usize,
    ) -> anyhow::Result<MassDeletion> {
        let names: BTreeSet<String> = (0..count).map(|i| format!("m-{i:04}")).collect();
        if sources.is_empty() {
            return Ok(MassDeletion { names: BTreeSet::new(), deleted: true, looked: None });
        }
        let post = PostParams::default();
        let results: Vec<anyhow::Result<()>> = futures::stream::iter(names.iter().enumerate())
            .map(|(i, name)| {
                let post = &post;
                async move {
                    let snapshot: VolumeSnapshot = serde_json::from_value(json!({
                        "apiVersion": "snapshot.storage.k8s.io/v1",
                        "kind": "VolumeSnapshot",
                        "metadata": {"name": name, "labels": {MASS_LABEL.0: MASS_LABEL.1}},
                        "spec": {
                            "volumeSnapshotClassName": class,
                            "source": {"persistentVolumeClaimName": sources[i % sources.len()]},
                        },
                    }))?;
                    let what = format!("create snapshot {name}");
                    with_retries(&what, &[409], || snapshots.create(post, &snapshot)).await.map(|_| ())
                }
            })
            .buffer_unordered(16)
            .collect()
            .await;
        results.into_iter().collect::<anyhow::Result<()>>()?;
        Ok(MassDeletion { deleted: names.is_empty(), names, looked: None })
    }

    /// Once every one is ready, or `anyway`, deletes them all with one delete-collection (looked at every 2 s).
    async fn delete_when_ready(
        &mut self,
        world: &World,
        snapshots: &Api<VolumeSnapshot>,
        anyway: bool,
        deleted: &mut BTreeSet<String>,
    ) -> anyhow::Result<()> {
        if self.deleted || self.looked.is_some_and(|t| t.elapsed() < Duration::from_secs(2)) {
            return Ok(());
        }
        self.looked = Some(Instant::now());
        let Some(present) = readiness(snapshots, snapshot_ready).await else { return Ok(()) };
        let ready = self.names.iter().filter(|name| present.get(*name) == Some(&true)).count();
        if ready < self.names.len() && !anyway {
            return Ok(());
        }
        let selector = ListParams::default().labels(&format!("{}={}", MASS_LABEL.0, MASS_LABEL.1));
        let delete = DeleteParams::default();
        with_retries("delete the mass snapshots", &[404], || snapshots.delete_collection(&delete, &selector)).await?;
        println!("{} snapshot: {} snapshots deleted at once ({ready} of them ready)", world.clock(), self.names.len());
        deleted.extend(self.names.iter().cloned());
        self.deleted = true;
        Ok(())
    }
}

impl Snapshotting {
    /// Deletes every VolumeSnapshot of the run and waits (bounded) for them to go, while the snapshot sidecars
    /// still run: on a shared cluster nothing of the run may stay behind with a finalizer no one removes. Group
    /// snapshots go first (group.rs), taking their members with them.
    pub async fn clean_up(&mut self, world: &World) {
        delete_all::<VolumeSnapshot>(world).await;
        let _ =
            Api::<VolumeSnapshotClass>::all(world.client.clone()).delete(&self.class, &DeleteParams::default()).await;
        self.snapshotters.stop();
        self.controllers.stop();
    }
}

/// Deletes every object of kind `K` in the run's namespace and waits for them to go: as long as their number keeps
/// falling (the snapshot sidecars work through them at their API rate limit), at most 5 minutes, and at most 30 s
/// without progress.
pub async fn delete_all<K>(world: &World)
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    const STALL: Duration = Duration::from_secs(30);
    let api: Api<K> = Api::namespaced(world.client.clone(), world.ns());
    let _ = api.delete_collection(&DeleteParams::default(), &Default::default()).await;
    let deadline = Instant::now() + Duration::from_secs(300);
    let (mut left, mut progress_at) = (Vec::new(), Instant::now());
    while Instant::now() < deadline && progress_at.elapsed() < STALL {
        match api.list(&Default::default()).await {
            Ok(list) if list.items.is_empty() => return,
            Ok(list) if left.is_empty() || list.items.len() < left.len() => {
                (left, progress_at) = (list.items, Instant::now())
            }
            Ok(list) => left = list.items,
            Err(_) => {}
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let named: Vec<String> =
        left.iter().take(10).map(|o| format!("{} (finalizers {:?})", o.name_any(), o.finalizers())).collect();
    println!("chaos: clean-up: {} {} still there: {}", left.len(), K::kind(&()), named.join(", "));
}

/// A class of kind `K` (VolumeSnapshotClass, VolumeGroupSnapshotClass) of the run's driver, policy Delete, named
/// after the namespace.
pub async fn driver_class<K>(world: &World) -> anyhow::Result<String>
where
    K: Resource<Scope = ClusterResourceScope, DynamicType = ()> + Clone + DeserializeOwned + Serialize + Debug,
{
    let name = world.ns().to_string();
    let class: K = serde_json::from_value(json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "metadata": {"name": name},
        "driver": world.driver,
        "deletionPolicy": "Delete",
    }))?;
    Api::<K>::all(world.client.clone()).create(&PostParams::default(), &class).await?;
    Ok(name)
}

/// The objects of kind `K` in the run's namespace by name, each with whether it is ready (None while the API
/// server is away).
pub async fn readiness<K>(api: &Api<K>, ready: impl Fn(&K) -> bool) -> Option<BTreeMap<String, bool>>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let list = api.list(&Default::default()).await.ok()?;
    Some(list.items.iter().map(|object| (object.name_any(), ready(object))).collect())
}

/// How many of `readiness` are ready.
pub fn count_ready(readiness: Option<BTreeMap<String, bool>>) -> usize {
    readiness.map_or(0, |objects| objects.values().filter(|ready| **ready).count())
}

fn snapshot_ready(snapshot: &VolumeSnapshot) -> bool {
    snapshot.status.as_ref().and_then(|s| s.ready_to_use) == Some(true)
}
