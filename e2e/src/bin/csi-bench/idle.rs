//! `idle` (csi-provisioner) and `idle_resizer`: a sidecar started among N Bound claims and PVs that need nothing;
//! its time until its caches are filled (as its log says) and its peak RSS a few seconds later:
//! what caching every claim and PV costs. `idle_combined`: ours only, `csi-sidecars --sidecars=provisioner,resizer`
//! the same way, one process whose claim and PV caches the two share, against the sum of the two above;
//! `idle_combined_all`: the same with the snapshotter too (no snapshot contents among the objects: what its loops
//! and its content caches cost on their own).

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

use crate::report::{ProcSample, Run};
use csi_sidecars_e2e::control_plane::snapshot_crds::install_snapshot_crds;
use csi_sidecars_e2e::processes::rbac::{Rules, Sidecar, SidecarIdentity};
use csi_sidecars_e2e::processes::scenario::{Process, binary};
use csi_sidecars_e2e::worlds::driver::DriverWorld;
use csi_sidecars_e2e::worlds::resizer::ResizerWorld;

use crate::progress;
use crate::sidecar::{Kind, Limits, Side, Start, args, combined_ready};

/// How long after its caches are filled the sidecar's memory is read (the first pass over every object is done).
const SETTLE: Duration = Duration::from_secs(2);

/// The objects of one round, shared by every sidecar run of the round.
pub struct IdleWorld {
    pub world: ResizerWorld,
    pub provisioner: SidecarIdentity,
    /// The ServiceAccount of the combined process: the provisioner's and the resizer's rules together.
    pub combined: SidecarIdentity,
    /// The ServiceAccount of `csi-sidecars --sidecars=provisioner,resizer,snapshotter`.
    pub combined_all: SidecarIdentity,
    pub objects: usize,
}

impl IdleWorld {
    pub async fn new(objects: usize) -> anyhow::Result<IdleWorld> {
        let mut world = crate::bound::world("bench-idle").await;
        let started = Instant::now();
        let set = crate::bound::ClaimSet { count: objects, ..Default::default() };
        crate::bound::bound_claims_directly(&mut world, &set).await?;
        progress(&format!("  {objects} Bound claims and PVs made in {:.1} s", started.elapsed().as_secs_f64()));
        let provisioner =
            SidecarIdentity::create(&world.client, world.ns(), Sidecar::Provisioner, world.scenario.dir()).await;
        let (client, ns, dir) = (&world.client, world.ns(), world.scenario.dir());
        let union = Rules::union(&[Sidecar::Provisioner, Sidecar::Resizer]);
        let combined = SidecarIdentity::with_rules(client, ns, "csi-sidecars", union, dir).await;
        install_snapshot_crds(client).await;
        let union = Rules::union(&[Sidecar::Provisioner, Sidecar::Resizer, Sidecar::Snapshotter]);
        let combined_all = SidecarIdentity::with_rules(client, ns, "csi-sidecars-all", union, dir).await;
        Ok(IdleWorld { world, provisioner, combined, combined_all, objects })
    }

    /// One sidecar of `kind` for `side` at `limits`, started and measured.
    pub async fn run(&mut self, kind: Kind, side: Side, limits: &Limits) -> anyhow::Result<Run> {
        let name = format!("{}-{}", side.name(), limits.name);
        let (mut process, started) = startup(self.start_one(&name, kind, side, limits)).await?;
        tokio::time::sleep(SETTLE).await;
        Ok(measured(&mut process, &started, self.objects))
    }

    /// Ours only: the sidecars `kinds` (the provisioner and the resizer, or those and the snapshotter) in one
    /// `csi-sidecars` process, with the flags each gets alone.
    pub async fn run_combined(&mut self, name: &str, limits: &Limits, kinds: &[Kind]) -> anyhow::Result<Run> {
        let (mut process, started) = startup(self.start_combined(name, limits, kinds)).await?;
        tokio::time::sleep(SETTLE).await;
        Ok(measured(&mut process, &started, self.objects))
    }

