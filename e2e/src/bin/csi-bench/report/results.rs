//! What one run of a scenario measured, how the rounds of one (scenario, side, limits) add up, and results.json:
//! `<scenario>.<side>.<limits>.{per_second, ratio_to_ceiling, peak_rss_mib, cpu_ms_per_object, p99_ms,
//! api_requests_per_object}` plus the details behind them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One round of one scenario for one side at one limit setting.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Run {
    /// Claims, volumes or snapshots the round worked on.
    pub objects: usize,
    /// From the first object handed over until the last one done (the sidecar's work).
    pub seconds: f64,
    /// Per object: handed over → done, in milliseconds.
    pub latencies_ms: Vec<f64>,
    /// Sidecar CPU spent on the work (none for a bare client).
    pub cpu_ms: Option<f64>,
    /// Sidecar peak RSS (VmHWM) in KiB.
    pub peak_rss_kib: Option<u64>,
    /// The sidecar's API requests for the work, by "verb resource" (from the audit log).
    pub api_requests: BTreeMap<String, usize>,
    /// Further numbers of the round, unit in the name (e.g. `bound_s`, `delete_s`, `delete_requests_per_object`).
    pub details: BTreeMap<String, f64>,
}

/// The rounds of one (scenario, side, limits), added up.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub rounds: usize,
    pub objects: usize,
    /// Mean over the rounds of objects / seconds.
    pub per_second: f64,
    /// per_second / the scenario's ceiling at the same limits (1 for a ceiling itself); null without a ceiling.
    pub ratio_to_ceiling: Option<f64>,
    /// The highest VmHWM of the rounds.
    pub peak_rss_mib: Option<f64>,
    pub cpu_ms_per_object: Option<f64>,
    /// Over the latencies of all rounds together.
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub api_requests_per_object: Option<f64>,
    /// Per object, by "verb resource".
    pub api_requests_by_kind: BTreeMap<String, f64>,
    /// Means over the rounds.
    pub details: BTreeMap<String, f64>,
}

impl Summary {
    pub fn of(runs: &[Run]) -> Summary {
        let n = runs.len().max(1) as f64;
        let objects: usize = runs.iter().map(|r| r.objects).sum();
        let per_second = runs.iter().map(|r| r.objects as f64 / r.seconds.max(1e-9)).sum::<f64>() / n;
        let mut latencies: Vec<f64> = runs.iter().flat_map(|r| r.latencies_ms.iter().copied()).collect();
        latencies.sort_by(f64::total_cmp);
        let cpu: Option<f64> = runs.iter().map(|r| r.cpu_ms).sum();
        let peak = runs.iter().filter_map(|r| r.peak_rss_kib).max();
        let mut by_kind: BTreeMap<String, f64> = BTreeMap::new();
        for run in runs {
            for (kind, count) in &run.api_requests {
                *by_kind.entry(kind.clone()).or_default() += *count as f64 / objects.max(1) as f64;
            }
        }
        let counted = runs.iter().any(|r| !r.api_requests.is_empty());
        let mut details: BTreeMap<String, f64> = BTreeMap::new();
        for run in runs {
            for (name, seconds) in &run.details {
                *details.entry(name.clone()).or_default() += seconds / n;
            }
        }
        Summary {
            rounds: runs.len(),
            objects: objects / runs.len().max(1),
            per_second,
            ratio_to_ceiling: None,
            peak_rss_mib: peak.map(|kib| kib as f64 / 1024.0),
            cpu_ms_per_object: cpu.map(|ms| ms / objects.max(1) as f64),
            p50_ms: percentile(&latencies, 50.0),
            p99_ms: percentile(&latencies, 99.0),
            api_requests_per_object: counted.then(|| by_kind.values().sum()),
            api_requests_by_kind: by_kind,
            details,
        }
    }
}

/// The nearest-rank percentile of sorted values.
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Sides of a scenario: the two sidecars, or the bare client of a ceiling.
pub const OURS: &str = "ours";
pub const UPSTREAM: &str = "upstream";
pub const BARE: &str = "bare";

/// Every summary, `scenario → side → limits`, and which scenario is the ceiling of which.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Results {
    pub summaries: BTreeMap<String, BTreeMap<String, BTreeMap<String, Summary>>>,
    /// scenario → the scenario that measures its ceiling (`provision` → `ceiling`).
    pub ceilings: BTreeMap<String, String>,
}

impl Results {
    pub fn insert(&mut self, scenario: &str, side: &str, limits: &str, summary: Summary) {
        let sides = self.summaries.entry(scenario.to_string()).or_default();
        sides.entry(side.to_string()).or_default().insert(limits.to_string(), summary);
    }

    pub fn get(&self, scenario: &str, side: &str, limits: &str) -> Option<&Summary> {
        self.summaries.get(scenario)?.get(side)?.get(limits)
    }

    /// Fills `ratio_to_ceiling`: 1 for a ceiling itself, per_second / the ceiling's at the same limits for a
    /// scenario whose ceiling was measured.
    pub fn relate_to_ceilings(&mut self) {
        let mut ratios = Vec::new();
        for (scenario, sides) in &self.summaries {
            let is_ceiling = self.ceilings.values().any(|c| c == scenario);
            for (side, limits) in sides {
                for (setting, summary) in limits {
                    let ratio = if is_ceiling {
                        Some(1.0)
                    } else {
                        self.ceilings
                            .get(scenario)
                            .and_then(|ceiling| self.get(ceiling, BARE, setting))
                            .filter(|bound| bound.per_second > 0.0)
                            .map(|bound| summary.per_second / bound.per_second)
                    };
                    ratios.push((scenario.clone(), side.clone(), setting.clone(), ratio));
                }
            }
        }
        for (scenario, side, setting, ratio) in ratios {
            let summary =
                self.summaries.get_mut(&scenario).and_then(|s| s.get_mut(&side)).and_then(|l| l.get_mut(&setting));
            if let Some(summary) = summary {
                summary.ratio_to_ceiling = ratio;
            }
        }
    }

