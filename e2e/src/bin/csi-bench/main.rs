//! `make bench`: our sidecars against upstream's Go binaries of the same sidecars, side by side on the e2e control
//! plane with the hostpath plugin, alternating ours/upstream, at upstream's default client limits and at raised
//! ones, each scenario beside its ceiling (a bare client doing the same API work under the same limits).
//! Writes target/bench/results.json, results.md (the table) and chart.svg. Sizes and rounds: see `Config`.

mod attach;
mod bound;
mod cached;
mod expand;
mod group;
mod idle;
mod limiter;
mod measure;
mod modify;
mod provision;
mod quiet;
mod report;
mod scale;
mod sidecar;
mod snapshot;
mod tracker;

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::OnceLock;
use std::time::Instant;

use crate::report::results::BARE;
use crate::report::{Results, Run, Summary, chart, proc_sample, table};
use anyhow::Context;
use csi_sidecars_e2e::control_plane::cluster::{Cluster, repo_root};

use crate::cached::Setup;
use crate::sidecar::{Kind, Limits, Side};

/// A number from the environment, or `default`.
pub fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

static START: OnceLock<Instant> = OnceLock::new();

/// One progress line, stamped with the time since the bench started.
pub fn progress(line: &str) {
    let elapsed = START.get_or_init(Instant::now).elapsed().as_secs();
    eprintln!("[bench {:>2}:{:02}] {line}", elapsed / 60, elapsed % 60);
}

pub fn ticks() -> u64 {
    static TICKS: OnceLock<u64> = OnceLock::new();
    *TICKS.get_or_init(proc_sample::ticks_per_second)
}

/// Audit-log counts as `"verb resource"` keys.
pub fn counts_by_kind(counts: &BTreeMap<(String, String), usize>) -> BTreeMap<String, usize> {
    counts.iter().map(|((verb, resource), n)| (format!("{verb} {resource}"), *n)).collect()
}

/// Sizes (objects per round) and rounds, from BENCH_* variables; at upstream's default limits (5 requests/s) a
/// round takes about a second per claim per side, so those rounds are smaller. One round by default: every scenario,
/// the attacher's included, in under 25 minutes (two took 22 minutes without the attacher's); BENCH_ROUNDS=2 runs
/// each again with the other side first.
struct Config {
    scenarios: Vec<String>,
    rounds: usize,
    attach: (usize, usize),
    burst: (attach::Burst, attach::Burst),
    provision: (usize, usize),
    expand: (usize, usize),
    modify: (usize, usize),
    snapshot: (usize, usize),
    groups: (usize, usize),
    group_members: usize,
    idle: usize,
    /// New claims provisioned among the idle objects (`provision_cached`, at raised limits only: it is there for the
    /// memory of a process among many cached objects, and at default limits it would measure the limiter again).
    cached: usize,
    /// `scale`: claims, PVs, pods and snapshot contents each, and the new claims provisioned among them.
    scale: (usize, usize),
}

