//! Phase snapshots: VolumeSnapshots of surviving claims created at a steady pace and a quarter of them deleted
//! soon after (some while being cut), under CreateSnapshot/DeleteSnapshot faults, with the two csi-snapshotter
//! replicas and the two snapshot-controller replicas SIGKILLed in turn; then the phase settles under faults until
//! every surviving snapshot is ready and every deleted one gone.
//!
//! The snapshot sidecars ([`Snapshotting`]) serve the group phase too: snapshot-controller makes the group and
//! member contents and the member VolumeSnapshots, csi-snapshotter makes the members' contents ready and frees
//! them once their group is deleted.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::time::{Duration, Instant};

use csi_sidecars_e2e::chaos::fault_plan::{FaultMix, SNAPSHOT_METHODS};
use csi_sidecars_e2e::chaos::invariants::unsettled;
use csi_sidecars_e2e::chaos::sizes::{Sizes, picked};
use csi_sidecars_e2e::group_world::GATE_OFF;
use csi_sidecars_e2e::{Sidecar, install_snapshot_crds};
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;
use snapshot_api::{VolumeSnapshot, VolumeSnapshotClass};

use crate::world::{Deletions, KillTurns, ProgressEvery, Replicas, World, settle, with_retries};

const TICK: Duration = Duration::from_millis(100);

/// The snapshot sidecars of the snapshot and group phases, two replicas each, and the run's VolumeSnapshotClass;
/// what must go at the end of the run.
pub struct Snapshotting {
    pub class: String,
    pub controllers: Replicas,
    pub snapshotters: Replicas,
    /// The VolumeSnapshots the snapshot phase created and did not delete.
    pub survivors: BTreeSet<String>,
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
        Ok(Snapshotting { class, controllers, snapshotters, survivors: BTreeSet::new() })
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
    println!(
        "{} snapshot: {} VolumeSnapshots of {} claims over {:.0} s, a quarter deleted, {} kills of csi-snapshotter \
         and {} of snapshot-controller",
        world.clock(),
        sizes.snapshots,
        sources.len(),
        window.as_secs_f64(),
        kills.planned().0,
        kills.planned().1
    );
    let snapshots: Api<VolumeSnapshot> = Api::namespaced(world.client.clone(), world.ns());
    let (post, delete) = (PostParams::default(), DeleteParams::default());
    let started = Instant::now();
    let mut created = 0usize;
    let mut deleted = BTreeSet::new();
    let mut to_delete = Deletions::default();
    let mut progress = ProgressEvery::default();
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
        if finished && kills.done() && now >= window {
            break;
        }
        tokio::time::sleep(TICK).await;
    }
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
    let (mut left, mut progress_at) = (usize::MAX, Instant::now());
    while Instant::now() < deadline && progress_at.elapsed() < STALL {
        match api.list(&Default::default()).await {
            Ok(list) if list.items.is_empty() => return,
            Ok(list) if list.items.len() < left => (left, progress_at) = (list.items.len(), Instant::now()),
            _ => {}
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    println!("chaos: clean-up: {left} {} still there", K::kind(&()));
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
