//! Phase provision: claims created at a steady pace and a share of them deleted while being provisioned (every
//! other one of those created again under its name once it is gone), another share deleted the moment it is
//! Bound, under CreateVolume/DeleteVolume faults, with the two csi-provisioner replicas SIGKILLed in turn, the
//! plugin restarted once and (on a cluster of its own) kube-apiserver restarted once.
//!
//! A claim deleted as soon as it is Bound races the PV binder's write of it, which queues it at the provisioner
//! again, with the release of its PV and the deletion of its volume (external-provisioner#1469: a sync that
//! still sees the claim Pending provisions it a second time). A claim created again under the name of one being
//! cleaned up shares its name, not its UID, with the in-flight work of the first.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use csi_sidecars_e2e::chaos::fault_plan::{FaultMix, PROVISION_METHODS};
use csi_sidecars_e2e::chaos::sizes::{Phase, Sizes, kill_times, picked};
use csi_sidecars_e2e::processes::rbac::Sidecar;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PersistentVolumeClaimSpec, VolumeResourceRequirements};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::Api;
use kube::api::{DeleteParams, ObjectMeta, PostParams};

use crate::world::{Deletions, LeaderPause, ProgressEvery, Replicas, Restarts, World, with_retries};

/// The size every claim starts with.
pub const CLAIM_SIZE: &str = "1Mi";
const TICK: Duration = Duration::from_millis(100);

/// What the phase leaves behind.
pub struct Provisioned {
    pub class: String,
    /// Claims the run did not delete.
    pub survivors: BTreeSet<String>,
    pub replicas: Replicas,
}

/// When each disturbance of the phase happens, in seconds from its start.
struct Timeline {
    window: Duration,
    spacing: Duration,
    kills: Vec<Duration>,
    plugin_restart: Duration,
}

impl Timeline {
    fn of(sizes: &Sizes) -> Timeline {
        let window = sizes.kill_window().max(Duration::from_millis(200) * sizes.claims as u32);
        // Claims are all created in the first 80 % of the window, so deletions and kills still meet work in flight.
        let spacing = window.mul_f64(0.8) / sizes.claims.max(1) as u32;
        let kills = kill_times(sizes.kill_every, window, Duration::ZERO);
        Timeline { window, spacing, kills, plugin_restart: window.mul_f64(0.35) }
    }
}