    /// results.json.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(&self.summaries).expect("summaries serialize")
    }

    /// The summaries of a results.json written by [`Results::to_json`], into `self` (which holds the ceilings).
    pub fn read_json(&mut self, json: &str) -> serde_json::Result<()> {
        self.summaries = serde_json::from_str(json)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(objects: usize, seconds: f64) -> Run {
        Run { objects, seconds, ..Default::default() }
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        let rows: &[(&[f64], f64, Option<f64>)] = &[
            (&values, 50.0, Some(50.0)),
            (&values, 99.0, Some(99.0)),
            (&values, 100.0, Some(100.0)),
            (&[7.0], 99.0, Some(7.0)),
            (&[1.0, 2.0], 50.0, Some(1.0)),
            (&[], 50.0, None),
        ];
        for (sorted, p, want) in rows {
            assert_eq!(percentile(sorted, *p), *want, "p{p} of {sorted:?}");
        }
    }

    #[test]
    fn results_json_reads_back() {
        let mut results = Results::default();
        let mut measured = run(10, 2.0);
        measured.peak_rss_kib = Some(2048);
        measured.cpu_ms = Some(30.0);
        results.insert("idle", OURS, "default", Summary::of(&[measured]));
        let mut read = Results::default();
        read.read_json(&results.to_json().to_string()).unwrap();
        assert_eq!(read, results);
    }

    #[test]
    fn rounds_add_up() {
        let mut first = run(100, 10.0);
        first.latencies_ms = vec![30.0, 10.0];
        first.cpu_ms = Some(200.0);
        first.peak_rss_kib = Some(20 * 1024);
        first.api_requests = BTreeMap::from([("create persistentvolumes".to_string(), 100)]);
        first.details = BTreeMap::from([("bound_seconds".to_string(), 12.0)]);
        let mut second = run(100, 5.0);
        second.latencies_ms = vec![20.0];
        second.cpu_ms = Some(100.0);
        second.peak_rss_kib = Some(30 * 1024);
        second.api_requests =
            BTreeMap::from([("create persistentvolumes".to_string(), 100), ("create events".to_string(), 50)]);
        second.details = BTreeMap::from([("bound_seconds".to_string(), 8.0)]);
        let summary = Summary::of(&[first, second]);
        assert_eq!(summary.rounds, 2);
        assert_eq!(summary.objects, 100);
        assert_eq!(summary.per_second, 15.0, "mean of 10/s and 20/s");
        assert_eq!(summary.cpu_ms_per_object, Some(1.5));
        assert_eq!(summary.peak_rss_mib, Some(30.0), "the highest of the rounds");
        assert_eq!(summary.p50_ms, Some(20.0));
        assert_eq!(summary.p99_ms, Some(30.0));
        assert_eq!(summary.api_requests_per_object, Some(1.25));
        assert_eq!(summary.api_requests_by_kind["create events"], 0.25);
        assert_eq!(summary.details["bound_seconds"], 10.0);
    }

    #[test]
    fn a_bare_client_has_no_sidecar_numbers() {
        let summary = Summary::of(&[run(10, 1.0)]);
        assert_eq!(
            (summary.cpu_ms_per_object, summary.peak_rss_mib, summary.api_requests_per_object),
            (None, None, None)
        );
    }

    #[test]
    fn ratios_to_the_ceiling_at_the_same_limits() {
        let mut results = Results::default();
        results.ceilings.insert("provision".into(), "ceiling".into());
        results.insert("ceiling", BARE, "default", Summary::of(&[run(10, 2.0)]));
        results.insert("ceiling", BARE, "raised", Summary::of(&[run(100, 1.0)]));
        results.insert("provision", OURS, "default", Summary::of(&[run(10, 4.0)]));
        results.insert("provision", UPSTREAM, "raised", Summary::of(&[run(100, 2.0)]));
        results.insert("expand", OURS, "raised", Summary::of(&[run(10, 1.0)]));
        results.relate_to_ceilings();
        let ratio =
            |scenario: &str, side: &str, limits: &str| results.get(scenario, side, limits).unwrap().ratio_to_ceiling;
        assert_eq!(ratio("provision", OURS, "default"), Some(0.5));
        assert_eq!(ratio("provision", UPSTREAM, "raised"), Some(0.5));
        assert_eq!(ratio("ceiling", BARE, "raised"), Some(1.0));
        assert_eq!(ratio("expand", OURS, "raised"), None, "no ceiling measured");
    }

    #[test]
    fn json_keys_are_scenario_side_limits_metric() {
        let mut results = Results::default();
        results.insert("provision", OURS, "raised", Summary::of(&[run(10, 1.0)]));
        let json = results.to_json();
        let leaf = &json["provision"]["ours"]["raised"];
        for key in
            ["per_second", "ratio_to_ceiling", "peak_rss_mib", "cpu_ms_per_object", "p99_ms", "api_requests_per_object"]
        {
            assert!(leaf.get(key).is_some(), "{key} missing in {leaf}");
        }
        assert_eq!(leaf["per_second"], 10.0);
    }
}
