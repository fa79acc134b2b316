//! The journal's pure rules on generated annotations and changes: entries written come back as they went in, what
//! the writer writes stays within its bounds, and `merge` keeps the promises of its docs.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::merge::*;

const PREFIXES: &[&str] = &["provisioner.storage.kubernetes.io/in-flight-", "example.com/j-", "j-"];

/// Keys that make a valid annotation name after any of `PREFIXES`: the claim UIDs the provisioner uses and others.
fn valid_key() -> impl Strategy<Value = String> {
    prop_oneof![
        "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        "[a-zA-Z0-9]([a-zA-Z0-9._-]{0,20}[a-zA-Z0-9])?",
    ]
}

/// Annotations that are not entries under any of `PREFIXES` (no `-`, so none starts with `j-`).
fn other_annotations() -> impl Strategy<Value = BTreeMap<String, String>> {
    prop::collection::btree_map("([a-z]{1,8}\\.io/)?[a-z0-9]{1,12}", ".{0,20}", 0..4)
}

/// Keys from a small pool, so that changes meet entries the Lease holds; some make no annotation name.
fn pooled_key() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => prop::sample::select(vec!["a", "b", "c", "d", "e", "f0", "g-1", "h.2"]).prop_map(str::to_string),
        1 => prop::sample::select(vec!["", "x/y", "-x", "x-", "UP/x", "sp ace", "é"]).prop_map(str::to_string),
        1 => "[a-z]{60,70}",
    ]
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof![3 => ".{0,12}", 1 => "[a-z]{20,80}"]
}

/// A Lease's annotations as the writer may meet them: entries under `P` (any size) and other annotations.
fn current() -> impl Strategy<Value = BTreeMap<String, String>> {
    (prop::collection::btree_map(pooled_key(), value(), 0..6), other_annotations()).prop_map(|(entries, mut others)| {
        others.extend(entries.into_iter().map(|(k, v)| (format!("{P}{k}"), v)));
        others
    })
}

const P: &str = "example.com/j-";

/// Callers' puts and removals in the order they arrived.
fn operations() -> impl Strategy<Value = Vec<(String, Option<String>)>> {
    prop::collection::vec((pooled_key(), prop::option::weighted(0.7, value())), 0..10)
}

fn changes_of(operations: &[(String, Option<String>)]) -> Changes {
    let mut changes = Changes::default();
    for (key, value) in operations {
        match value {
            Some(value) => changes.set(key, value.clone()),
            None => changes.remove(key),
        }
    }
    changes
}

fn bounds() -> impl Strategy<Value = Bounds> {
    prop_oneof![
        3 => (0usize..400, 0usize..120).prop_map(|(total, entry)| Bounds { total, entry }),
        1 => Just(Bounds::default()),
    ]
}

