//! The chaos run's world: one namespace, one hostpath plugin under a driver name of its own with a fault file
//! the run rewrites, sidecar replicas as ServiceAccounts with upstream's RBAC, and the counts of what was done
//! to them.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use csi_sidecars_e2e::chaos::calls::{Call, parse_calls};
use csi_sidecars_e2e::chaos::fault_plan::{FaultMix, fault_config, injected_faults};
use csi_sidecars_e2e::chaos::sizes::{Component, Phase, Sizes, control_plane_restarts, kill_times};
use csi_sidecars_e2e::control_plane::api_proxy::{ApiFaults, ApiProxy, through_proxy};
use csi_sidecars_e2e::control_plane::cluster::{Cluster, repo_root};
use csi_sidecars_e2e::control_plane::namespace::TestNamespace;
use csi_sidecars_e2e::processes::rbac::{Rules, Sidecar, SidecarIdentity};
use csi_sidecars_e2e::processes::scenario::{Process, Scenario, binary};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;

/// Leader election as in e2e/tests/leader_election.rs: short, so a killed leader is replaced within seconds.
pub const ELECTION: &[&str] = &[
    "--leader-election",
    "--leader-election-lease-duration=6s",
    "--leader-election-renew-deadline=4s",
    "--leader-election-retry-period=1s",
];
/// How long a paused leader stays stopped: past its Lease (6 s above), so the other replica takes over and acts a
/// few seconds before the first one runs again.
pub const PAUSE_FOR: Duration = Duration::from_secs(10);
/// Every sidecar's CSI call timeout; hanging calls sleep longer (Sizes::hang_for).
pub const CSI_TIMEOUT: &str = "--timeout=5s";

pub struct World {
    pub client: kube::Client,
    pub ns: TestNamespace,
    pub scenario: Scenario,
    pub driver: String,
    pub socket: PathBuf,
    state_dir: PathBuf,
    fault_file: PathBuf,
    plugin: Option<Process>,
    /// Every plugin process's log, to count the faults it injected.
    plugin_logs: Vec<Process>,
    plugin_starts: u32,
    /// Between the sidecars and kube-apiserver: their kubeconfigs name it.
    pub proxy: ApiProxy,
    /// The sidecars' ServiceAccounts; dropping one removes its ClusterRole, so they live as long as the world.
    identities: Vec<SidecarIdentity>,
    pub started: Instant,
    pub kills: u64,
    pub restarts: u64,
    pub pauses: u64,
    /// The sidecar each process the run started is, by process id, to tell who made the plugin's calls.
    pub sidecar_of: BTreeMap<u32, String>,
    /// Process ids given to two sidecar processes of the run (the kernel reuses them).
    pub reused_pids: BTreeSet<u32>,
    /// Restarts by process (plugin, kube-apiserver, etcd).
    restarts_of: BTreeMap<&'static str, u64>,
    /// When the last fault was on, or the last kill or restart happened.
    pub last_disturbance: Instant,
}

impl World {
    pub async fn new(api_faults: ApiFaults) -> anyhow::Result<World> {
        let client = Cluster::shared().client().await;
        let proxy = ApiProxy::start(Cluster::shared().kubeconfig(), api_faults).await?;
        let ns = TestNamespace::create(&client, "chaos").await;
        let driver = format!("{}.csi.e2e", ns.name());
        let scenario = Scenario::new("chaos");
        let socket = scenario.path("plugin.sock");
        let state_dir = scenario.path("plugin-state");
        let fault_file = scenario.path("faults.json");
        let mut world = World {
            client,
            ns,
            scenario,
            driver,
            socket,
            state_dir,
            fault_file,
            plugin: None,
            plugin_logs: Vec::new(),
            plugin_starts: 0,
            proxy,
            identities: Vec::new(),
            started: Instant::now(),
            kills: 0,
            restarts: 0,
            pauses: 0,
            sidecar_of: BTreeMap::new(),
            reused_pids: BTreeSet::new(),
            restarts_of: BTreeMap::new(),
            last_disturbance: Instant::now(),
        };
        world.start_plugin();
        Ok(world)
    }

    pub fn ns(&self) -> &str {
        self.ns.name()
    }

    /// Seconds since the run started, for progress lines.
    pub fn clock(&self) -> String {
        format!("[{:6.1} s]", self.started.elapsed().as_secs_f64())
    }

