//! The two sides of a comparison: our release binary and upstream's Go binary of the same sidecar (built by
//! e2e/tools.sh), started with the same flags, and the limit settings they are compared at.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use csi_sidecars_e2e::control_plane::audit::request_count_of;
use csi_sidecars_e2e::control_plane::cluster::repo_root;
use csi_sidecars_e2e::processes::rbac::SidecarIdentity;
use csi_sidecars_e2e::processes::scenario::{Process, Scenario, binary};
use csi_sidecars_e2e::worlds::driver::DriverWorld;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Ours,
    Upstream,
}

impl Side {
    pub fn name(self) -> &'static str {
        match self {
            Side::Ours => "ours",
            Side::Upstream => "upstream",
        }
    }
}

/// Which sidecar a scenario measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Provisioner,
    Resizer,
    SnapshotController,
    Snapshotter,
    Attacher,
}

impl Kind {
    /// Our binary's name; upstream's is `upstream-<name>` in e2e/tools.sh.
    pub fn binary_name(self) -> &'static str {
        match self {
            Kind::Provisioner => "csi-provisioner",
            Kind::Resizer => "csi-resizer",
            Kind::SnapshotController => "snapshot-controller",
            Kind::Snapshotter => "csi-snapshotter",
            Kind::Attacher => "csi-attacher",
        }
    }

    /// Its name in `csi-sidecars --sidecars`: the binary's without `csi-` (snapshot-controller is none of them).
    pub fn sidecar_name(self) -> &'static str {
        self.binary_name().trim_start_matches("csi-")
    }

    /// The flag that sets the number of workers (the same in both implementations).
    fn workers_flag(self) -> &'static str {
        match self {
            Kind::Resizer => "--workers",
            Kind::Provisioner | Kind::SnapshotController | Kind::Snapshotter | Kind::Attacher => "--worker-threads",
        }
    }

    /// The ServiceAccount (and upstream RBAC) it runs as.
    pub fn account(self) -> csi_sidecars_e2e::processes::rbac::Sidecar {
        use csi_sidecars_e2e::processes::rbac::Sidecar;
        match self {
            Kind::Provisioner => Sidecar::Provisioner,
            Kind::Resizer => Sidecar::Resizer,
            Kind::SnapshotController => Sidecar::SnapshotController,
            Kind::Snapshotter => Sidecar::Snapshotter,
            Kind::Attacher => Sidecar::Attacher,
        }
    }
}

/// A client-limit setting, the same for both sides and for the ceiling's bare client.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    pub name: &'static str,
    pub qps: f64,
    pub burst: u32,
    /// None: each sidecar's default (upstream: 100 provisioner threads, 10 workers in the others; ours the same).
    pub workers: Option<usize>,
}

impl Limits {
    /// Upstream's defaults, which every user starts with.
    pub const DEFAULT: Limits = Limits { name: "default", qps: 5.0, burst: 10, workers: None };

    /// Raised so the client limiter is not what is measured (BENCH_RAISED_QPS / _BURST / _WORKERS).
    pub fn raised() -> Limits {
        Limits {
            name: "raised",
            qps: crate::env_number("BENCH_RAISED_QPS", 100) as f64,
            burst: crate::env_number("BENCH_RAISED_BURST", 200) as u32,
            workers: Some(crate::env_number("BENCH_RAISED_WORKERS", 100)),
        }
    }

    /// Whether the client limiter, not the machine, bounds every side at these limits (upstream's defaults: a few
    /// requests per second), so that the sides of a round may run at the same time.
    pub fn limiter_bound(&self) -> bool {
        self.qps <= Limits::DEFAULT.qps
    }

    /// The concurrency a bare client uses to match a sidecar of `kind` at these limits.
    pub fn concurrency(&self, kind: Kind) -> usize {
        self.workers.unwrap_or(match kind {
            Kind::Provisioner => 100,
            Kind::Resizer | Kind::SnapshotController | Kind::Snapshotter | Kind::Attacher => 10,
        })
    }