impl Config {
    fn from_env() -> Config {
        let scenarios = std::env::var("BENCH_SCENARIOS").unwrap_or_else(|_| {
            "provision,expand,modify,snapshot,group,idle,attach,attach_during_detach_burst".to_string()
        });
        Config {
            scenarios: scenarios.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect(),
            rounds: env_number("BENCH_ROUNDS", 1),
            attach: (env_number("BENCH_ATTACHMENTS_AT_DEFAULT_LIMITS", 50), env_number("BENCH_ATTACHMENTS", 1000)),
            burst: (
                attach::Burst {
                    detaches: env_number("BENCH_BURST_DETACHES_AT_DEFAULT_LIMITS", 500),
                    attaches: env_number("BENCH_BURST_ATTACHES_AT_DEFAULT_LIMITS", 10),
                    unpublish_ms: env_number("BENCH_BURST_UNPUBLISH_MS", 1000) as u64,
                },
                attach::Burst {
                    detaches: env_number("BENCH_BURST_DETACHES", 500),
                    attaches: env_number("BENCH_BURST_ATTACHES", 50),
                    unpublish_ms: env_number("BENCH_BURST_UNPUBLISH_MS", 1000) as u64,
                },
            ),
            provision: (
                env_number("BENCH_PROVISION_CLAIMS_AT_DEFAULT_LIMITS", 50),
                env_number("BENCH_PROVISION_CLAIMS", 1000),
            ),
            expand: (env_number("BENCH_EXPAND_CLAIMS_AT_DEFAULT_LIMITS", 20), env_number("BENCH_EXPAND_CLAIMS", 200)),
            modify: (env_number("BENCH_MODIFY_CLAIMS_AT_DEFAULT_LIMITS", 20), env_number("BENCH_MODIFY_CLAIMS", 200)),
            snapshot: (env_number("BENCH_SNAPSHOTS_AT_DEFAULT_LIMITS", 10), env_number("BENCH_SNAPSHOTS", 200)),
            groups: (env_number("BENCH_GROUPS_AT_DEFAULT_LIMITS", 2), env_number("BENCH_GROUPS", 20)),
            group_members: env_number("BENCH_GROUP_MEMBERS", 5),
            idle: env_number("BENCH_IDLE_OBJECTS", 10_000),
            cached: env_number("BENCH_CACHED_CLAIMS", 200),
            scale: (env_number("BENCH_SCALE_OBJECTS", 50_000), env_number("BENCH_SCALE_CLAIMS", 1000)),
        }
    }

    fn size(pair: (usize, usize), limits: &Limits) -> usize {
        if limits.name == Limits::DEFAULT.name { pair.0 } else { pair.1 }
    }
}

/// Every run so far, by (scenario, side, limits).
#[derive(Default)]
struct Runs(BTreeMap<(String, String, String), Vec<Run>>);

impl Runs {
    fn record(&mut self, scenario: &str, side: &str, limits: &Limits, run: anyhow::Result<Run>) {
        match run {
            Ok(run) => {
                progress(&format!(
                    "{scenario} {side} {}: {:.2}/s, {} objects in {:.1} s",
                    limits.name,
                    run.objects as f64 / run.seconds.max(1e-9),
                    run.objects,
                    run.seconds
                ));
                self.0.entry((scenario.into(), side.into(), limits.name.into())).or_default().push(run);
            }
            Err(err) => progress(&format!("{scenario} {side} {}: FAILED: {err:#}", limits.name)),
        }
    }

    fn results(&self) -> Results {
        let mut results = with_ceilings();
        for ((scenario, side, limits), runs) in &self.0 {
            results.insert(scenario, side, limits, Summary::of(runs));
        }
        results.relate_to_ceilings();
        results
    }
}

fn out_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| repo_root().join("target"));
    target.join("bench")
}

/// No results yet, but which scenario is the ceiling of which.
fn with_ceilings() -> Results {
    let mut results = Results::default();
    results.ceilings.insert("provision".into(), "ceiling".into());
    results.ceilings.insert("expand".into(), "expand_ceiling".into());
    results.ceilings.insert("modify".into(), "modify_ceiling".into());
    results.ceilings.insert("snapshot".into(), "snapshot_ceiling".into());
    results.ceilings.insert("group".into(), "group_ceiling".into());
    results.ceilings.insert("attach".into(), "attach_ceiling".into());
    results
}

/// BENCH_RENDER=1: the table and chart written again from the JSON of an earlier run (same BENCH_OUTPUT), with no
/// cluster and nothing measured: a newer chart for an older run.
fn render_again() -> anyhow::Result<()> {
    let [json, ..] = output_names();
    let path = out_dir().join(json);
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let mut results = with_ceilings();
    results.read_json(&text).with_context(|| format!("parsing {}", path.display()))?;
    write(&results)?;
    progress(&format!("wrote {} again from {}", out_dir().display(), path.display()));
    Ok(())
}