    fn start_plugin(&mut self) {
        self.plugin_starts += 1;
        let args = vec![
            format!("--endpoint=unix://{}", self.socket.display()),
            format!("--state-dir={}", self.state_dir.display()),
            "--node-id=e2e-node".to_string(),
            format!("--driver-name={}", self.driver),
            format!("--fault-config={}", self.fault_file.display()),
            "-v=2".to_string(),
        ];
        let name = format!("hostpath-plugin-{}", self.plugin_starts);
        let process = self.scenario.start(&name, &binary("hostpath-plugin"), &args);
        if let Some(old) = self.plugin.replace(process) {
            self.plugin_logs.push(old);
        }
    }

    /// kill -9 the plugin and start it again on the same socket and state directory.
    pub async fn restart_plugin(&mut self) {
        if let Some(plugin) = self.plugin.as_mut() {
            plugin.kill9();
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        self.start_plugin();
        self.restarts += 1;
        *self.restarts_of.entry("plugin").or_default() += 1;
        self.last_disturbance = Instant::now();
    }

    /// Restarts a control-plane process (`e2e/cluster.sh restart <name>`); returns once it is healthy again.
    pub async fn restart_control_plane(&mut self, component: Component) -> anyhow::Result<()> {
        let name = component.name();
        let status = tokio::process::Command::new("bash")
            .arg(repo_root().join("e2e/cluster.sh"))
            .args(["restart", name])
            .status()
            .await
            .with_context(|| format!("running e2e/cluster.sh restart {name}"))?;
        if !status.success() {
            bail!("e2e/cluster.sh restart {name} failed ({status})");
        }
        self.restarts += 1;
        *self.restarts_of.entry(name).or_default() += 1;
        self.last_disturbance = Instant::now();
        Ok(())
    }

    /// `plugin 1, kube-apiserver 4, etcd 1`: the restarts so far, by process.
    pub fn restarts_line(&self) -> String {
        let counts = self.restarts_of.iter().map(|(name, count)| format!("{name} {count}"));
        counts.collect::<Vec<_>>().join(", ")
    }

    /// Turns `mix` on for `methods` (the plugin re-reads the file on its next call).
    pub fn faults_on(&mut self, methods: &[&str], mix: &FaultMix) -> anyhow::Result<()> {
        self.write_faults(&fault_config(methods, mix))
    }

    /// The plugin's faults and the API proxy's off.
    pub fn faults_off(&mut self) -> anyhow::Result<()> {
        self.write_faults(&serde_json::json!({}))?;
        self.proxy.set_faults(false);
        self.last_disturbance = Instant::now();
        Ok(())
    }

    fn write_faults(&self, config: &serde_json::Value) -> anyhow::Result<()> {
        // Written aside and renamed: the plugin never reads half a file.
        let aside = self.fault_file.with_extension("json.new");
        std::fs::write(&aside, serde_json::to_vec_pretty(config)?)?;
        std::fs::rename(&aside, &self.fault_file)?;
        Ok(())
    }

    /// Faults injected so far, by every plugin process of the run.
    pub fn faults_injected(&self) -> u64 {
        self.plugin_logs.iter().chain(self.plugin.as_ref()).map(|p| injected_faults(&p.log())).sum()
    }

    /// The changing calls every plugin process of the run served, in order.
    pub fn plugin_calls(&self) -> Vec<Call> {
        self.plugin_logs.iter().chain(self.plugin.as_ref()).flat_map(|p| parse_calls(&p.log())).collect()
    }

    /// Notes that process `pid` is a replica of `sidecar`.
    fn started_sidecar(&mut self, pid: u32, sidecar: &str) {
        if self.sidecar_of.insert(pid, sidecar.to_string()).is_some() {
            self.reused_pids.insert(pid);
        }
    }

    /// A new ServiceAccount `account` with upstream's RBAC for `sidecar`; returns its `--kubeconfig` flag, a
    /// kubeconfig that reaches kube-apiserver through the API proxy.
    pub async fn identity(&mut self, account: &str, sidecar: Sidecar) -> anyhow::Result<String> {
        let identity =
            SidecarIdentity::with_rules(&self.client, self.ns(), account, Rules::of(sidecar), self.scenario.dir())
                .await;
        through_proxy(identity.kubeconfig(), &self.proxy.url())?;
        let flag = identity.kubeconfig_flag();
        self.identities.push(identity);
        Ok(flag)
    }

    /// Copies every log of the run to `target/chaos/logs` (the scenario folder goes when the run ends).
    pub fn keep_logs(&self) -> PathBuf {
        let dest = repo_root().join("target/chaos/logs");
        let _ = std::fs::remove_dir_all(&dest);
        let _ = std::fs::create_dir_all(&dest);
        if let Ok(entries) = std::fs::read_dir(self.scenario.dir()) {
            for entry in entries.flatten() {
                let path = entry.path();
                if path.extension().is_some_and(|e| e == "log")
                    && let Some(name) = path.file_name()
                {
                    let _ = std::fs::copy(&path, dest.join(name));
                }
            }
        }
        dest
    }
}

/// Two replicas of one sidecar sharing a Lease, SIGKILLed in turn and started again, and started again when they
/// exit on their own (as a kubelet would).
pub struct Replicas {
    name: &'static str,
    binary: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
    running: [Option<Process>; 2],
    /// Each slot's pod name, its leader-election identity.
    pod_names: [String; 2],
    starts: u32,
    next_victim: usize,
    /// Exits the sidecars chose (e.g. on a lost driver connection), restarted without being counted as a kill.
    pub exits: u64,
}

impl Replicas {
    /// Two replicas of the sidecar binary `name`, as a new ServiceAccount `name` with upstream's RBAC for
    /// `sidecar`, beside the world's plugin with the CSI timeout, with leader election in the world's namespace;
    /// then `extra`.
    pub async fn start(world: &mut World, name: &'static str, sidecar: Sidecar, extra: &[&str]) -> Replicas {
        let csi = [format!("--csi-address={}", world.socket.display()), CSI_TIMEOUT.to_string()];
        Self::start_with(world, name, sidecar, &csi, extra).await
    }