    fn flags(&self, kind: Kind) -> Vec<String> {
        let mut flags = vec![format!("--kube-api-qps={}", self.qps), format!("--kube-api-burst={}", self.burst)];
        if let Some(workers) = self.workers {
            flags.push(format!("{}={workers}", kind.workers_flag()));
        }
        flags
    }
}

/// The binary of `kind` for `side`.
pub fn binary_of(side: Side, kind: Kind) -> anyhow::Result<PathBuf> {
    match side {
        Side::Ours => Ok(binary(kind.binary_name())),
        Side::Upstream => {
            let name = format!("upstream-{}", kind.binary_name());
            let output = std::process::Command::new("bash")
                .arg(repo_root().join("e2e/tools.sh"))
                .args(["path", &name])
                .output()
                .context("running e2e/tools.sh")?;
            if !output.status.success() {
                bail!("e2e/tools.sh path {name}: {}", String::from_utf8_lossy(&output.stderr));
            }
            Ok(PathBuf::from(String::from_utf8(output.stdout)?.trim()))
        }
    }
}

/// The flags both sides get: the plugin's socket (snapshot-controller talks to no driver), the ServiceAccount's
/// kubeconfig, the limits, and the log level a deployment typically runs at.
pub fn args(kind: Kind, limits: &Limits, socket: &std::path::Path, kubeconfig_flag: String) -> Vec<String> {
    let mut args = vec![kubeconfig_flag, "-v=2".to_string()];
    if kind != Kind::SnapshotController {
        args.push(format!("--csi-address={}", socket.display()));
    }
    if kind == Kind::Provisioner {
        // As the e2e harness runs it: Immediate claims without topology (the plugin reports none that matters).
        args.push("--immediate-topology=false".to_string());
    }
    args.extend(limits.flags(kind));
    args
}

