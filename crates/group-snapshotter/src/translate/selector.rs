//! Label selectors over claims: `matchLabels` and `matchExpressions`, ANDed, as the API server evaluates them.
//!
//! Beyond upstream: upstream's snapshot-controller lists claims by `matchLabels` alone and ignores
//! `matchExpressions` (upstream PR #1286 is still open), so a selector with expressions selects more claims there than
//! the user asked for. Here every requirement counts, and a malformed one is refused instead of silently dropped.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

/// A selector the API server would refuse to evaluate. The CRD does not validate selectors, so this is the first
/// place a bad one is noticed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("label selector operator {operator:?} of key {key:?} is not one of In, NotIn, Exists, DoesNotExist")]
    UnknownOperator { key: String, operator: String },
    #[error("label selector operator {operator} of key {key:?} needs at least one value")]
    MissingValues { key: String, operator: String },
    #[error("label selector operator {operator} of key {key:?} takes no values")]
    UnexpectedValues { key: String, operator: String },
}

/// Whether `labels` satisfy every requirement of `selector`. An empty selector selects everything, as in Kubernetes.
pub fn matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> Result<bool, SelectorError> {
    let by_labels = selector.match_labels.iter().flatten().all(|(key, value)| labels.get(key) == Some(value));
    let mut by_expressions = true;
    // Every expression is checked even after a mismatch, so that a malformed one is reported whatever the labels.
    for requirement in selector.match_expressions.iter().flatten() {
        by_expressions &= requirement_matches(requirement, labels)?;
    }
    Ok(by_labels && by_expressions)
}

fn requirement_matches(
    requirement: &LabelSelectorRequirement,
    labels: &BTreeMap<String, String>,
) -> Result<bool, SelectorError> {
    let LabelSelectorRequirement { key, operator, values } = requirement;
    let values = values.as_deref().unwrap_or_default();
    let value = labels.get(key);
    let with_values = |found: bool| match values.is_empty() {
        true => Err(SelectorError::MissingValues { key: key.clone(), operator: operator.clone() }),
        false => Ok(found),
    };
    let without_values = |found: bool| match values.is_empty() {
        true => Ok(found),
        false => Err(SelectorError::UnexpectedValues { key: key.clone(), operator: operator.clone() }),
    };
    match operator.as_str() {
        "In" => with_values(value.is_some_and(|v| values.contains(v))),
        "NotIn" => with_values(!value.is_some_and(|v| values.contains(v))),
        "Exists" => without_values(value.is_some()),
        "DoesNotExist" => without_values(value.is_none()),
        _ => Err(SelectorError::UnknownOperator { key: key.clone(), operator: operator.clone() }),
    }
}

/// The selector as `kubectl` and upstream's messages print it: requirements sorted by key, `k=v` for `matchLabels`,
/// `k in (a,b)`, `k notin (a,b)`, `k`, `!k`; `<none>` when empty.
pub fn format(selector: &LabelSelector) -> String {
    let mut requirements: Vec<(&str, String)> =
        selector.match_labels.iter().flatten().map(|(key, value)| (key.as_str(), format!("{key}={value}"))).collect();
    for LabelSelectorRequirement { key, operator, values } in selector.match_expressions.iter().flatten() {
        let mut values: Vec<&str> = values.iter().flatten().map(String::as_str).collect();
        values.sort_unstable();
        let text = match operator.as_str() {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.clone(),
            "DoesNotExist" => format!("!{key}"),
            other => format!("{key} {other} ({})", values.join(",")),
        };
        requirements.push((key, text));
    }
    requirements.sort_by(|a, b| a.0.cmp(b.0));
    if requirements.is_empty() {
        return "<none>".to_string();
    }
    requirements.into_iter().map(|(_, text)| text).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn expression(key: &str, operator: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.into(),
            operator: operator.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
        }
    }

    fn selector(match_labels: &[(&str, &str)], expressions: Vec<LabelSelectorRequirement>) -> LabelSelector {
        LabelSelector {
            match_labels: (!match_labels.is_empty()).then(|| labels(match_labels)),
            match_expressions: (!expressions.is_empty()).then_some(expressions),
        }
    }

    #[test]
    fn requirements_are_anded() {
        let db = labels(&[("app", "db"), ("tier", "gold")]);
        let web = labels(&[("app", "web")]);
        // (selector, labels, selected)
        let table = [
            (selector(&[], vec![]), &db, true),
            (selector(&[("app", "db")], vec![]), &db, true),
            (selector(&[("app", "db")], vec![]), &web, false),
            (selector(&[("app", "db"), ("tier", "gold")], vec![]), &db, true),
            (selector(&[("app", "db"), ("tier", "silver")], vec![]), &db, false),
            (selector(&[], vec![expression("tier", "In", &["gold", "silver"])]), &db, true),
            (selector(&[], vec![expression("tier", "In", &["silver"])]), &db, false),
            (selector(&[], vec![expression("tier", "In", &["gold"])]), &web, false),
            (selector(&[], vec![expression("tier", "NotIn", &["silver"])]), &db, true),
            (selector(&[], vec![expression("tier", "NotIn", &["gold"])]), &db, false),
            // NotIn selects claims without the label too.
            (selector(&[], vec![expression("tier", "NotIn", &["gold"])]), &web, true),
            (selector(&[], vec![expression("tier", "Exists", &[])]), &db, true),
            (selector(&[], vec![expression("tier", "Exists", &[])]), &web, false),
            (selector(&[], vec![expression("tier", "DoesNotExist", &[])]), &db, false),
            (selector(&[], vec![expression("tier", "DoesNotExist", &[])]), &web, true),
            // matchLabels and matchExpressions together (upstream would look at matchLabels only).
            (selector(&[("app", "db")], vec![expression("tier", "In", &["silver"])]), &db, false),
            (selector(&[("app", "db")], vec![expression("tier", "Exists", &[])]), &db, true),
        ];
        for (i, (selector, labels, want)) in table.into_iter().enumerate() {
            assert_eq!(matches(&selector, labels), Ok(want), "row {i}: {} on {labels:?}", format(&selector));
        }
    }

    #[test]
    fn malformed_requirements_are_refused() {
        let db = labels(&[("app", "db")]);
        let table = [
            (expression("app", "Equals", &["db"]), "is not one of In, NotIn, Exists, DoesNotExist"),
            (expression("app", "In", &[]), "needs at least one value"),
            (expression("app", "NotIn", &[]), "needs at least one value"),
            (expression("app", "Exists", &["db"]), "takes no values"),
            (expression("app", "DoesNotExist", &["db"]), "takes no values"),
        ];
        for (requirement, message) in table {
            // Even behind a requirement that already fails.
            let selector = selector(&[("app", "web")], vec![requirement.clone()]);
            let err = matches(&selector, &db).unwrap_err();
            assert!(err.to_string().contains(message), "{requirement:?}: {err}");
        }
    }

    #[test]
    fn format_is_kubectls() {
        let table = [
            (selector(&[], vec![]), "<none>"),
            (selector(&[("b", "2"), ("a", "1")], vec![]), "a=1,b=2"),
            (
                selector(
                    &[("app", "db")],
                    vec![
                        expression("zone", "NotIn", &["z2", "z1"]),
                        expression("tier", "In", &["silver", "gold"]),
                        expression("backup", "Exists", &[]),
                        expression("legacy", "DoesNotExist", &[]),
                    ],
                ),
                "app=db,backup,!legacy,tier in (gold,silver),zone notin (z1,z2)",
            ),
        ];
        for (selector, want) in table {
            assert_eq!(format(&selector), want);
        }
    }
}