/// The file names a run writes: `results.json`, `results.md` and `chart.svg`, or with BENCH_OUTPUT=<name> (the
/// scale run's `scale`) `<name>.json`, `<name>.md` and `<name>.svg`, so that one run does not overwrite another's.
fn output_names() -> [String; 3] {
    match std::env::var("BENCH_OUTPUT") {
        Ok(name) if !name.is_empty() => [format!("{name}.json"), format!("{name}.md"), format!("{name}.svg")],
        _ => ["results.json".into(), "results.md".into(), "chart.svg".into()],
    }
}

fn write(results: &Results) -> anyhow::Result<()> {
    let dir = out_dir();
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let [json, markdown, svg] = output_names();
    std::fs::write(dir.join(json), serde_json::to_string_pretty(&results.to_json())? + "\n")?;
    std::fs::write(dir.join(markdown), table::markdown(results) + "\n" + &table::requests_by_kind(results))?;
    std::fs::write(dir.join(svg), chart::svg(results))?;
    Ok(())
}

/// Ours first in odd rounds, upstream first in even ones, so neither always runs on a warmer control plane.
fn sides(round: usize) -> [Side; 2] {
    if round % 2 == 1 { [Side::Ours, Side::Upstream] } else { [Side::Upstream, Side::Ours] }
}

/// The sidecars of `idle_combined_all` and `idle_scale_combined`: one process with everything a controller pod runs
/// that caches claims, PVs, pods or contents.
const ALL_THREE: [Kind; 3] = [Kind::Provisioner, Kind::Resizer, Kind::Snapshotter];

const KNOWN: &str = "provision, expand, modify, snapshot, group, idle, scale, attach, attach_during_detach_burst";

type RoundFuture<'a> = Pin<Box<dyn Future<Output = anyhow::Result<Run>> + 'a>>;

/// What a scenario runs in one round at one limit setting: its ceiling (recorded under `ceiling`), then each side.
struct Comparison<'a> {
    ceiling: &'static str,
    /// The round's size in words, for the progress lines.
    size: String,
    how: How<'a>,
}

/// How a round's ceiling and sides run.
enum How<'a> {
    /// A world each: one after another, or at once when the client limiter bounds every side.
    Apart { ceiling: Box<dyn Fn() -> RoundFuture<'a> + 'a>, side: Box<dyn Fn(Side) -> RoundFuture<'a> + 'a> },
    /// A world each, no ceiling (what is measured has no bare-client equivalent).
    SidesOnly(Box<dyn Fn(Side) -> RoundFuture<'a> + 'a>),
    /// One after another in one world ([`snapshot::Round`]): snapshot-controller acts on every world's objects.
    OneWorld(Box<dyn Fn([Side; 2], Step) -> OneWorldFuture<'a> + 'a>),
}

type OneWorldFuture<'a> = Pin<Box<dyn Future<Output = snapshot::Round> + 'a>>;

/// Announces the steps of one round at one limit setting: `<scenario> round r/R: <who>, <size> at <limits> limits`.
pub struct Step {
    head: String,
    tail: String,
}

impl Step {
    pub fn announce(&self, who: &str) {
        progress(&format!("{}: {who}, {}", self.head, self.tail));
    }
}

