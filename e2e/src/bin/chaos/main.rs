//! `make chaos` (docs/chaos.md): the sidecars under mixed faults against the real control plane and the
//! project's hostpath plugin, then, once quiet, the invariants: nothing leaked, nothing lost.
//!
//! Phases, each bounded in count and time, with a progress line every 10 s:
//! 1. provision (provision.rs): claims created, a share deleted mid-flight (half of those created again under their
//!    name) and a share deleted as soon as Bound, under CreateVolume/DeleteVolume faults; csi-provisioner replicas
//!    SIGKILLed in turn; the plugin restarted once;
//! 2. change (change.rs): expansions and VolumeAttributesClass moves under ControllerExpandVolume/
//!    ControllerModifyVolume faults; csi-resizer replicas SIGKILLed in turn; etcd restarted once;
//! 3. snapshot (snapshot.rs): VolumeSnapshots created and a quarter deleted, and a batch created together and
//!    deleted at once, under CreateSnapshot/DeleteSnapshot faults; csi-snapshotter and snapshot-controller replicas
//!    SIGKILLed in turn;
//! 4. group (group.rs): VolumeGroupSnapshots of labelled groups of claims created and a quarter deleted under
//!    CreateVolumeGroupSnapshot/DeleteVolumeGroupSnapshot/GetVolumeGroupSnapshot faults; csi-group-snapshotter and
//!    snapshot-controller replicas SIGKILLed in turn;
//!
//!    (kube-apiserver is restarted once in each of 1-4; 3 and 4 then settle, world.rs `settle`: faults still on,
//!    no more kills, until their work is done;)
//! 5. quiet (invariants.rs): faults off, every process up, the invariants polled until they hold or time runs out.
//!
//! The last line is `leaked volumes: N, leaked snapshots: N, orphan PVs: N, lost claims: N, lost changes: N, stale
//! journal entries: N`; the exit code is 0 only when all are 0. Sizes: `CHAOS_*` variables
//! (e2e/src/chaos/sizes.rs).

mod change;
mod group;
mod observe;
mod provision;
mod snapshot;
mod world;

use std::process::ExitCode;
use std::time::Instant;

use csi_sidecars_e2e::chaos::fault_plan::FaultMix;
use csi_sidecars_e2e::chaos::invariants::{Findings, Injected};
use csi_sidecars_e2e::chaos::sizes::{Phase, Sizes};
use csi_sidecars_e2e::control_plane::api_proxy::ApiFaults;
use k8s_openapi::api::storage::v1::{StorageClass, VolumeAttributesClass};
use kube::Api;
use kube::api::DeleteParams;

use crate::change::AttributeClasses;
use crate::group::Grouping;
use crate::observe::{Expected, quiesce};
use crate::snapshot::Snapshotting;
use crate::world::World;

/// Names shown per broken invariant.
const SHOWN: usize = 10;

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(error) => {
            eprintln!("chaos: {error:#}");
            ExitCode::from(2)
        }
    }
}

