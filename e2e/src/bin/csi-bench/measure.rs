//! What a side's sidecar processes spend on a scenario's work: CPU (from /proc, between the start and the end of the
//! work), peak RSS, and API requests (from the audit log of each process's ServiceAccount, once each has been quiet).
//! A side of the snapshot scenarios is two processes (snapshot-controller and csi-snapshotter): their CPU, RSS and
//! requests are added up, as they are what a user runs for one driver.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use crate::report::{ProcSample, Run};
use anyhow::Context;
use csi_sidecars_e2e::control_plane::audit::{requests_of, work_requests};
use csi_sidecars_e2e::processes::scenario::Process;

use crate::sidecar;

/// One sidecar process and the ServiceAccount it runs as.
pub struct Watched<'a> {
    pub process: &'a Process,
    pub username: String,
}

/// The processes of one side, and what they had used and asked before the work.
pub struct Measure<'a> {
    sidecars: Vec<Watched<'a>>,
    requests_before: Vec<usize>,
    cpu_before: Vec<ProcSample>,
}

impl<'a> Measure<'a> {
    /// Waits until every process has been quiet (start-up requests done), then samples them.
    pub async fn before(sidecars: Vec<Watched<'a>>) -> anyhow::Result<Measure<'a>> {
        // The processes of a side are waited for together: each wait lasts at least the quiet window.
        let quiet = sidecars.iter().map(|sidecar| sidecar::quiet(&sidecar.username, Duration::from_secs(10)));
        let requests_before = futures::future::join_all(quiet).await;
        let mut cpu_before = Vec::new();
        for sidecar in &sidecars {
            let name = sidecar.process.name();
            cpu_before.push(ProcSample::of(sidecar.process.pid()).with_context(|| format!("{name} gone before"))?);
        }
        Ok(Measure { sidecars, requests_before, cpu_before })
    }

    /// Once the work is done (`objects` in `seconds`, with per-object latencies): waits until every process is quiet
    /// again (trailing events and writes count), then the round's run.
    pub async fn after(self, objects: usize, seconds: f64, latencies_ms: Vec<f64>) -> anyhow::Result<Run> {
        let mut requests = BTreeMap::new();
        let mut cpu_ms = 0.0;
        let mut peak_rss_kib = 0;
        let quiet = self.sidecars.iter().map(|sidecar| sidecar::quiet(&sidecar.username, Duration::from_secs(60)));
        let requests_after = futures::future::join_all(quiet).await;
        let each = self.sidecars.iter().zip(&self.requests_before).zip(&self.cpu_before).zip(requests_after);
        for (((sidecar, before), cpu_before), after) in each {
            let name = sidecar.process.name();
            let sample = ProcSample::of(sidecar.process.pid()).with_context(|| format!("{name} gone after"))?;
            cpu_ms += sample.cpu_ms_since(cpu_before, crate::ticks());
            peak_rss_kib += sample.peak_rss_kib;
            let log = requests_of(&sidecar.username);
            for (key, n) in work_requests(&log[*before..after.max(*before)]) {
                *requests.entry(key).or_insert(0) += n;
            }
        }
        Ok(Run {
            objects,
            seconds,
            latencies_ms,
            cpu_ms: Some(cpu_ms),
            peak_rss_kib: Some(peak_rss_kib),
            api_requests: crate::counts_by_kind(&requests),
            details: BTreeMap::new(),
        })
    }
}

/// Per object: from when it was handed over (`asked`) until it was seen done, in milliseconds.
pub fn latencies(asked: &HashMap<String, Instant>, done: &HashMap<String, Instant>) -> Vec<f64> {
    asked
        .iter()
        .filter_map(|(name, at)| done.get(name).map(|d| d.saturating_duration_since(*at).as_secs_f64() * 1000.0))
        .collect()
}