/// What a side logs once its caches hold every object it works on. Not the audit log's `list`: upstream's client-go
/// (v0.37) fills its informers with a streaming watch-list, which the audit log records only when the watch ends.
fn ready_markers(side: Side, kind: Kind) -> &'static [&'static str] {
    match (side, kind) {
        (Side::Ours, _) => &["caches filled, starting workers"],
        (Side::Upstream, Kind::Provisioner) => &[
            r#""Caches populated" type="*v1.PersistentVolumeClaim""#,
            r#""Caches populated" type="*v1.PersistentVolume""#,
        ],
        // With --handle-volume-inuse-error (the default) its controller waits for its Pod informer too
        // (external-resizer, pkg/controller/controller.go, Run).
        (Side::Upstream, Kind::Resizer) => &[
            r#""Caches populated" type="*v1.PersistentVolumeClaim""#,
            r#""Caches populated" type="*v1.PersistentVolume""#,
            r#""Caches populated" type="*v1.Pod""#,
        ],
        (Side::Upstream, Kind::SnapshotController) => &[
            r#""Caches populated" type="*v1.VolumeSnapshot""#,
            r#""Caches populated" type="*v1.VolumeSnapshotContent""#,
        ],
        (Side::Upstream, Kind::Snapshotter) => &[r#""Caches populated" type="*v1.VolumeSnapshotContent""#],
        (Side::Upstream, Kind::Attacher) => &[
            r#""Caches populated" type="*v1.VolumeAttachment""#,
            r#""Caches populated" type="*v1.PersistentVolume""#,
            r#""Caches populated" type="*v1.CSINode""#,
        ],
    }
}

/// How many of our loops a sidecar runs, each saying once that its caches are filled: csi-snapshotter two (contents,
/// and group contents: group snapshots are on by default, as in external-snapshotter v8.7), the others one. Ready is
/// when the last has said it: at 50,000 contents the group loop (no group contents) said it at 0.1 s, the content
/// loop seconds later.
fn our_loops(kind: Kind) -> usize {
    if kind == Kind::Snapshotter { 2 } else { 1 }
}

/// Waits until `process` (the `kind` sidecar of `side`) says its caches are filled; returns how long that took from
/// `started`.
pub async fn ready(process: &Process, side: Side, kind: Kind, started: Instant) -> anyhow::Result<Duration> {
    if side == Side::Ours {
        return combined_ready(process, &[kind], started).await;
    }
    wait_for_markers(process, started, |log| ready_markers(side, kind).iter().all(|marker| log.contains(marker))).await
}

/// Waits until our process running the sidecars `kinds` (one, or several in `csi-sidecars`) says the caches of every
/// loop are filled; returns how long that took from `started`.
pub async fn combined_ready(process: &Process, kinds: &[Kind], started: Instant) -> anyhow::Result<Duration> {
    let marker = ready_markers(Side::Ours, Kind::Provisioner)[0];
    let loops: usize = kinds.iter().map(|kind| our_loops(*kind)).sum();
    wait_for_markers(process, started, |log| log.matches(marker).count() >= loops).await
}

async fn wait_for_markers(
    process: &Process,
    started: Instant,
    done: impl Fn(&str) -> bool,
) -> anyhow::Result<Duration> {
    let timeout = Duration::from_secs(120);
    loop {
        if done(&process.log()) {
            return Ok(started.elapsed());
        }
        if started.elapsed() > timeout {
            bail!("{} did not fill its caches within {timeout:?}", process.name());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until `username` has made no request for two seconds (events go out behind the limiter and trailing
/// writes may follow the state a scenario waits for); returns its request count then.
pub async fn quiet(username: &str, timeout: Duration) -> usize {
    let started = Instant::now();
    let mut last = usize::MAX;
    let mut since = Instant::now();
    loop {
        let now = request_count_of(username);
        if now != last {
            last = now;
            since = Instant::now();
        } else if since.elapsed() >= Duration::from_secs(2) || started.elapsed() > timeout {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Starts the `kind` sidecar of `side` in `world` as the world's identity and waits until its caches are filled.
/// It gets `POD_NAMESPACE` as in a pod: ours keeps its in-flight journal in the namespace of its Leases, and outside a
/// pod that would otherwise be `default`, where its Role grants nothing (it would fall back to a finalizer per claim).
/// Both sides get the same.
pub async fn start_ready(world: &mut DriverWorld, side: Side, kind: Kind, limits: &Limits) -> anyhow::Result<Process> {
    let DriverWorld { scenario, socket, identity, ns, .. } = world;
    let start = Start { socket: socket.as_path(), identity: &*identity, namespace: ns.name(), extra: &[] };
    Ok(start.run(scenario, side.name(), side, kind, limits).await?.0)
}

/// How one sidecar process of a scenario is started: beside which plugin, as which ServiceAccount, in which pod
/// namespace, with which flags beyond the common ones (feature gates).
pub struct Start<'a> {
    pub socket: &'a std::path::Path,
    pub identity: &'a SidecarIdentity,
    pub namespace: &'a str,
    pub extra: &'a [&'a str],
}

impl Start<'_> {
    /// Starts the `kind` sidecar of `side` under the log name `name` and waits until its caches are filled; the
    /// process, and how long it took from its start until then.
    pub async fn run(
        &self,
        scenario: &mut Scenario,
        name: &str,
        side: Side,
        kind: Kind,
        limits: &Limits,
    ) -> anyhow::Result<(Process, Duration)> {
        let mut args = args(kind, limits, self.socket, self.identity.kubeconfig_flag());
        args.extend(self.extra.iter().map(|flag| flag.to_string()));
        let binary = binary_of(side, kind)?;
        let started = Instant::now();
        let process = scenario.start_with_env(name, &binary, &args, &[("POD_NAMESPACE", self.namespace)]);
        let took = ready(&process, side, kind, started).await?;
        Ok((process, took))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sidecar_names_are_those_csi_sidecars_takes() {
        let cases = [
            (Kind::Provisioner, "provisioner"),
            (Kind::Resizer, "resizer"),
            (Kind::Snapshotter, "snapshotter"),
            (Kind::Attacher, "attacher"),
        ];
        for (kind, name) in cases {
            assert_eq!(kind.sidecar_name(), name);
        }
    }
}