async fn run() -> anyhow::Result<bool> {
    let sizes = Sizes::from_env().map_err(anyhow::Error::msg)?;
    let mix = FaultMix::standard(sizes.hang_for);
    println!("chaos: {sizes:?}");
    let mut world = World::new(ApiFaults::standard(sizes.api_fault_share)).await?;
    println!(
        "{} chaos: namespace {}, driver {}, logs in {}",
        world.clock(),
        world.ns(),
        world.driver,
        world.scenario.dir().display()
    );
    let classes = AttributeClasses::create(&world).await?;
    let mut expected = Expected::default();

    let mut provisioned = provision::run(&mut world, &sizes, &mix, &classes.silver).await?;
    expected.survivors = provisioned.survivors.clone();
    let mut resizers = None;
    if sizes.runs(Phase::Change) {
        let (changes, replicas) = change::run(&mut world, &sizes, &mix, &classes).await?;
        expected.changes = changes;
        resizers = Some(replicas);
    }
    let mut snapshotting: Option<Snapshotting> = None;
    let mut grouping: Option<Grouping> = None;
    if sizes.runs(Phase::Snapshot) || sizes.runs(Phase::Group) {
        let mut sidecars = Snapshotting::start(&mut world, sizes.runs(Phase::Group)).await?;
        expected.snapshots = true;
        if sizes.runs(Phase::Snapshot) {
            snapshot::run(&mut world, &sizes, &mix, &provisioned.survivors, &mut sidecars).await?;
            expected.surviving_snapshots = sidecars.survivors.clone();
            expected.deleted_snapshots = sidecars.deleted.clone();
        }
        if sizes.runs(Phase::Group) {
            let groups = group::run(&mut world, &sizes, &mix, &provisioned.survivors, &mut sidecars).await?;
            expected.surviving_groups = groups.survivors.clone();
            expected.deleted_groups = groups.deleted.clone();
            grouping = Some(groups);
        }
        snapshotting = Some(sidecars);
    }

    world.faults_off()?;
    provisioned.replicas.supervise(&mut world);
    if let Some(resizers) = resizers.as_mut() {
        resizers.supervise(&mut world);
    }
    if let Some(snapshotting) = snapshotting.as_mut() {
        snapshotting.supervise(&mut world);
    }
    if let Some(grouping) = grouping.as_mut() {
        grouping.replicas.supervise(&mut world);
    }
    println!("{} quiet: faults off, every process up; waiting for the invariants", world.clock());
    let (findings, clean_at) = quiesce(&world, &expected, sizes.quiesce_timeout).await;
    let quiet = clean_at.unwrap_or_else(Instant::now).saturating_duration_since(world.last_disturbance);
    let injected = Injected {
        faults: world.faults_injected(),
        kills: world.kills,
        restarts: world.restarts,
        pauses: world.pauses,
        api_faults: world.proxy.faults_injected(),
    };
    let exits = provisioned.replicas.exits
        + resizers.as_ref().map_or(0, |r| r.exits)
        + snapshotting.as_ref().map_or(0, Snapshotting::exits)
        + grouping.as_ref().map_or(0, |g| g.replicas.exits);
    if exits > 0 {
        println!("chaos: sidecars that exited on their own and were started again: {exits}");
    }
    println!("chaos: restarts: {}", world.restarts_line());
    let answers = world.proxy.counts().into_iter().map(|(what, n)| format!("{what} {n}")).collect::<Vec<_>>();
    println!("chaos: API proxy answers: {}", answers.join(", "));
    let tally = findings.tally();
    if !tally.clean() {
        report(&findings);
    }
    println!("chaos: logs kept in {}", world.keep_logs().display());
    if let Some(grouping) = grouping.as_mut() {
        grouping.clean_up(&world).await;
    }
    if let Some(snapshotting) = snapshotting.as_mut() {
        snapshotting.clean_up(&world).await;
    }
    provisioned.replicas.stop();
    if let Some(resizers) = resizers.as_mut() {
        resizers.stop();
    }
    clean_up(&world, &provisioned.class, &classes).await;
    // Again, with what the sidecars did during the clean-up.
    world.keep_logs();
    println!("{}", injected.line(quiet));
    println!("{tally}");
    Ok(tally.clean())
}

fn report(findings: &Findings) {
    let rows = [
        ("leaked volumes", &findings.leaked_volumes),
        ("leaked snapshots", &findings.leaked_snapshots),
        ("orphan PVs", &findings.orphan_pvs),
        ("lost claims", &findings.lost_claims),
        ("lost changes", &findings.lost_changes),
        ("stale journal entries", &findings.stale_journal_entries),
        ("duplicate calls", &findings.duplicate_calls),
    ];
    for (what, names) in rows.into_iter().filter(|(_, names)| !names.is_empty()) {
        let shown: Vec<&str> = names.iter().take(SHOWN).map(String::as_str).collect();
        println!("chaos: {what}: {}{}", shown.join(", "), if names.len() > SHOWN { ", …" } else { "" });
    }
}

/// Cluster-scoped objects of the run (the namespace goes when `world` is dropped); on a shared cluster, nothing
/// of the run may stay behind.
async fn clean_up(world: &World, class: &str, classes: &AttributeClasses) {
    let params = DeleteParams::default();
    let _ = Api::<StorageClass>::all(world.client.clone()).delete(class, &params).await;
    let attributes: Api<VolumeAttributesClass> = Api::all(world.client.clone());
    for name in [&classes.silver, &classes.gold] {
        let _ = attributes.delete(name, &params).await;
    }
}