pub async fn run(world: &mut World, sizes: &Sizes, mix: &FaultMix, first_class: &str) -> anyhow::Result<Provisioned> {
    let class = storage_class(world).await?;
    let mut replicas =
        Replicas::start(world, "csi-provisioner", Sidecar::Provisioner, &["--immediate-topology=false"]).await;
    world.faults_on(PROVISION_METHODS, mix)?;

    let timeline = Timeline::of(sizes);
    let mut restarts = Restarts::plan(sizes, Phase::Provision, "provision", timeline.window);
    let mut pause = LeaderPause::plan("provision", timeline.window);
    println!(
        "{} provision: {} claims over {:.0} s, {} kills, plugin restart at {:.0} s{}",
        world.clock(),
        sizes.claims,
        timeline.window.as_secs_f64(),
        timeline.kills.len(),
        timeline.plugin_restart.as_secs_f64(),
        restarts.planned(),
    );
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(world.client.clone(), world.ns());
    let (post, delete) = (PostParams::default(), DeleteParams::default());
    let started = Instant::now();
    let mut created = 0;
    // Claims not deleted mid-flight so far.
    let mut kept = 0;
    let mut to_delete = Deletions::default();
    let mut survivors = BTreeSet::new();
    let mut deleted = 0;
    let mut churn = Churn::default();
    let mut kills = timeline.kills.iter().peekable();
    let mut plugin_restarted = false;
    let mut progress = ProgressEvery::default();
    loop {
        let now = started.elapsed();
        while created < sizes.claims && timeline.spacing * created as u32 <= now {
            let name = format!("c-{created:04}");
            let claim = claim(&name, &class, first_class);
            with_retries(&format!("create claim {name}"), &[409], || claims.create(&post, &claim)).await?;
            if picked(created, sizes.delete_share) {
                // Deleted 0.3 to 3 s after its creation: before, during or just after CreateVolume.
                let delay = Duration::from_millis(300 + (created as u64 * 733) % 2700);
                to_delete.after(now, delay, created, name);
            } else {
                if picked(kept, sizes.delete_bound_share) {
                    churn.when_bound.insert(name);
                } else {
                    survivors.insert(name);
                }
                kept += 1;
            }
            created += 1;
        }
        while let Some(name) = to_delete.next_due(started.elapsed()) {
            with_retries(&format!("delete claim {name}"), &[404], || claims.delete(&name, &delete)).await?;
            if picked(deleted, 0.5) {
                churn.recreate.insert(name);
            }
            deleted += 1;
        }
        churn.step(&claims, &class, first_class, &mut survivors).await;
        if kills.next_if(|t| **t <= now).is_some() {
            replicas.kill_next(world);
        }
        if !plugin_restarted && now >= timeline.plugin_restart {
            plugin_restarted = true;
            println!("{} provision: kill -9 of the plugin, started again on the same socket and state", world.clock());
            world.restart_plugin().await;
        }
        restarts.run_due(now, world).await?;
        pause.run_due(now, world, &mut replicas).await;
        replicas.supervise(world);
        if progress.due() {
            let bound = count_bound(&claims).await;
            println!(
                "{} provision: created {created}/{}, deleted {deleted} mid-flight and {} once bound, recreated {}, \
                 bound {bound}, kills {}, restarts {}, faults {}",
                world.clock(),
                sizes.claims,
                churn.deleted_bound,
                churn.recreated,
                world.kills,
                world.restarts,
                world.faults_injected()
            );
        }
        let finished = created == sizes.claims && to_delete.is_empty() && kills.peek().is_none();
        // A claim that is never gone is not created again: it stays missing, a lost claim.
        let recreated = churn.recreate.is_empty() || now >= timeline.window + sizes.quiesce_timeout;
        if finished && now >= timeline.window && plugin_restarted && restarts.done() && pause.done() && recreated {
            break;
        }
        tokio::time::sleep(TICK).await;
    }
    survivors.extend(std::mem::take(&mut churn.recreate));
    // The next phase changes Bound claims: give the survivors time to bind, faults still on, no more kills; the
    // claims to delete once Bound go meanwhile.
    let waiting = Instant::now();
    let mut bound = count_bound(&claims).await;
    while (bound < survivors.len() || !churn.when_bound.is_empty()) && waiting.elapsed() < sizes.quiesce_timeout {
        replicas.supervise(world);
        churn.step(&claims, &class, first_class, &mut survivors).await;
        if progress.due() {
            println!("{} provision: waiting for the survivors: bound {bound}/{}", world.clock(), survivors.len());
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        bound = count_bound(&claims).await;
    }
    // One never Bound is a lost claim.
    survivors.extend(std::mem::take(&mut churn.when_bound));
    println!(
        "{} provision: done: {created} created, {deleted} deleted mid-flight ({} created again), {} deleted once \
         bound, {bound}/{} survivors bound, {} kills so far",
        world.clock(),
        churn.recreated,
        churn.deleted_bound,
        survivors.len(),
        world.kills
    );
    Ok(Provisioned { class, survivors, replicas })
}

/// The provision phase's churn beside the mid-flight deletions: claims deleted the moment they are Bound, and
/// claims created again under the name of one deleted mid-flight once it is gone.
#[derive(Default)]
struct Churn {
    when_bound: BTreeSet<String>,
    recreate: BTreeSet<String>,
    deleted_bound: usize,
    recreated: usize,
    last: Option<Instant>,
}

impl Churn {
    /// At most once a second: deletes the claims to delete that are Bound now, and creates again those whose
    /// namesake is gone (they become survivors). The API server may be away: what fails is tried next time.
    async fn step(
        &mut self,
        claims: &Api<PersistentVolumeClaim>,
        class: &str,
        attributes_class: &str,
        survivors: &mut BTreeSet<String>,
    ) {
        if self.last.is_some_and(|t| t.elapsed() < Duration::from_secs(1)) {
            return;
        }
        self.last = Some(Instant::now());
        if !self.when_bound.is_empty()
            && let Ok(list) = claims.list(&Default::default()).await
        {
            for claim in list.items.iter().filter(|c| is_bound(c)) {
                let name = claim.metadata.name.clone().unwrap_or_default();
                if !self.when_bound.contains(&name) {
                    continue;
                }
                match claims.delete(&name, &DeleteParams::default()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(status)) if status.code == 404 => {}
                    Err(_) => continue,
                }
                self.when_bound.remove(&name);
                self.deleted_bound += 1;
            }
        }
        for name in self.recreate.clone() {
            // AlreadyExists while the first one is still there (its finalizers, or the provisioner's cleanup).
            if claims.create(&PostParams::default(), &claim(&name, class, attributes_class)).await.is_ok() {
                self.recreate.remove(&name);
                survivors.insert(name);
                self.recreated += 1;
            }
        }
    }
}

fn is_bound(claim: &PersistentVolumeClaim) -> bool {
    claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound")
}

/// The phase's StorageClass: Immediate, Delete, expandable.
async fn storage_class(world: &World) -> anyhow::Result<String> {
    let name = world.ns().to_string();
    let class = StorageClass {
        metadata: ObjectMeta { name: Some(name.clone()), ..Default::default() },
        provisioner: world.driver.clone(),
        reclaim_policy: Some("Delete".into()),
        volume_binding_mode: Some("Immediate".into()),
        allow_volume_expansion: Some(true),
        ..Default::default()
    };
    Api::<StorageClass>::all(world.client.clone()).create(&PostParams::default(), &class).await?;
    Ok(name)
}

fn claim(name: &str, class: &str, attributes_class: &str) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            // Block: an expansion is then finished by csi-resizer alone (a file system would wait for a kubelet).
            volume_mode: Some("Block".into()),
            storage_class_name: Some(class.into()),
            volume_attributes_class_name: Some(attributes_class.into()),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([("storage".to_string(), Quantity(CLAIM_SIZE.into()))])),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Bound claims right now (0 while the API server is away).
async fn count_bound(claims: &Api<PersistentVolumeClaim>) -> usize {
    let Ok(list) = claims.list(&Default::default()).await else { return 0 };
    list.items.iter().filter(|c| is_bound(c)).count()
}
