//! The journal's pure rules: how pending changes fold into the Lease's annotations, within the size the API server
//! accepts.

use std::collections::{BTreeMap, BTreeSet};

/// The API server refuses an object whose annotations (keys and values) total more than this (256 KiB).
pub const ANNOTATIONS_LIMIT: usize = 256 * 1024;

/// How much of [`ANNOTATIONS_LIMIT`] the journal fills, and the largest single entry it takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    pub total: usize,
    pub entry: usize,
}

impl Default for Bounds {
    /// 224 KiB in all (a 32 KiB margin for anything else a user puts on the Lease), 16 KiB per entry.
    fn default() -> Bounds {
        Bounds { total: ANNOTATIONS_LIMIT - 32 * 1024, entry: 16 * 1024 }
    }
}

/// Why an entry was not taken: its owner must protect its work another way.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("the entry ({size} bytes) is larger than a journal entry may be ({limit} bytes)")]
    EntryTooBig { size: usize, limit: usize },
    #[error("the journal is full")]
    Full,
    #[error("{0:?} is not a valid annotation name")]
    InvalidKey(String),
    #[error("the journal cannot be written: {0}")]
    Unavailable(String),
}

/// What waits for the next write: per key, the value to set (`Some`) or the removal (`None`). A later change of a
/// key replaces an earlier one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Changes(pub BTreeMap<String, Option<String>>);

impl Changes {
    pub fn set(&mut self, key: &str, value: String) {
        self.0.insert(key.to_string(), Some(value));
    }

    pub fn remove(&mut self, key: &str) {
        self.0.insert(key.to_string(), None);
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether a value waits to be set (a write is due at once).
    pub fn has_sets(&self) -> bool {
        self.0.values().any(Option::is_some)
    }
}

/// The annotations after a write, and the keys whose value was not taken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Merged {
    pub annotations: BTreeMap<String, String>,
    pub refused: BTreeMap<String, Refused>,
}

/// The total size the API server counts for `annotations`: every key and value, in bytes.
pub fn annotations_size(annotations: &BTreeMap<String, String>) -> usize {
    annotations.iter().map(|(k, v)| k.len() + v.len()).sum()
}

/// Folds `changes` into `current` (the Lease's annotations as last read), entries named `prefix` + key: removals
/// first (they make room), then the values in key order while they fit. Annotations that are not entries (another
/// prefix) are left alone but count towards the size.
pub fn merge(current: &BTreeMap<String, String>, prefix: &str, changes: &Changes, bounds: Bounds) -> Merged {
    let mut annotations = current.clone();
    for (key, value) in &changes.0 {
        if value.is_none() {
            annotations.remove(&format!("{prefix}{key}"));
        }
    }
    let mut size = annotations_size(&annotations);
    let mut refused = BTreeMap::new();
    for (key, value) in &changes.0 {
        let Some(value) = value else { continue };
        let name = format!("{prefix}{key}");
        if !valid_annotation_key(&name) {
            refused.insert(key.clone(), Refused::InvalidKey(name));
            continue;
        }
        let entry = name.len() + value.len();
        if entry > bounds.entry {
            refused.insert(key.clone(), Refused::EntryTooBig { size: entry, limit: bounds.entry });
            continue;
        }
        let replaced = annotations.get(&name).map_or(0, |old| name.len() + old.len());
        if size - replaced + entry > bounds.total {
            refused.insert(key.clone(), Refused::Full);
            continue;
        }
        size = size - replaced + entry;
        annotations.insert(name, value.clone());
    }
    Merged { annotations, refused }
}

/// The entries among `annotations`: those named `prefix` + key, by key.
pub fn entries(annotations: &BTreeMap<String, String>, prefix: &str) -> BTreeMap<String, String> {
    annotations
        .iter()
        .filter_map(|(name, value)| Some((name.strip_prefix(prefix)?.to_string(), value.clone())))
        .collect()
}

/// Kubernetes' rule for annotation keys: an optional DNS-subdomain prefix and `/`, then a name of at most 63
/// characters, alphanumeric at both ends with `-`, `_` and `.` inside.
pub fn valid_annotation_key(key: &str) -> bool {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|label| {
                !label.is_empty()
                    && label.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    && !label.starts_with('-')
                    && !label.ends_with('-')
            })
    });
    name_ok && prefix_ok
}

