//! Phase groups: VolumeGroupSnapshots of labelled groups of 3 to 5 Bound claims (each group its own label value,
//! e2e/src/chaos/group_plan.rs) created at a steady pace and a quarter of them deleted soon after (some while being
//! cut), under CreateVolumeGroupSnapshot/DeleteVolumeGroupSnapshot/GetVolumeGroupSnapshot faults, with the two
//! csi-group-snapshotter replicas and the two snapshot-controller replicas SIGKILLed in turn. snapshot-controller
//! makes the group and member contents and the member VolumeSnapshots, so its kills are where a group could leak
//! or lose a member; kube-apiserver is restarted once (on a cluster of its own). The phase then settles under faults
//! until every surviving group is ready and every deleted one gone.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use csi_sidecars_e2e::chaos::fault_plan::{FaultMix, GROUP_METHODS};
use csi_sidecars_e2e::chaos::group_plan::{GroupPlan, plan_groups};
use csi_sidecars_e2e::chaos::invariants::unsettled;
use csi_sidecars_e2e::chaos::sizes::{Phase, Sizes, picked};
use csi_sidecars_e2e::processes::rbac::Sidecar;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use snapshot_api::{VolumeGroupSnapshot, VolumeGroupSnapshotClass};

use crate::snapshot::{Snapshotting, count_ready, delete_all, driver_class, readiness};
use crate::world::{Deletions, KillTurns, LeaderPause, ProgressEvery, Replicas, Restarts, World, settle, with_retries};

const TICK: Duration = Duration::from_millis(100);

/// What the phase leaves running and expects, and what must go at the end of the run.
pub struct Grouping {
    pub class: String,
    pub replicas: Replicas,
    /// The group snapshots the run did not delete, with the number of claims each took.
    pub survivors: BTreeMap<String, usize>,
    /// The group snapshots the run deleted.
    pub deleted: BTreeSet<String>,
}

pub async fn run(
    world: &mut World,
    sizes: &Sizes,
    mix: &FaultMix,
    claims: &BTreeSet<String>,
    snapshotting: &mut Snapshotting,
) -> anyhow::Result<Grouping> {
    let class = driver_class::<VolumeGroupSnapshotClass>(world).await?;
    // csi-snapshotter's rules, under an account of its own; the group gate is implied by the binary.
    let mut replicas = Replicas::start(world, "csi-group-snapshotter", Sidecar::Snapshotter, &[]).await;
    world.faults_on(GROUP_METHODS, mix)?;
    let faults_before = world.faults_injected();

    let bound = bound_claims(world, claims).await?;
    let plans = plan_groups(&bound, sizes.groups);
    let window = sizes.kill_window();
    let spacing = window.mul_f64(0.7) / plans.len().max(1) as u32;
    // csi-group-snapshotter first, snapshot-controller half a period ahead of it.
    let mut kills = KillTurns::new(sizes, window);
    let mut restarts = Restarts::plan(sizes, Phase::Group, "group", window);
    let mut pause = LeaderPause::plan("group", window);
    println!(
        "{} group: {} VolumeGroupSnapshots of 3-5 of {} bound claims over {:.0} s, a quarter deleted, {} kills of \
         csi-group-snapshotter and {} of snapshot-controller{}",
        world.clock(),
        plans.len(),
        bound.len(),
        window.as_secs_f64(),
        kills.planned().0,
        kills.planned().1,
        restarts.planned()
    );
    let groups: Api<VolumeGroupSnapshot> = Api::namespaced(world.client.clone(), world.ns());
    let delete = DeleteParams::default();
    let started = Instant::now();
    let (mut survivors, mut deleted) = (BTreeMap::new(), BTreeSet::new());
    let mut created = 0usize;
    let mut to_delete = Deletions::default();
    let mut progress = ProgressEvery::default();
    loop {
        let now = started.elapsed();
        while created < plans.len() && spacing * created as u32 <= now {
            let plan = &plans[created];
            label_claims(world, plan).await?;
            create_group(&groups, plan, &class).await?;
            if picked(created, 0.25) {
                to_delete.soon(now, created, plan.name.clone());
            } else {
                survivors.insert(plan.name.clone(), plan.claims.len());
            }
            created += 1;
        }
        while let Some(name) = to_delete.next_due(started.elapsed()) {
            with_retries(&format!("delete group snapshot {name}"), &[404], || groups.delete(&name, &delete)).await?;
            deleted.insert(name);
        }
        kills.kill_due(now, world, &mut replicas, &mut snapshotting.controllers);
        restarts.run_due(now, world).await?;
        pause.run_due(now, world, &mut replicas).await;
        replicas.supervise(world);
        snapshotting.supervise(world);
        if progress.due() {
            println!(
                "{} group: created {created}/{}, deleted {}, ready {}, kills {}, faults {}",
                world.clock(),
                plans.len(),
                deleted.len(),
                count_ready(readiness(&groups, group_ready).await),
                world.kills,
                world.faults_injected()
            );
        }
        let finished = created == plans.len() && to_delete.is_empty();
        if finished && kills.done() && restarts.done() && pause.done() && now >= window {
            break;
        }
        tokio::time::sleep(TICK).await;
    }
    let supervise = |world: &mut World| {
        replicas.supervise(world);
        snapshotting.supervise(world);
    };
    settle(world, "group", sizes.quiesce_timeout, supervise, || async {
        Some(unsettled(&readiness(&groups, group_ready).await?, survivors.keys(), &deleted))
    })
    .await;
    let faults = world.faults_injected() - faults_before;
    println!("{} group: done: {created} created, {} deleted, {faults} faults", world.clock(), deleted.len());
    Ok(Grouping { class, replicas, survivors, deleted })
}

