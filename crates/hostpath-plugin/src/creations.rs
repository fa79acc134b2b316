//! What each Create call did with its name: made a new backend object, or answered with the one that already
//! existed under that name.
//!
//! CSI makes CreateVolume, CreateSnapshot and CreateVolumeGroupSnapshot idempotent by name, so a CO may call them
//! as often as it likes; what must never happen is a second backend object for one name (two leaders both
//! creating, or a recovery creating again what was already deleted). Those are the side effects a failover or a
//! restart could duplicate, and tests need to see them from outside. The counts are kept in `state.json` (field
//! `creations`), written in the same change as the object they count, so a kill at any instruction neither loses
//! a creation nor counts one that did not happen:
//!
//! ```json
//! "creations": {
//!   "volumes": {"pvc-1a2b": {"created": [{"seconds": 1795000000, "nanos": 0}], "existing": 2}},
//!   "snapshots": {},
//!   "group_snapshots": {}
//! }
//! ```
//!
//! `created` holds when each call that made a new object did so: more than one entry means the name was made
//! twice (after a DeleteX, or never, in between). `existing` counts the calls answered with the object that was
//! there. Calls that failed are not counted. Entries stay after the object is deleted, so a later creation under
//! the same name is seen.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::instant::Instant;

/// The kind of object a Create call names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Volume,
    Snapshot,
    GroupSnapshot,
}

impl Kind {
    /// The RPC that creates this kind, for log lines.
    pub fn method(self) -> &'static str {
        match self {
            Kind::Volume => "CreateVolume",
            Kind::Snapshot => "CreateSnapshot",
            Kind::GroupSnapshot => "CreateVolumeGroupSnapshot",
        }
    }
}

/// What one successful Create call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A new backend object was made.
    Created,
    /// The object that already had this name was returned.
    Existing,
}

/// The successful Create calls of one name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateCalls {
    /// When each call that made a new object did so.
    #[serde(default)]
    pub created: Vec<Instant>,
    /// How many calls were answered with the existing object.
    #[serde(default)]
    pub existing: u64,
}

/// The successful Create calls of every name, by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Creations {
    #[serde(default)]
    pub volumes: BTreeMap<String, CreateCalls>,
    #[serde(default)]
    pub snapshots: BTreeMap<String, CreateCalls>,
    #[serde(default)]
    pub group_snapshots: BTreeMap<String, CreateCalls>,
}

impl Creations {
    /// Counts one successful call; returns how many objects have now been made under this name, so the caller can
    /// say so when it is more than one.
    pub fn record(&mut self, kind: Kind, name: &str, outcome: Outcome, at: Instant) -> usize {
        let calls = self.of_kind(kind).entry(name.to_string()).or_default();
        match outcome {
            Outcome::Created => calls.created.push(at),
            Outcome::Existing => calls.existing += 1,
        }
        calls.created.len()
    }

    fn of_kind(&mut self, kind: Kind) -> &mut BTreeMap<String, CreateCalls> {
        match kind {
            Kind::Volume => &mut self.volumes,
            Kind::Snapshot => &mut self.snapshots,
            Kind::GroupSnapshot => &mut self.group_snapshots,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Instant {
        Instant { seconds, nanos: 0 }
    }

    #[test]
    fn counts_each_call_under_its_kind_and_name() {
        use Kind::*;
        use Outcome::*;
        // (calls so far, the next call, objects made under its name after it, its calls after it)
        type Call = (Kind, &'static str, Outcome, i64);
        let table: [(&[Call], Call, usize, CreateCalls); 6] = [
            // A first call that makes the object.
            (&[], (Volume, "pvc-a", Created, 1), 1, CreateCalls { created: vec![at(1)], existing: 0 }),
            // Calls again for the same name find it: no new object.
            (
                &[(Volume, "pvc-a", Created, 1)],
                (Volume, "pvc-a", Existing, 2),
                1,
                CreateCalls { created: vec![at(1)], existing: 1 },
            ),
            // A second creation under one name (after a delete, or a lost object) is kept with its time.
            (
                &[(Volume, "pvc-a", Created, 1), (Volume, "pvc-a", Existing, 2)],
                (Volume, "pvc-a", Created, 3),
                2,
                CreateCalls { created: vec![at(1), at(3)], existing: 1 },
            ),
            // Other names are counted apart.
            (
                &[(Volume, "pvc-a", Created, 1)],
                (Volume, "pvc-b", Created, 2),
                1,
                CreateCalls { created: vec![at(2)], existing: 0 },
            ),
            // A snapshot may share a volume's name: kinds are counted apart.
            (
                &[(Volume, "x", Created, 1)],
                (Snapshot, "x", Created, 2),
                1,
                CreateCalls { created: vec![at(2)], existing: 0 },
            ),
            // An answer with an object made before the counts existed: nothing made under this name yet.
            (&[], (GroupSnapshot, "g", Existing, 1), 0, CreateCalls { created: vec![], existing: 1 }),
        ];
        for (before, (kind, name, outcome, seconds), made, calls) in table {
            let mut creations = Creations::default();
            for (kind, name, outcome, seconds) in before {
                creations.record(*kind, name, *outcome, at(*seconds));
            }
            assert_eq!(creations.record(kind, name, outcome, at(seconds)), made, "{kind:?} {name} {outcome:?}");
            assert_eq!(creations.of_kind(kind)[name], calls, "{kind:?} {name} {outcome:?}");
        }
    }

    #[test]
    fn reads_a_state_file_written_before_the_counts() {
        let creations: Creations = serde_json::from_str("{}").unwrap();
        assert_eq!(creations, Creations::default());
        let calls: CreateCalls = serde_json::from_str(r#"{"existing": 2}"#).unwrap();
        assert_eq!(calls, CreateCalls { created: vec![], existing: 2 });
    }
}
