//! Phase snapshots: VolumeSnapshots of surviving claims created at a steady pace and a quarter of them deleted
//! soon after (some while being cut), under CreateSnapshot/DeleteSnapshot faults, with the two csi-snapshotter
//! replicas SIGKILLed in turn. snapshot-controller runs as one process, not killed.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use csi_sidecars_e2e::chaos::fault_plan::{FaultMix, SNAPSHOT_METHODS};
use csi_sidecars_e2e::chaos::sizes::{Sizes, picked};
use csi_sidecars_e2e::{Process, Sidecar, binary, install_snapshot_crds};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;
use snapshot_api::{VolumeSnapshot, VolumeSnapshotClass};

use crate::world::{ProgressEvery, Replicas, World, sidecar_verbosity, with_retries};

const TICK: Duration = Duration::from_millis(100);

/// What the phase leaves running, and what must go at the end of the run.
pub struct Snapshotting {
    pub class: String,
    pub controller: Process,
    pub replicas: Replicas,
}

pub async fn run(
    world: &mut World,
    sizes: &Sizes,
    mix: &FaultMix,
    survivors: &BTreeSet<String>,
) -> anyhow::Result<Snapshotting> {
    install_snapshot_crds(&world.client).await;
    let class = snapshot_class(world).await?;
    let controller_kubeconfig = world.identity(Sidecar::SnapshotController).await;
    let args = vec![
        controller_kubeconfig,
        "--retry-interval-start=500ms".to_string(),
        "--retry-interval-max=5s".to_string(),
        sidecar_verbosity(),
    ];
    let controller = world.scenario.start("snapshot-controller", &binary("snapshot-controller"), &args);
    let mut replicas = Replicas::start(world, "csi-snapshotter", Sidecar::Snapshotter, &[]).await;
    world.faults_on(SNAPSHOT_METHODS, mix)?;

    let sources: Vec<&String> = survivors.iter().collect();
    let window = sizes.kill_every.mul_f64(sizes.min_kills.max(1) as f64);
    let spacing = window.mul_f64(0.7) / sizes.snapshots.max(1) as u32;
    let kills: Vec<Duration> = (1..).map(|k| sizes.kill_every * k).take_while(|t| *t <= window).collect();
    println!(
        "{} snapshot: {} VolumeSnapshots of {} claims over {:.0} s, a quarter deleted, {} kills",
        world.clock(),
        sizes.snapshots,
        sources.len(),
        window.as_secs_f64(),
        kills.len()
    );
    let snapshots: Api<VolumeSnapshot> = Api::namespaced(world.client.clone(), world.ns());
    let (post, delete) = (PostParams::default(), DeleteParams::default());
    let started = Instant::now();
    let mut created = 0usize;
    let mut deleted = 0usize;
    let mut to_delete: BTreeMap<Duration, String> = BTreeMap::new();
    let mut kills = kills.into_iter().peekable();
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
                let delay = Duration::from_millis(200 + (created as u64 * 911) % 3800);
                to_delete.insert(now + delay + Duration::from_nanos(created as u64), name);
            }
            created += 1;
        }
        while let Some(entry) = to_delete.first_entry() {
            if *entry.key() > started.elapsed() {
                break;
            }
            let name = entry.remove();
            with_retries(&format!("delete snapshot {name}"), &[404], || snapshots.delete(&name, &delete)).await?;
            deleted += 1;
        }
        if kills.next_if(|t| *t <= now).is_some() {
            replicas.kill_next(world);
        }
        replicas.supervise(world);
        if progress.due() {
            println!(
                "{} snapshot: created {created}/{}, deleted {deleted}, ready {}, kills {}, faults {}",
                world.clock(),
                sizes.snapshots,
                count_ready(&snapshots).await,
                world.kills,
                world.faults_injected()
            );
        }
        let finished = (created == sizes.snapshots || sources.is_empty()) && to_delete.is_empty();
        if finished && kills.peek().is_none() && now >= window {
            break;
        }
        tokio::time::sleep(TICK).await;
    }
    println!("{} snapshot: done: {created} created, {deleted} deleted", world.clock());
    Ok(Snapshotting { class, controller, replicas })
}

impl Snapshotting {
    /// Deletes every VolumeSnapshot of the run and waits (bounded) for them to go, while the snapshot sidecars
    /// still run: on a shared cluster nothing of the run may stay behind with a finalizer no one removes.
    pub async fn clean_up(&mut self, world: &World) {
        let snapshots: Api<VolumeSnapshot> = Api::namespaced(world.client.clone(), world.ns());
        let _ = snapshots.delete_collection(&DeleteParams::default(), &Default::default()).await;
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            match snapshots.list(&Default::default()).await {
                Ok(list) if list.items.is_empty() => break,
                _ => tokio::time::sleep(Duration::from_secs(1)).await,
            }
        }
        let _ =
            Api::<VolumeSnapshotClass>::all(world.client.clone()).delete(&self.class, &DeleteParams::default()).await;
        self.replicas.stop();
        self.controller.kill9();
    }
}

/// A Delete VolumeSnapshotClass of the run's driver.
async fn snapshot_class(world: &World) -> anyhow::Result<String> {
    let name = world.ns().to_string();
    let class: VolumeSnapshotClass = serde_json::from_value(json!({
        "apiVersion": "snapshot.storage.k8s.io/v1",
        "kind": "VolumeSnapshotClass",
        "metadata": {"name": name},
        "driver": world.driver,
        "deletionPolicy": "Delete",
    }))?;
    Api::<VolumeSnapshotClass>::all(world.client.clone()).create(&PostParams::default(), &class).await?;
    Ok(name)
}

async fn count_ready(snapshots: &Api<VolumeSnapshot>) -> usize {
    let Ok(list) = snapshots.list(&Default::default()).await else { return 0 };
    list.items.iter().filter(|s| s.status.as_ref().and_then(|s| s.ready_to_use) == Some(true)).count()
}