    /// Two replicas of a controller that talks to no driver (snapshot-controller), as [`Replicas::start`].
    pub async fn start_controller(world: &mut World, name: &'static str, sidecar: Sidecar, extra: &[&str]) -> Replicas {
        Self::start_with(world, name, sidecar, &[], extra).await
    }

    async fn start_with(
        world: &mut World,
        name: &'static str,
        sidecar: Sidecar,
        driver: &[String],
        extra: &[&str],
    ) -> Replicas {
        let mut args = driver.to_vec();
        args.extend([
            world.identity(name, sidecar).await.expect("a kubeconfig through the API proxy"),
            "--retry-interval-start=500ms".to_string(),
            "--retry-interval-max=5s".to_string(),
            format!("--leader-election-namespace={}", world.ns()),
            sidecar_verbosity(),
        ]);
        args.extend(ELECTION.iter().chain(extra).map(|a| a.to_string()));
        let env = vec![("POD_NAMESPACE".to_string(), world.ns().to_string())];
        let mut replicas = Replicas {
            name,
            binary: binary(name),
            args,
            env,
            running: [None, None],
            pod_names: Default::default(),
            starts: 0,
            next_victim: 0,
            exits: 0,
        };
        for slot in 0..2 {
            replicas.start_slot(world, slot);
        }
        replicas
    }

    fn start_slot(&mut self, world: &mut World, slot: usize) {
        self.starts += 1;
        // A new identity per start, as a Deployment's replacement pod has: a killed leader is replaced by the
        // other replica once its Lease expires, never renewed by its own successor.
        let pod_name = format!("{}-{slot}-{}", self.name, self.starts);
        let mut env: Vec<(&str, &str)> = self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        env.push(("POD_NAME", &pod_name));
        let process = world.scenario.start_with_env(&pod_name, &self.binary, &self.args, &env);
        world.started_sidecar(process.pid(), self.name);
        // The replaced handle is of a process already killed or exited; its log stays in the scenario.
        self.running[slot] = Some(process);
        self.pod_names[slot] = pod_name;
    }

    /// The slot of the replica that holds the sidecar's Lease now, if one of the running replicas does.
    async fn leader(&mut self, world: &World) -> Option<usize> {
        let leases = Api::<Lease>::namespaced(world.client.clone(), world.ns()).list(&Default::default()).await.ok()?;
        let holders: BTreeSet<String> =
            leases.items.into_iter().filter_map(|lease| lease.spec?.holder_identity).collect();
        (0..2).find(|slot| {
            holders.contains(&self.pod_names[*slot])
                && self.running[*slot].as_mut().is_some_and(|p| p.exited().is_none())
        })
    }

    /// SIGSTOPs the replica in `slot` for `hold`, then SIGCONTs it: it stops renewing its Lease, the other replica
    /// takes over, and when it runs again it must notice it no longer leads before calling the driver.
    async fn pause(&mut self, world: &mut World, slot: usize, hold: Duration) {
        let Some(pid) = self.running[slot].as_ref().map(Process::pid) else { return };
        signal(pid, "-STOP");
        tokio::time::sleep(hold).await;
        signal(pid, "-CONT");
        world.pauses += 1;
        world.last_disturbance = Instant::now();
    }