impl Grouping {
    /// Deletes every VolumeGroupSnapshot of the run and waits (bounded) for them to go, while the snapshot
    /// sidecars still run, before the single snapshots go (Snapshotting::clean_up): a group takes its members.
    pub async fn clean_up(&mut self, world: &World) {
        delete_all::<VolumeGroupSnapshot>(world).await;
        let classes = Api::<VolumeGroupSnapshotClass>::all(world.client.clone());
        let _ = classes.delete(&self.class, &DeleteParams::default()).await;
        self.replicas.stop();
    }
}

/// The claims of `survivors` that are Bound now, by name: a group of a claim still Pending would be refused.
async fn bound_claims(world: &World, survivors: &BTreeSet<String>) -> anyhow::Result<Vec<String>> {
    let api: Api<PersistentVolumeClaim> = Api::namespaced(world.client.clone(), world.ns());
    let params = ListParams::default();
    let list = with_retries("list claims", &[], || api.list(&params)).await?;
    let mut bound: Vec<String> = list
        .into_iter()
        .flat_map(|l| l.items)
        .filter(|c| c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound"))
        .filter_map(|c| c.metadata.name)
        .filter(|name| survivors.contains(name))
        .collect();
    bound.sort();
    Ok(bound)
}

/// Puts the group's label on each of its claims (a merge patch: the labels of other rounds stay).
async fn label_claims(world: &World, plan: &GroupPlan) -> anyhow::Result<()> {
    let api: Api<PersistentVolumeClaim> = Api::namespaced(world.client.clone(), world.ns());
    let patch = Patch::Merge(json!({"metadata": {"labels": {&plan.label_key: &plan.label_value}}}));
    let params = PatchParams::default();
    for claim in &plan.claims {
        with_retries(&format!("label claim {claim}"), &[], || api.patch(claim, &params, &patch)).await?;
    }
    Ok(())
}

async fn create_group(groups: &Api<VolumeGroupSnapshot>, plan: &GroupPlan, class: &str) -> anyhow::Result<()> {
    let group: VolumeGroupSnapshot = serde_json::from_value(json!({
        "apiVersion": "groupsnapshot.storage.k8s.io/v1",
        "kind": "VolumeGroupSnapshot",
        "metadata": {"name": plan.name},
        "spec": {
            "volumeGroupSnapshotClassName": class,
            "source": {"selector": {"matchLabels": {&plan.label_key: &plan.label_value}}},
        },
    }))?;
    let post = PostParams::default();
    with_retries(&format!("create group snapshot {}", plan.name), &[409], || groups.create(&post, &group)).await?;
    Ok(())
}

fn group_ready(group: &VolumeGroupSnapshot) -> bool {
    group.status.as_ref().and_then(|s| s.ready_to_use) == Some(true)
}
