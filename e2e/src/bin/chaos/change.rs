//! Phase expand + modify: a share of the surviving claims grows, another share moves from one
//! VolumeAttributesClass to the other (and some back), under ControllerExpandVolume/ControllerModifyVolume faults,
//! with the two csi-resizer replicas SIGKILLed in turn, and (on a cluster of its own) etcd and kube-apiserver
//! restarted once each.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use csi_sidecars_e2e::chaos::fault_plan::{CHANGE_METHODS, FaultMix};
use csi_sidecars_e2e::chaos::invariants::{Change, quantity_bytes};
use csi_sidecars_e2e::chaos::sizes::{Phase, Sizes, kill_times, picked};
use csi_sidecars_e2e::processes::rbac::Sidecar;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::VolumeAttributesClass;
use kube::Api;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::world::{LeaderPause, ProgressEvery, Replicas, Restarts, World, with_retries};

/// The size expanded claims ask for.
pub const EXPANDED_SIZE: &str = "2Mi";
const TICK: Duration = Duration::from_millis(100);
/// How long after its move to the other class a claim that goes back is moved back.
const MOVE_BACK_AFTER: Duration = Duration::from_secs(2);

/// The two VolumeAttributesClasses claims move between.
pub struct AttributeClasses {
    pub silver: String,
    pub gold: String,
}

impl AttributeClasses {
    pub async fn create(world: &World) -> anyhow::Result<AttributeClasses> {
        let api: Api<VolumeAttributesClass> = Api::all(world.client.clone());
        let make = async |short: &str, iops: &str| -> anyhow::Result<String> {
            let name = format!("{}-{short}", world.ns());
            let class = VolumeAttributesClass {
                metadata: ObjectMeta { name: Some(name.clone()), ..Default::default() },
                driver_name: world.driver.clone(),
                parameters: Some(BTreeMap::from([("iops".to_string(), iops.to_string())])),
            };
            api.create(&PostParams::default(), &class).await?;
            Ok(name)
        };
        Ok(AttributeClasses { silver: make("silver", "1000").await?, gold: make("gold", "3000").await? })
    }
}

/// One planned write to a claim.
enum Step {
    Expand(String),
    Move(String, String),
}

pub async fn run(
    world: &mut World,
    sizes: &Sizes,
    mix: &FaultMix,
    classes: &AttributeClasses,
) -> anyhow::Result<(BTreeMap<String, Change>, Replicas)> {
    let mut replicas = Replicas::start(world, "csi-resizer", Sidecar::Resizer, &[]).await;
    world.faults_on(CHANGE_METHODS, mix)?;

    // Only claims Bound now can change; a claim still being provisioned keeps its size and class.
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(world.client.clone(), world.ns());
    let list_params = Default::default();
    let list = with_retries("list claims", &[], || claims.list(&list_params)).await?.map(|l| l.items);
    let bound: Vec<String> = list
        .unwrap_or_default()
        .iter()
        .filter(|c| c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound"))
        .filter_map(|c| c.metadata.name.clone())
        .collect();
    let mut changes: BTreeMap<String, Change> = BTreeMap::new();
    let mut steps: VecDeque<Step> = VecDeque::new();
    let size_bytes = quantity_bytes(EXPANDED_SIZE);
    for (i, name) in bound.iter().enumerate() {
        if picked(i, sizes.change_share) {
            steps.push_back(Step::Expand(name.clone()));
            changes.entry(name.clone()).or_default().size_bytes = size_bytes;
        }
        // Counted from the other end, so some claims are both expanded and moved.
        if picked(bound.len() - 1 - i, sizes.change_share) {
            steps.push_back(Step::Move(name.clone(), classes.gold.clone()));
            changes.entry(name.clone()).or_default().class = Some(classes.gold.clone());
        }
    }
    let window = sizes.kill_window();
    let spacing = window.mul_f64(0.7) / steps.len().max(1) as u32;
    let kills = kill_times(sizes.kill_every, window, Duration::ZERO);
    let mut restarts = Restarts::plan(sizes, Phase::Change, "change", window);
    let mut pause = LeaderPause::plan("change", window);
    println!(
        "{} change: {} of {} bound claims expanded to {EXPANDED_SIZE}, {} moved {} -> {} (every other one back), {} kills over {:.0} s{}",
        world.clock(),
        steps.iter().filter(|s| matches!(s, Step::Expand(_))).count(),
        bound.len(),
        steps.iter().filter(|s| matches!(s, Step::Move(..))).count(),
        classes.silver,
        classes.gold,
        kills.len(),
        window.as_secs_f64(),
        restarts.planned()
    );

    let started = Instant::now();
    let mut done = 0usize;
    let mut moves = 0usize;
    let mut back: BTreeMap<Duration, String> = BTreeMap::new();
    let mut kills = kills.into_iter().peekable();
    let mut progress = ProgressEvery::default();
    let params = PatchParams::default();
    loop {
        let now = started.elapsed();
        while spacing * done as u32 <= now
            && let Some(step) = steps.pop_front()
        {
            let (name, patch) = match &step {
                Step::Expand(name) => (name, json!({"spec": {"resources": {"requests": {"storage": EXPANDED_SIZE}}}})),
                Step::Move(name, class) => {
                    if picked(moves, 0.5) {
                        back.insert(now + MOVE_BACK_AFTER + Duration::from_nanos(moves as u64), name.clone());
                        changes.entry(name.clone()).or_default().class = Some(classes.silver.clone());
                    }
                    moves += 1;
                    (name, json!({"spec": {"volumeAttributesClassName": class}}))
                }
            };
            let patch = Patch::Merge(&patch);
            with_retries(&format!("change claim {name}"), &[], || claims.patch(name, &params, &patch)).await?;
            done += 1;
        }
        while let Some(entry) = back.first_entry() {
            if *entry.key() > started.elapsed() {
                break;
            }
            let name = entry.remove();
            let patch = Patch::Merge(json!({"spec": {"volumeAttributesClassName": classes.silver}}));
            with_retries(&format!("move claim {name} back"), &[], || claims.patch(&name, &params, &patch)).await?;
        }
        if kills.next_if(|t| *t <= now).is_some() {
            replicas.kill_next(world);
        }
        restarts.run_due(now, world).await?;
        pause.run_due(now, world, &mut replicas).await;
        replicas.supervise(world);
        if progress.due() {
            println!(
                "{} change: {done} writes, {} moves back pending, kills {}, faults {}",
                world.clock(),
                back.len(),
                world.kills,
                world.faults_injected()
            );
        }
        if steps.is_empty()
            && back.is_empty()
            && kills.peek().is_none()
            && restarts.done()
            && pause.done()
            && now >= window
        {
            break;
        }
        tokio::time::sleep(TICK).await;
    }
    println!("{} change: done: {done} writes, {} claims with a change to apply", world.clock(), changes.len());
    Ok((changes, replicas))
}