    /// SIGKILLs the next replica in turn and starts it again.
    pub fn kill_next(&mut self, world: &mut World) {
        let slot = self.next_victim;
        self.next_victim = 1 - slot;
        if let Some(process) = self.running[slot].as_mut() {
            process.kill9();
        }
        self.start_slot(world, slot);
        world.kills += 1;
        world.last_disturbance = Instant::now();
    }

    /// Starts again the replicas that exited on their own.
    pub fn supervise(&mut self, world: &mut World) {
        for slot in 0..2 {
            let exited = self.running[slot].as_mut().is_some_and(|p| p.exited().is_some());
            if exited {
                self.exits += 1;
                self.start_slot(world, slot);
            }
        }
    }

    /// SIGKILLs both replicas (the end of the run).
    pub fn stop(&mut self) {
        for process in self.running.iter_mut().flatten() {
            process.kill9();
        }
    }
}

fn signal(pid: u32, signal: &str) {
    let _ = std::process::Command::new("kill").arg(signal).arg(pid.to_string()).status();
}

/// A phase's pause of its sidecar's leader (SIGSTOP past the Lease, then SIGCONT), once, when it is due and a
/// running replica leads; given up when none does by the end of the phase's window.
pub struct LeaderPause {
    phase: &'static str,
    until: Duration,
    next_try: Duration,
    done: bool,
}

impl LeaderPause {
    /// A pause at 45 % of the phase's `window` (between its kills' turns and before its restarts).
    pub fn plan(phase: &'static str, window: Duration) -> LeaderPause {
        let at = window.mul_f64(0.45);
        LeaderPause { phase, until: window, next_try: at, done: false }
    }

    /// Pauses the leader of `replicas` if due by `now` (time from the phase's start); blocks for the pause.
    pub async fn run_due(&mut self, now: Duration, world: &mut World, replicas: &mut Replicas) {
        if self.done || now < self.next_try {
            return;
        }
        self.next_try = now + Duration::from_secs(1);
        match replicas.leader(world).await {
            Some(slot) => {
                let who = replicas.pod_names[slot].clone();
                println!("{} {}: SIGSTOP of the leader {who} for {} s", world.clock(), self.phase, PAUSE_FOR.as_secs());
                replicas.pause(world, slot, PAUSE_FOR).await;
                println!("{} {}: SIGCONT of {who}", world.clock(), self.phase);
                self.done = true;
            }
            None if now >= self.until => {
                println!("{} {}: no running replica led to be paused", world.clock(), self.phase);
                self.done = true;
            }
            None => {}
        }
    }

    pub fn done(&self) -> bool {
        self.done
    }
}

/// `-v=2`, or `-v=$CHAOS_V` to read what a sidecar did in a failed run.
pub fn sidecar_verbosity() -> String {
    format!("-v={}", std::env::var("CHAOS_V").ok().filter(|v| v.parse::<u8>().is_ok()).unwrap_or_else(|| "2".into()))
}

/// Retries an API call for up to a minute: kube-apiserver may be restarting. `done_if` names the status codes
/// that mean an earlier attempt already did the job (409 for a create, 404 for a delete).
pub async fn with_retries<T, F, Fut>(what: &str, done_if: &[u16], mut call: F) -> anyhow::Result<Option<T>>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match call().await {
            Ok(value) => return Ok(Some(value)),
            Err(kube::Error::Api(status)) if done_if.contains(&status.code) => return Ok(None),
            Err(error) if Instant::now() < deadline => {
                note_transient(what, &error);
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(error) => return Err(error).with_context(|| format!("{what}: gave up after a minute")),
        }
    }
}

/// Transient API errors are expected while kube-apiserver restarts; only the first of a burst is worth a line.
fn note_transient(what: &str, error: &kube::Error) {
    use std::sync::atomic::{AtomicU64, Ordering};
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    if LAST.swap(now, Ordering::Relaxed) + 5 < now {
        eprintln!("chaos: {what}: {error} (retrying)");
    }
}

/// A progress line at most every 10 s in a polling loop.
pub struct ProgressEvery {
    last: Instant,
}

impl Default for ProgressEvery {
    fn default() -> Self {
        ProgressEvery { last: Instant::now() }
    }
}

impl ProgressEvery {
    /// Whether the next line is due; when it is, the 10 s start again.
    pub fn due(&mut self) -> bool {
        let due = self.last.elapsed() >= Duration::from_secs(10);
        if due {
            self.last = Instant::now();
        }
        due
    }
}

/// Objects a phase deletes, each at its own time from the phase's start, so that deletions meet work in flight.
#[derive(Default)]
pub struct Deletions {
    /// By due time; the object's index, added in nanoseconds, keeps two equal times apart.
    due: BTreeMap<Duration, String>,
}