proptest! {
    #[test]
    fn written_entries_read_back_as_they_went_in(
        prefix in prop::sample::select(PREFIXES),
        entries in prop::collection::btree_map(valid_key(), ".{0,40}", 0..20),
        others in other_annotations(),
    ) {
        let mut changes = Changes::default();
        for (key, value) in &entries {
            changes.set(key, value.clone());
        }
        let merged = merge(&others, prefix, &changes, Bounds::default());
        prop_assert!(merged.refused.is_empty(), "{:?}", merged.refused);
        prop_assert_eq!(super::merge::entries(&merged.annotations, prefix), entries);
        let kept: BTreeMap<String, String> =
            merged.annotations.into_iter().filter(|(name, _)| !name.starts_with(prefix)).collect();
        prop_assert_eq!(kept, others);
    }

    #[test]
    fn reading_any_annotations_gives_exactly_the_prefixed_ones(
        prefix in prop::sample::select(PREFIXES),
        annotations in prop::collection::btree_map(
            prop_oneof![".{0,30}", prop::sample::select(PREFIXES).prop_flat_map(|p| ".{0,10}".prop_map(move |k| format!("{p}{k}")))],
            ".{0,30}",
            0..12,
        ),
    ) {
        let entries = super::merge::entries(&annotations, prefix);
        prop_assert_eq!(entries.len(), annotations.keys().filter(|name| name.starts_with(prefix)).count());
        for (key, value) in &entries {
            prop_assert_eq!(annotations.get(&format!("{prefix}{key}")), Some(value));
        }
    }

    #[test]
    fn what_the_writer_writes_reads_back_within_its_bounds(
        bounds in bounds(),
        others in other_annotations(),
        writes in prop::collection::vec(operations(), 1..6),
    ) {
        // A Lease that only the writer fills, write after write: every entry read from it is one the bounds allow.
        let mut annotations = others.clone();
        for operations in &writes {
            annotations = merge(&annotations, P, &changes_of(operations), bounds).annotations;
            for (key, value) in super::merge::entries(&annotations, P) {
                let name = format!("{P}{key}");
                prop_assert!(valid_annotation_key(&name), "{:?}", name);
                prop_assert!(name.len() + value.len() <= bounds.entry, "{:?}", name);
            }
            let entries_size = annotations_size(&annotations) - annotations_size(&others);
            prop_assert!(entries_size == 0 || annotations_size(&annotations) <= bounds.total);
        }
    }

    #[test]
    fn merge_does_what_its_docs_say(
        bounds in bounds(),
        current in current(),
        operations in operations(),
    ) {
        let changes = changes_of(&operations);
        let merged = merge(&current, P, &changes, bounds);
        for (name, value) in &current {
            let key = name.strip_prefix(P);
            if key.is_none_or(|key| !changes.0.contains_key(key)) {
                // Other annotations, and entries no change names, are left alone.
                prop_assert_eq!(merged.annotations.get(name), Some(value), "{:?}", name);
            }
        }
        for name in merged.annotations.keys() {
            let changed = name.strip_prefix(P).is_some_and(|key| changes.0.contains_key(key));
            prop_assert!(current.contains_key(name) || changed, "{:?} came from nowhere", name);
        }
        for (key, change) in &changes.0 {
            let name = format!("{P}{key}");
            let entry = name.len() + change.as_ref().map_or(0, String::len);
            match (change, merged.refused.get(key)) {
                (None, refused) => {
                    prop_assert!(refused.is_none());
                    prop_assert!(!merged.annotations.contains_key(&name), "{:?} removed but kept", key);
                }
                (Some(value), None) => prop_assert_eq!(merged.annotations.get(&name), Some(value)),
                (Some(_), Some(refused)) => {
                    // A refused value leaves the Lease's as it was.
                    prop_assert_eq!(merged.annotations.get(&name), current.get(&name));
                    let want = if !valid_annotation_key(&name) {
                        Refused::InvalidKey(name.clone())
                    } else if entry > bounds.entry {
                        Refused::EntryTooBig { size: entry, limit: bounds.entry }
                    } else {
                        Refused::Full
                    };
                    prop_assert_eq!(refused, &want);
                }
            }
        }
        for key in taken(&changes, &merged) {
            prop_assert!(merged.annotations.contains_key(&format!("{P}{key}")), "{:?} taken but not written", key);
        }
        // Sets never grow the annotations past the total; removals only shrink them.
        let size = annotations_size(&merged.annotations);
        prop_assert!(size <= bounds.total.max(annotations_size(&current)));
        if !taken(&changes, &merged).is_empty() {
            prop_assert!(size <= bounds.total, "{} > {}", size, bounds.total);
        }
    }

    #[test]
    fn removals_make_room_before_the_values_go_in(
        bounds in bounds(),
        current in current(),
        operations in operations(),
    ) {
        let changes = changes_of(&operations);
        let (removals, sets): (BTreeMap<_, _>, BTreeMap<_, _>) =
            changes.0.clone().into_iter().partition(|(_, value)| value.is_none());
        let removed = merge(&current, P, &Changes(removals), bounds);
        prop_assert!(removed.refused.is_empty());
        let after = merge(&removed.annotations, P, &Changes(sets), bounds);
        prop_assert_eq!(merge(&current, P, &changes, bounds), after);
    }

    #[test]
    fn a_later_change_of_a_key_replaces_an_earlier_one(operations in operations()) {
        // Only each key's last change counts, so changes of different keys commute.
        let mut last: BTreeMap<String, Option<String>> = BTreeMap::new();
        for (key, value) in &operations {
            last.insert(key.clone(), value.clone());
        }
        prop_assert_eq!(&changes_of(&operations).0, &last);
        let mut by_key = operations.clone();
        by_key.sort_by(|a, b| a.0.cmp(&b.0));
        let mut reversed_keys = operations.clone();
        reversed_keys.sort_by(|a, b| b.0.cmp(&a.0));
        prop_assert_eq!(changes_of(&by_key), changes_of(&operations));
        prop_assert_eq!(changes_of(&reversed_keys), changes_of(&operations));
    }

    #[test]
    fn merging_the_same_changes_again_writes_nothing_when_none_was_refused_for_room(
        bounds in bounds(),
        current in current(),
        operations in operations(),
    ) {
        // The writer skips a write whose merge gives the Lease back unchanged; so a Lease that already holds every
        // change (none refused for want of room) merges to itself.
        let changes = changes_of(&operations);
        let once = merge(&current, P, &changes, bounds);
        prop_assume!(!once.refused.values().any(|r| *r == Refused::Full));
        let twice = merge(&once.annotations, P, &changes, bounds);
        prop_assert_eq!(twice, once);
    }
}