impl<'a> Comparison<'a> {
    fn of(name: &str, config: &Config, limits: &'a Limits) -> Option<Comparison<'a>> {
        let comparison = match name {
            "provision" => {
                let n = Config::size(config.provision, limits);
                Comparison {
                    ceiling: "ceiling",
                    size: format!("{n} claims"),
                    how: How::Apart {
                        ceiling: Box::new(move || Box::pin(provision::ceiling(limits, n))),
                        side: Box::new(move |side| Box::pin(provision::provision(side, limits, n))),
                    },
                }
            }
            "expand" => {
                let n = Config::size(config.expand, limits);
                Comparison {
                    ceiling: "expand_ceiling",
                    size: format!("{n} expansions"),
                    how: How::Apart {
                        ceiling: Box::new(move || Box::pin(expand::ceiling(limits, n))),
                        side: Box::new(move |side| Box::pin(expand::expand(side, limits, n))),
                    },
                }
            }
            "modify" => {
                let n = Config::size(config.modify, limits);
                Comparison {
                    ceiling: "modify_ceiling",
                    size: format!("{n} modifications"),
                    how: How::Apart {
                        ceiling: Box::new(move || Box::pin(modify::ceiling(limits, n))),
                        side: Box::new(move |side| Box::pin(modify::modify(side, limits, n))),
                    },
                }
            }
            "snapshot" => {
                let n = Config::size(config.snapshot, limits);
                Comparison {
                    ceiling: "snapshot_ceiling",
                    size: format!("{n} snapshots"),
                    how: How::OneWorld(Box::new(move |sides, step| Box::pin(snapshot::round(limits, n, sides, step)))),
                }
            }
            "group" => {
                let shape = group::Shape { groups: Config::size(config.groups, limits), members: config.group_members };
                Comparison {
                    ceiling: "group_ceiling",
                    size: format!("{} groups of {}", shape.groups, shape.members),
                    how: How::OneWorld(Box::new(move |sides, step| Box::pin(group::round(limits, shape, sides, step)))),
                }
            }
            "attach" => {
                let n = Config::size(config.attach, limits);
                Comparison {
                    ceiling: "attach_ceiling",
                    size: format!("{n} VolumeAttachments"),
                    how: How::Apart {
                        ceiling: Box::new(move || Box::pin(attach::ceiling(limits, n))),
                        side: Box::new(move |side| Box::pin(attach::attach(side, limits, n))),
                    },
                }
            }
            "attach_during_detach_burst" => {
                let burst = if limits.name == Limits::DEFAULT.name { config.burst.0 } else { config.burst.1 };
                Comparison {
                    ceiling: "",
                    size: format!(
                        "{} attaches behind {} detaches of {} ms",
                        burst.attaches, burst.detaches, burst.unpublish_ms
                    ),
                    how: How::SidesOnly(Box::new(move |side| {
                        Box::pin(attach::during_detach_burst(side, limits, burst))
                    })),
                }
            }
            _ => return None,
        };
        Some(comparison)
    }
}

async fn scenario(name: &str, config: &Config, runs: &mut Runs) {
    let all_limits = [Limits::DEFAULT, Limits::raised()];
    if name == "idle" {
        return idle_rounds(config, runs).await;
    }
    if name == "scale" {
        let (objects, claims) = config.scale;
        if let Some(note) = scale::scale_round(objects, claims, runs).await {
            // The world's note (write times, the control plane's memory) as a row of its own.
            let seconds = note.iter().filter(|(k, _)| k.ends_with("_write_s")).map(|(_, v)| v).sum();
            let run = Run { objects, seconds, details: note, ..Default::default() };
            runs.record("scale_world", BARE, &Limits::DEFAULT, Ok(run));
        }
        return;
    }
    for round in 1..=config.rounds {
        for limits in &all_limits {
            let Some(comparison) = Comparison::of(name, config, limits) else {
                return progress(&format!("unknown scenario {name:?} (known: {KNOWN})"));
            };
            let step = Step {
                head: format!("{name} round {round}/{}", config.rounds),
                tail: format!("{} at {} limits", comparison.size, limits.name),
            };
            let (run_ceiling, run_side) = match &comparison.how {
                How::Apart { ceiling, side } => (ceiling, side),
                How::SidesOnly(side) => {
                    for side_of_round in sides(round) {
                        step.announce(side_of_round.name());
                        runs.record(name, side_of_round.name(), limits, side(side_of_round).await);
                    }
                    continue;
                }
                How::OneWorld(one_world) => {
                    let round = one_world(sides(round), step).await;
                    runs.record(comparison.ceiling, BARE, limits, round.ceiling);
                    for (side, run) in round.sides {
                        runs.record(name, side.name(), limits, run);
                    }
                    continue;
                }
            };
            if limits.limiter_bound() {
                // A few requests per second each: the three worlds do not compete for the machine, so they run at
                // the same time (on one control plane, under the same load) rather than one after the other.
                step.announce("ceiling, ours and upstream at once");
                let [first, second] = sides(round);
                let (ceiling, first_run, second_run) = futures::join!(run_ceiling(), run_side(first), run_side(second));
                runs.record(comparison.ceiling, BARE, limits, ceiling);
                runs.record(name, first.name(), limits, first_run);
                runs.record(name, second.name(), limits, second_run);
                continue;
            }
            step.announce("ceiling");
            runs.record(comparison.ceiling, BARE, limits, run_ceiling().await);
            for side in sides(round) {
                step.announce(side.name());
                runs.record(name, side.name(), limits, run_side(side).await);
            }
        }
    }
}

/// `idle`: the objects are made once (the slow part), then every round starts each sidecar among them; then
/// `provision_cached` provisions new claims among them.
async fn idle_rounds(config: &Config, runs: &mut Runs) {
    progress(&format!("idle: making {} Bound claims and PVs", config.idle));
    let mut world = match idle::IdleWorld::new(config.idle).await {
        Ok(world) => world,
        Err(err) => return progress(&format!("idle: FAILED: {err:#}")),
    };
    let class = match world.provisioning_class().await {
        Ok(class) => class,
        Err(err) => return progress(&format!("idle: FAILED: {err:#}")),
    };
    quiet::settle().await;
    for round in 1..=config.rounds {
        for limits in &[Limits::DEFAULT, Limits::raised()] {
            let step = |scenario: &str, who: &str| {
                progress(&format!("{scenario} round {round}/{}: {who} at {} limits", config.rounds, limits.name))
            };
            for side in sides(round) {
                for (scenario, kind) in [("idle", Kind::Provisioner), ("idle_resizer", Kind::Resizer)] {
                    step(scenario, side.name());
                    runs.record(scenario, side.name(), limits, world.run(kind, side, limits).await);
                }
                if side == Side::Ours {
                    let pair = [Kind::Provisioner, Kind::Resizer];
                    for (scenario, kinds) in [("idle_combined", &pair[..]), ("idle_combined_all", &ALL_THREE[..])] {
                        step(scenario, "ours");
                        let name = format!("{scenario}-{}", limits.name);
                        runs.record(scenario, side.name(), limits, world.run_combined(&name, limits, kinds).await);
                    }
                }
            }
            if limits.limiter_bound() {
                continue;
            }
            let count = config.cached;
            for side in sides(round) {
                step("provision_cached", &format!("{} provisioner and resizer, {count} new claims", side.name()));
                let run = world.provision_cached(Setup::Separate(side), limits, &class, count).await;
                runs.record("provision_cached", side.name(), limits, run);
                if side == Side::Ours {
                    step("provision_cached_combined", &format!("ours in one process, {count} new claims"));
                    let run = world.provision_cached(Setup::Combined, limits, &class, count).await;
                    runs.record("provision_cached_combined", side.name(), limits, run);
                }
            }
        }
    }
    world.remove_provisioning_class(&class).await;
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    if std::env::var_os("BENCH_RENDER").is_some() {
        return render_again();
    }
    let config = Config::from_env();
    let raised = Limits::raised();
    progress(&format!(
        "scenarios {:?}, {} rounds; limits: default qps 5 burst 10 default workers, raised qps {} burst {} workers {:?}",
        config.scenarios, config.rounds, raised.qps, raised.burst, raised.workers
    ));
    // Blocking (runs e2e/cluster.sh up, which reuses a healthy cluster); before any scenario needs it.
    tokio::task::spawn_blocking(|| {
        Cluster::shared();
    })
    .await?;
    let mut runs = Runs::default();
    for name in &config.scenarios {
        scenario(name, &config, &mut runs).await;
        write(&runs.results())?;
    }
    let results = runs.results();
    write(&results)?;
    println!("{}", table::markdown(&results));
    println!("API requests per object, by verb and resource:\n{}", table::requests_by_kind(&results));
    progress(&format!("wrote {}", out_dir().display()));
    Ok(())
}