impl Deletions {
    /// Deletes `name`, the `index`th object of the phase, `delay` after `now`.
    pub fn after(&mut self, now: Duration, delay: Duration, index: usize, name: String) {
        self.due.insert(now + delay + Duration::from_nanos(index as u64), name);
    }

    /// Deletes `name` 0.2 to 4 s after `now` (spread by `index`): before, during or just after its creation's
    /// calls to the driver.
    pub fn soon(&mut self, now: Duration, index: usize, name: String) {
        self.after(now, Duration::from_millis(200 + (index as u64 * 911) % 3800), index, name);
    }

    /// The next name due at `now`, if any.
    pub fn next_due(&mut self, now: Duration) -> Option<String> {
        let entry = self.due.first_entry()?;
        (*entry.key() <= now).then(|| entry.remove())
    }

    pub fn is_empty(&self) -> bool {
        self.due.is_empty()
    }
}

/// The kills of a phase with two sidecars to kill: each every `CHAOS_KILL_EVERY` s, the second half a period
/// ahead of the first, so they take turns and each is killed as often.
pub struct KillTurns {
    first: VecDeque<Duration>,
    second: VecDeque<Duration>,
}

impl KillTurns {
    pub fn new(sizes: &Sizes, window: Duration) -> KillTurns {
        KillTurns {
            first: kill_times(sizes.kill_every, window, Duration::ZERO).into(),
            second: kill_times(sizes.kill_every, window, sizes.kill_every / 2).into(),
        }
    }

    /// How many kills of the first and of the second sidecar are planned.
    pub fn planned(&self) -> (usize, usize) {
        (self.first.len(), self.second.len())
    }

    /// SIGKILLs a replica of the sidecar whose turn has come by `now`.
    pub fn kill_due(&mut self, now: Duration, world: &mut World, first: &mut Replicas, second: &mut Replicas) {
        if self.first.front().is_some_and(|t| *t <= now) {
            self.first.pop_front();
            first.kill_next(world);
        }
        if self.second.front().is_some_and(|t| *t <= now) {
            self.second.pop_front();
            second.kill_next(world);
        }
    }

    pub fn done(&self) -> bool {
        self.first.is_empty() && self.second.is_empty()
    }
}

/// After a phase's creations and kills: faults stay on and nothing more is killed until the phase's work is done
/// (`unsettled` counts nothing left; None while it cannot tell) or `within` runs out, so the work still in flight
/// meets the faults too rather than the quiet phase. `supervise` starts again what exits meanwhile.
pub async fn settle<F, Fut>(
    world: &mut World,
    phase: &str,
    within: Duration,
    mut supervise: impl FnMut(&mut World),
    mut unsettled: F,
) where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<usize>>,
{
    let started = Instant::now();
    let mut progress = ProgressEvery::default();
    loop {
        supervise(world);
        let left = unsettled().await;
        if left == Some(0) {
            println!("{} {phase}: settled under faults in {:.0} s", world.clock(), started.elapsed().as_secs_f64());
            return;
        }
        let left = left.map_or_else(|| "?".to_string(), |n| n.to_string());
        if started.elapsed() >= within {
            println!("{} {phase}: {left} objects still unsettled; on to the next phase", world.clock());
            return;
        }
        if progress.due() {
            println!("{} {phase}: settling under faults, {left} objects left", world.clock());
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The control-plane restarts a phase has still to do (e2e/src/chaos/sizes.rs, `control_plane_restarts`).
pub struct Restarts {
    phase: &'static str,
    due: VecDeque<(Duration, Component)>,
}

impl Restarts {
    pub fn plan(sizes: &Sizes, phase: Phase, name: &'static str, window: Duration) -> Restarts {
        Restarts { phase: name, due: control_plane_restarts(sizes, phase, window).into() }
    }

    /// `, etcd restart at 20 s, kube-apiserver restart at 40 s`, for the phase's first line.
    pub fn planned(&self) -> String {
        self.due.iter().map(|(at, c)| format!(", {} restart at {:.0} s", c.name(), at.as_secs_f64())).collect()
    }

    /// Restarts what is due by `now` (time from the phase's start).
    pub async fn run_due(&mut self, now: Duration, world: &mut World) -> anyhow::Result<()> {
        while self.due.front().is_some_and(|(at, _)| *at <= now) {
            let Some((_, component)) = self.due.pop_front() else { break };
            let name = component.name();
            println!("{} {}: restarting {name}", world.clock(), self.phase);
            world.restart_control_plane(component).await?;
            println!("{} {}: {name} is back", world.clock(), self.phase);
        }
        Ok(())
    }

    pub fn done(&self) -> bool {
        self.due.is_empty()
    }
}