/// The keys of `changes` that were set (not refused): their callers may go on.
pub fn taken<'a>(changes: &'a Changes, merged: &'a Merged) -> BTreeSet<&'a str> {
    changes.0.iter().filter(|(k, v)| v.is_some() && !merged.refused.contains_key(*k)).map(|(k, _)| k.as_str()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: &str = "example.com/j-";

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn changes(list: &[(&str, Option<&str>)]) -> Changes {
        let mut changes = Changes::default();
        for (key, value) in list {
            match value {
                Some(v) => changes.set(key, v.to_string()),
                None => changes.remove(key),
            }
        }
        changes
    }

    /// (rule, current annotations, changes, bounds, annotations after, refused keys)
    type Row<'a> = (
        &'a str,
        &'a [(&'a str, &'a str)],
        &'a [(&'a str, Option<&'a str>)],
        Bounds,
        &'a [(&'a str, &'a str)],
        &'a [(&'a str, Refused)],
    );

    #[test]
    fn changes_fold_into_the_annotations() {
        let small = Bounds { total: 100, entry: 40 };
        let table: &[Row] = &[
            (
                "adds from many callers go in one write",
                &[],
                &[("a", Some("1")), ("b", Some("2"))],
                small,
                &[("example.com/j-a", "1"), ("example.com/j-b", "2")],
                &[],
            ),
            (
                "a removal and an add of other keys",
                &[("example.com/j-a", "1")],
                &[("a", None), ("b", Some("2"))],
                small,
                &[("example.com/j-b", "2")],
                &[],
            ),
            (
                "a later change of a key wins (set after remove)",
                &[("example.com/j-a", "1")],
                &[("a", Some("3"))],
                small,
                &[("example.com/j-a", "3")],
                &[],
            ),
            ("removing what is not there is nothing", &[], &[("a", None)], small, &[], &[]),
            (
                "annotations of others are kept",
                &[("owner", "x")],
                &[("a", Some("1"))],
                small,
                &[("example.com/j-a", "1"), ("owner", "x")],
                &[],
            ),
            (
                "an entry larger than an entry may be is refused",
                &[],
                &[("a", Some(&"v".repeat(30)))],
                small,
                &[],
                &[("a", Refused::EntryTooBig { size: 45, limit: 40 })],
            ),
            (
                "a full journal refuses, what fits goes in",
                &[("owner", &"x".repeat(60))],
                &[("a", Some("1")), ("b", Some(&"2".repeat(20)))],
                small,
                &[("example.com/j-a", "1"), ("owner", &"x".repeat(60))],
                &[("b", Refused::Full)],
            ),
            (
                "removals make room first",
                &[("example.com/j-old", &"x".repeat(25)), ("owner", &"x".repeat(40))],
                &[("b", Some(&"2".repeat(20))), ("old", None)],
                small,
                &[("example.com/j-b", &"2".repeat(20)), ("owner", &"x".repeat(40))],
                &[],
            ),
            (
                "replacing an entry counts only the difference",
                &[("example.com/j-a", &"1".repeat(25)), ("owner", &"x".repeat(55))],
                &[("a", Some(&"2".repeat(25)))],
                small,
                &[("example.com/j-a", &"2".repeat(25)), ("owner", &"x".repeat(55))],
                &[],
            ),
            (
                "a key that makes no annotation name is refused",
                &[],
                &[("a/b", Some("1"))],
                small,
                &[],
                &[("a/b", Refused::InvalidKey("example.com/j-a/b".into()))],
            ),
        ];
        for (rule, current, list, bounds, want, refused) in table {
            let changes = changes(list);
            let merged = merge(&map(current), P, &changes, *bounds);
            assert_eq!(merged.annotations, map(want), "{rule}");
            let want_refused: BTreeMap<String, Refused> =
                refused.iter().map(|(k, r)| (k.to_string(), r.clone())).collect();
            assert_eq!(merged.refused, want_refused, "{rule}");
            assert!(
                annotations_size(&merged.annotations) <= bounds.total.max(annotations_size(&map(current))),
                "{rule}"
            );
            let taken = taken(&changes, &merged);
            for key in taken {
                assert!(merged.annotations.contains_key(&format!("{P}{key}")), "{rule}: {key} taken but not written");
            }
        }
    }

    #[test]
    fn the_default_bounds_stay_under_the_api_limit() {
        let bounds = Bounds::default();
        assert!(bounds.total < ANNOTATIONS_LIMIT);
        assert!(bounds.entry < bounds.total);
    }

    #[test]
    fn entries_are_the_prefixed_annotations() {
        let annotations = map(&[("example.com/j-a", "1"), ("example.com/other", "2"), ("owner", "3")]);
        assert_eq!(entries(&annotations, P), map(&[("a", "1")]));
    }

    #[test]
    fn annotation_key_rules() {
        let table = [
            ("provisioner.storage.kubernetes.io/in-flight-0f1e2d3c-aaaa-bbbb-cccc-000011112222", true),
            ("plain-name", true),
            ("a/b/c", false),
            ("Upper.Case/name", false),
            ("example.com/", false),
            ("example.com/-dash", false),
            ("example.com/dash-", false),
            (&format!("example.com/{}", "n".repeat(64)), false),
            (&format!("example.com/{}", "n".repeat(63)), true),
        ];
        for (key, want) in table {
            assert_eq!(valid_annotation_key(key), want, "{key}");
        }
    }
}
