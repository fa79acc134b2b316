//! The Grafana dashboard shipped by charts/csi-sidecars queries only metrics the binaries really export: every
//! metric name in its PromQL is one a crate registers (`registry.register("<name>", ...)`, a collector's
//! `describe_gauge(.., "<name>", ..)` / `describe_counter(..)`, or the `name` a registered collector carries), with
//! the suffix the Prometheus text format gives its type (`_total` for counters, `_bucket`/`_sum`/`_count` for
//! histograms).

use std::collections::BTreeSet;
use std::path::Path;

use csi_sidecars_e2e::control_plane::cluster::repo_root;
use serde_json::Value;

/// Every name passed to a `register(`, `register_with_unit(` or `describe_gauge(`/`describe_counter(` call in the
/// crates' sources.
fn registered_names() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut stack = vec![repo_root().join("crates")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().filter_map(Result::ok) {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                names.extend(names_in(&path));
            }
        }
    }
    names
}

fn names_in(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    // Registrations in a file's test module are the tests' own.
    let text = text.split("#[cfg(test)]").next().unwrap_or_default();
    // A collector's own registration names nothing: its series are its `describe_*` calls.
    let registrations =
        text.match_indices(".register").filter(|(at, _)| !text[*at..].starts_with(".register_collector"));
    let calls = registrations.chain(text.match_indices("describe_gauge(e, "));
    let calls = calls.chain(text.match_indices("describe_counter(e, "));
    let mut names: Vec<String> = calls
        .filter_map(|(at, _)| {
            let rest = &text[at..];
            let call = rest.find('(')?;
            let literal = &rest[call..].split_once('"')?.1;
            Some(literal.split_once('"')?.0.to_string())
        })
        .collect();
    // A collector that carries its one series' name: `register_collector(Box::new(X { name: "<name>", .. }))`.
    names.extend(text.match_indices(".register_collector(").filter_map(|(at, _)| {
        let statement = text[at..].split(';').next()?;
        let literal = statement.split_once("name: \"")?.1;
        Some(literal.split_once('"')?.0.to_string())
    }));
    names
}

/// Every PromQL text in the dashboard: panel targets' `expr`, and the `query` of templating variables of type
/// `query` (a `datasource` variable's `query` is a plugin name).
fn queries(value: &Value, into: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            let promql_query = map.get("type").and_then(Value::as_str) == Some("query");
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("expr", Value::String(text)) => into.push(text.clone()),
                    ("query", Value::String(text)) if promql_query => into.push(text.clone()),
                    _ => queries(value, into),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| queries(v, into)),
        _ => {}
    }
}

/// The metric names of a PromQL text: identifiers followed by a `{` selector, and `label_values(<metric>, ...)`.
fn metric_names(query: &str) -> Vec<String> {
    let mut names = Vec::new();
    let bytes = query.as_bytes();
    let mut start = None;
    for (i, &b) in bytes.iter().enumerate() {
        let word = b.is_ascii_alphanumeric() || b == b'_' || b == b':';
        match (word, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                let follows_function = query[..s].ends_with("label_values(");
                if b == b'{' || follows_function {
                    names.push(query[s..i].to_string());
                }
                start = None;
            }
            _ => {}
        }
    }
    names
}

fn exported(name: &str, registered: &BTreeSet<String>) -> bool {
    registered.contains(name)
        || ["_total", "_bucket", "_sum", "_count"]
            .iter()
            .any(|suffix| name.strip_suffix(suffix).is_some_and(|base| registered.contains(base)))
}

#[test]
fn every_metric_the_dashboard_queries_is_exported() {
    let path = repo_root().join("charts/csi-sidecars/dashboards/csi-sidecars.json");
    let dashboard: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let registered = registered_names();
    assert!(registered.contains("csi_sidecar_operations_seconds"), "the scan finds registrations: {registered:?}");
    let mut texts = Vec::new();
    queries(&dashboard, &mut texts);
    assert!(texts.len() >= 10, "the dashboard has its panels: {texts:?}");
    for text in texts {
        let names = metric_names(&text);
        assert!(!names.is_empty(), "no metric selector found in {text:?}");
        for name in names {
            assert!(exported(&name, &registered), "{name} (in {text:?}) is not exported by any binary");
        }
    }
}

/// The "## Metrics" section of docs/operations.md.
fn metrics_section() -> String {
    let page = std::fs::read_to_string(repo_root().join("docs/operations.md")).unwrap();
    let start = page.find("\n## Metrics\n").expect("docs/operations.md has a Metrics section");
    let rest = &page[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
    rest[..end].to_string()
}

#[test]
fn every_registered_metric_is_in_the_metrics_table() {
    let section = metrics_section();
    let listed: BTreeSet<String> = section
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .filter(|word| word.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
        .collect();
    for name in registered_names() {
        let shown = [name.clone(), format!("{name}_total")].into_iter().any(|n| listed.contains(&n));
        assert!(shown, "{name} is exported but missing from the Metrics table of docs/operations.md");
    }
}

#[test]
fn metric_names_are_read_from_promql() {
    let rows: [(&str, &[&str]); 3] = [
        (r#"sum by (name) (rate(workqueue_retries_total{job=~"$job"}[5m]))"#, &["workqueue_retries_total"]),
        ("label_values(csi_sidecar_operations_seconds_count, job)", &["csi_sidecar_operations_seconds_count"]),
        (r#"histogram_quantile(0.95, sum by (le) (rate(a_bucket{x="1"}[5m])))"#, &["a_bucket"]),
    ];
    for (query, expected) in rows {
        assert_eq!(metric_names(query), expected, "{query}");
    }
}
