//! `idle` (csi-provisioner) and `idle_resizer`: a sidecar started among N Bound claims and PVs that need nothing;
//! its time until its caches are filled (as its log says) and its peak RSS a few seconds later:
//! what caching every claim and PV costs. `idle_combined`: ours only, `csi-sidecars --sidecars=provisioner,resizer`
//! the same way, one process whose claim and PV caches the two share, against the sum of the two above;
//! `idle_combined_all`: the same with the snapshotter too (no snapshot contents among the objects: what its loops
//! and its content caches cost on their own).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use csi_sidecars_e2e::bench::{ProcSample, Run};
use csi_sidecars_e2e::driver_world::DriverWorld;
use csi_sidecars_e2e::resizer_world::ResizerWorld;
use csi_sidecars_e2e::{Process, Rules, Sidecar, SidecarIdentity, binary, install_snapshot_crds};

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
        let (mut process, ready) = self.start_one(&name, kind, side, limits).await?;
        tokio::time::sleep(SETTLE).await;
        Ok(measured(&mut process, ready, self.objects))
    }

    /// Ours only: the sidecars `kinds` (the provisioner and the resizer, or those and the snapshotter) in one
    /// `csi-sidecars` process, with the flags each gets alone.
    pub async fn run_combined(&mut self, name: &str, limits: &Limits, kinds: &[Kind]) -> anyhow::Result<Run> {
        let (mut process, ready) = self.start_combined(name, limits, kinds).await?;
        tokio::time::sleep(SETTLE).await;
        Ok(measured(&mut process, ready, self.objects))
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

/// The process's peak RSS after it settled, then stopped.
pub fn measured(process: &mut Process, ready: Duration, objects: usize) -> Run {
    let sample = ProcSample::of(process.pid());
    process.terminate();
    progress(&format!("  ready after {:.2} s, peak RSS {:?} KiB", ready.as_secs_f64(), sample.map(|s| s.peak_rss_kib)));
    Run {
        objects,
        seconds: ready.as_secs_f64(),
        peak_rss_kib: sample.map(|s| s.peak_rss_kib),
        details: BTreeMap::from([("ready_s".to_string(), ready.as_secs_f64())]),
        ..Default::default()
    }
}
