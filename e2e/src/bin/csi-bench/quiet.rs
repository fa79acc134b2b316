//! Waiting for a quiet control plane before a sidecar is started among many objects, so that its time to ready
//! measures the sidecar, not kube-apiserver still busy with the objects just written.

use std::time::{Duration, Instant};

use crate::report::ProcSample;

use crate::progress;

/// The control plane's processes (from the cluster's pid files): name and pid.
pub fn control_plane() -> Vec<(&'static str, u32)> {
    let kubeconfig = csi_sidecars_e2e::control_plane::cluster::Cluster::shared().kubeconfig();
    let pids = kubeconfig.with_file_name("pids");
    ["kube-apiserver", "etcd", "kube-controller-manager"]
        .into_iter()
        .filter_map(|process| {
            let pid = std::fs::read_to_string(pids.join(format!("{process}.pid"))).ok()?;
            Some((process, pid.trim().parse().ok()?))
        })
        .collect()
}

/// The CPU time the control plane's processes have used so far, in clock ticks.
pub fn control_plane_ticks() -> u64 {
    control_plane().iter().filter_map(|(_, pid)| ProcSample::of(*pid)).map(|s| s.cpu_ticks).sum()
}

/// The share of one core the control plane may use in one [`WINDOW`] for it to count as quiet.
const QUIET_CORES: f64 = 0.15;
const WINDOW: Duration = Duration::from_secs(1);
/// How long [`settle`] waits for a busy window to end a quiet stretch it started in.
const NO_BURST: Duration = Duration::from_secs(20);
/// How long [`settle`] waits at most.
const AT_MOST: Duration = Duration::from_secs(300);

/// The cores used between two CPU-tick sums taken `elapsed` apart.
fn cores_used(before: u64, after: u64, elapsed: Duration, ticks_per_second: u64) -> f64 {
    after.saturating_sub(before) as f64 / ticks_per_second as f64 / elapsed.as_secs_f64()
}

/// Whether [`settle`] stops after a window that used `used` cores, `busy_seen` telling whether a busy one came
/// before it, `waited` after it started.
fn settled(used: f64, busy_seen: bool, waited: Duration) -> bool {
    (used < QUIET_CORES && (busy_seen || waited >= NO_BURST)) || waited >= AT_MOST
}

/// Waits until the control plane is quiet and stays so for a while, so that a sidecar started next lists from an
/// idle server. A busy one skews a start by seconds: among 50,000 claims, PVs and pods, our resizer and upstream's
/// took 7-12 s to be ready while kube-controller-manager was busy, 3.5-4.1 s once it was quiet. Quiet comes in
/// stretches: kube-controller-manager's PV binder goes through every claim and volume every 15 s, which at 50,000 of
/// each is 2-4 s of nearly two cores; so it returns at the end of a busy stretch (the first quiet second after a busy
/// one), or after a quiet [`NO_BURST`]. Returns the seconds waited.
pub async fn settle() -> f64 {
    let started = Instant::now();
    let mut busy_seen = false;
    loop {
        let (before, at) = (control_plane_ticks(), Instant::now());
        tokio::time::sleep(WINDOW).await;
        let used = cores_used(before, control_plane_ticks(), at.elapsed(), crate::ticks());
        if settled(used, busy_seen, started.elapsed()) {
            let waited = started.elapsed().as_secs_f64();
            let state = if used < QUIET_CORES { "quiet" } else { "still busy, going on" };
            progress(&format!("  control plane {state} after {waited:.0} s ({used:.2} cores)"));
            return waited;
        }
        busy_seen |= used >= QUIET_CORES;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cores_used_is_ticks_per_second_of_wall_time() {
        let cases = [
            // (ticks before, after, elapsed ms, ticks per second, cores)
            (1_000, 1_300, 3_000, 100, 1.0),
            (1_000, 1_045, 3_000, 100, 0.15),
            (500, 500, 2_000, 100, 0.0),
            (0, 600, 1_500, 200, 2.0),
            // A process that restarted (fewer ticks than before) counts as idle, never negative.
            (900, 100, 3_000, 100, 0.0),
        ];
        for (before, after, ms, ticks, cores) in cases {
            let used = cores_used(before, after, Duration::from_millis(ms), ticks);
            assert!((used - cores).abs() < 1e-9, "{before}->{after} in {ms} ms: {used}, want {cores}");
        }
    }

    #[test]
    fn settles_at_the_end_of_a_busy_stretch_or_after_a_quiet_while() {
        let s = Duration::from_secs;
        let cases = [
            // (cores in this window, busy window seen before, waited, stops)
            (0.05, true, s(4), true),
            (0.05, false, s(4), false),
            (0.05, false, s(20), true),
            (1.80, true, s(30), false),
            (1.80, true, s(300), true),
            (0.15, true, s(5), false),
        ];
        for (used, busy_seen, waited, stops) in cases {
            assert_eq!(settled(used, busy_seen, waited), stops, "{used} cores, busy seen {busy_seen}, {waited:?}");
        }
    }
}
