//! The Markdown table `make bench` prints and docs/benchmarks.md shows: one row per (scenario, limits, side).

use std::fmt::Write;

use super::Results;

const HEADER: &str = "| scenario | limits | side | objects | per s | × ceiling | p50 / p99 ms | CPU ms/object | peak RSS MiB \
                      | API requests/object | other |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n";

/// Scenarios in the order of importance, then any other; within one, default limits before raised, ours first.
fn order(scenario: &str) -> usize {
    [
        "provision",
        "ceiling",
        "expand",
        "expand_ceiling",
        "modify",
        "modify_ceiling",
        "snapshot",
        "snapshot_ceiling",
        "group",
        "group_ceiling",
        "idle",
        "idle_resizer",
        "idle_combined",
        "provision_cached",
        "provision_cached_combined",
        "attach",
        "attach_ceiling",
        "attach_during_detach_burst",
    ]
    .iter()
    .position(|s| *s == scenario)
    .unwrap_or(usize::MAX)
}

fn side_order(side: &str) -> usize {
    ["ours", "upstream", "bare"].iter().position(|s| *s == side).unwrap_or(usize::MAX)
}

fn number(value: Option<f64>, decimals: usize) -> String {
    value.map(|v| format!("{v:.decimals$}")).unwrap_or_else(|| "–".to_string())
}

/// The table of every summary.
pub fn markdown(results: &Results) -> String {
    let mut rows = Vec::new();
    for (scenario, sides) in &results.summaries {
        for (side, limits) in sides {
            for (setting, summary) in limits {
                rows.push((order(scenario), scenario, setting != "default", side_order(side), side, setting, summary));
            }
        }
    }
    rows.sort_by(|a, b| (a.0, a.1, a.2, a.3).cmp(&(b.0, b.1, b.2, b.3)));
    let mut out = String::from(HEADER);
    for (_, scenario, _, _, side, setting, s) in rows {
        let latency = match (s.p50_ms, s.p99_ms) {
            (Some(p50), Some(p99)) => format!("{p50:.0} / {p99:.0}"),
            _ => "–".to_string(),
        };
        let other: Vec<String> = s.details.iter().map(|(name, secs)| format!("{name} {secs:.1}")).collect();
        let _ = writeln!(
            out,
            "| {scenario} | {setting} | {side} | {} | {:.1} | {} | {latency} | {} | {} | {} | {} |",
            s.objects,
            s.per_second,
            number(s.ratio_to_ceiling, 2),
            number(s.cpu_ms_per_object, 2),
            number(s.peak_rss_mib, 1),
            number(s.api_requests_per_object, 2),
            if other.is_empty() { "–".to_string() } else { other.join(", ") },
        );
    }
    out
}

/// The API requests per object of every sidecar summary, by verb and resource (what each side spends).
pub fn requests_by_kind(results: &Results) -> String {
    let mut out = String::new();
    for (scenario, sides) in &results.summaries {
        for (side, limits) in sides {
            for (setting, summary) in limits {
                if summary.api_requests_by_kind.is_empty() {
                    continue;
                }
                let kinds: Vec<String> =
                    summary.api_requests_by_kind.iter().map(|(kind, per)| format!("{kind} {per:.2}")).collect();
                let _ = writeln!(out, "- {scenario} {side} {setting}: {}", kinds.join(", "));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::report::{Run, Summary};

    fn results() -> Results {
        let mut results = Results::default();
        results.ceilings.insert("provision".into(), "ceiling".into());
        let run = |objects, seconds, cpu: Option<f64>| Run {
            objects,
            seconds,
            cpu_ms: cpu,
            peak_rss_kib: cpu.map(|_| 30 * 1024),
            latencies_ms: vec![5.0, 9.0],
            api_requests: cpu
                .map(|_| BTreeMap::from([("create persistentvolumes".to_string(), objects)]))
                .unwrap_or_default(),
            details: BTreeMap::from([("delete_seconds".to_string(), 3.0)]),
        };
        results.insert("provision", "upstream", "raised", Summary::of(&[run(100, 4.0, Some(300.0))]));
        results.insert("provision", "ours", "raised", Summary::of(&[run(100, 2.0, Some(50.0))]));
        results.insert("provision", "ours", "default", Summary::of(&[run(100, 20.0, Some(50.0))]));
        results.insert("ceiling", "bare", "raised", Summary::of(&[run(100, 1.0, None)]));
        results.relate_to_ceilings();
        results
    }

    #[test]
    fn rows_in_order_with_dashes_for_what_a_side_lacks() {
        let table = markdown(&results());
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 2 + 4);
        assert_eq!(
            lines[2],
            "| provision | default | ours | 100 | 5.0 | – | 5 / 9 | 0.50 | 30.0 | 1.00 | delete_seconds 3.0 |"
        );
        assert_eq!(
            lines[3],
            "| provision | raised | ours | 100 | 50.0 | 0.50 | 5 / 9 | 0.50 | 30.0 | 1.00 | delete_seconds 3.0 |"
        );
        assert!(lines[4].starts_with("| provision | raised | upstream | 100 | 25.0 | 0.25 |"), "{}", lines[4]);
        assert_eq!(
            lines[5],
            "| ceiling | raised | bare | 100 | 100.0 | 1.00 | 5 / 9 | – | – | – | delete_seconds 3.0 |"
        );
    }

    #[test]
    fn requests_listed_per_side() {
        let text = requests_by_kind(&results());
        assert!(text.contains("- provision ours default: create persistentvolumes 1.00\n"), "{text}");
        assert!(!text.contains("ceiling"), "a bare client is not counted: {text}");
    }
}