    /// `csi-sidecars --sidecars=<kinds>` (the provisioner and the resizer, or those and the snapshotter) under the
    /// log name `name`, as the combined ServiceAccount of those sidecars, with the flags each gets alone; the process
    /// once every loop says its caches are filled, and how long that took.
    pub async fn start_combined(
        &mut self,
        name: &str,
        limits: &Limits,
        kinds: &[Kind],
    ) -> anyhow::Result<(Process, Duration)> {
        let IdleWorld { world, combined, combined_all, .. } = self;
        let identity = if kinds.contains(&Kind::Snapshotter) { combined_all } else { combined };
        let DriverWorld { scenario, socket, ns, .. } = &mut world.base;
        let sidecars: Vec<&str> = kinds.iter().map(|kind| kind.sidecar_name()).collect();
        let mut flags = vec![format!("--sidecars={}", sidecars.join(","))];
        flags.extend(args(Kind::Provisioner, limits, socket, identity.kubeconfig_flag()));
        if let Some(workers) = limits.workers {
            flags.push(format!("--workers={workers}"));
        }
        let started = Instant::now();
        let env = [("POD_NAMESPACE", ns.name())];
        let process = scenario.start_with_env(name, &binary("csi-sidecars"), &flags, &env);
        let ready = combined_ready(&process, kinds, started).await?;
        Ok((process, ready))
    }

    /// The `kind` sidecar of `side` under the log name `name`, as its own ServiceAccount; the process once its caches
    /// are filled, and how long that took.
    pub async fn start_one(
        &mut self,
        name: &str,
        kind: Kind,
        side: Side,
        limits: &Limits,
    ) -> anyhow::Result<(Process, Duration)> {
        let IdleWorld { world, provisioner, .. } = self;
        let DriverWorld { scenario, socket, ns, identity: resizer, .. } = &mut world.base;
        let identity = if kind == Kind::Provisioner { &*provisioner } else { &*resizer };
        let start = Start { socket: socket.as_path(), identity, namespace: ns.name(), extra: &[] };
        start.run(scenario, name, side, kind, limits).await
    }
}

/// A sidecar's start until its caches were filled: how long it took, and the CPU seconds the sidecar and the control
/// plane (kube-apiserver, etcd, kube-controller-manager) spent meanwhile: who did the work of its lists.
pub struct Startup {
    pub ready: Duration,
    pub sidecar_cpu_s: Option<f64>,
    pub control_plane_cpu_s: f64,
}

/// Runs `start` (a sidecar's start until ready) and measures it as [`Startup`].
pub async fn startup(
    start: impl Future<Output = anyhow::Result<(Process, Duration)>>,
) -> anyhow::Result<(Process, Startup)> {
    let before = crate::quiet::control_plane_ticks();
    let (process, ready) = start.await?;
    let seconds = |ticks: u64| ticks as f64 / crate::ticks() as f64;
    let control_plane_cpu_s = seconds(crate::quiet::control_plane_ticks().saturating_sub(before));
    let sidecar_cpu_s = ProcSample::of(process.pid()).map(|sample| seconds(sample.cpu_ticks));
    Ok((process, Startup { ready, sidecar_cpu_s, control_plane_cpu_s }))
}

/// The process's peak RSS after it settled, then stopped.
pub fn measured(process: &mut Process, startup: &Startup, objects: usize) -> Run {
    let sample = ProcSample::of(process.pid());
    process.terminate();
    let ready = startup.ready.as_secs_f64();
    progress(&format!(
        "  ready after {ready:.2} s (CPU s until then: sidecar {:.2}, control plane {:.2}), peak RSS {:?} KiB",
        startup.sidecar_cpu_s.unwrap_or_default(),
        startup.control_plane_cpu_s,
        sample.map(|s| s.peak_rss_kib)
    ));
    let mut details = BTreeMap::from([
        ("ready_s".to_string(), ready),
        ("control_plane_cpu_to_ready_s".to_string(), startup.control_plane_cpu_s),
    ]);
    if let Some(cpu) = startup.sidecar_cpu_s {
        details.insert("cpu_to_ready_s".to_string(), cpu);
    }
    Run { objects, seconds: ready, peak_rss_kib: sample.map(|s| s.peak_rss_kib), details, ..Default::default() }
}
