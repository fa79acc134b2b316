//! What must hold once a chaos run is quiet (faults off, every process up), as counts, and the closing lines.
//!
//! - a leaked volume is a backend volume that no PV names;
//! - a leaked snapshot is a backend group snapshot that no VolumeGroupSnapshotContent names, a backend snapshot that
//!   no VolumeSnapshotContent names and that is no member of such a live group, or a VolumeSnapshot or
//!   VolumeGroupSnapshot the run deleted that is still there (its storage is never freed);
//! - an orphan PV has no live claim, and is not a PV that its Retain policy keeps as Released;
//! - a lost claim is a claim the run did not delete that is missing or not Bound;
//! - a lost change is a requested size or VolumeAttributesClass the claim's status does not show, or a requested
//!   snapshot that is not there to use: a VolumeSnapshot the run did not delete that is missing or not readyToUse, a
//!   VolumeGroupSnapshot the run did not delete that is missing or not readyToUse, or lacks a ready member
//!   VolumeSnapshot for one of its claims;
//! - a stale journal entry is an entry of csi-provisioner's in-flight journal (an annotation of a Lease) once
//!   everything is quiet: every claim is Bound or gone then, so the entry should be too, even when nothing leaked;
//! - a duplicate call is a call to the driver by a replica of a sidecar after another replica of it had called
//!   since (two leaders at once; see [`crate::chaos::calls`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use crate::chaos::calls::{Call, duplicate_calls};

/// A PV as the invariants see it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct VolumeView {
    pub name: String,
    pub handle: String,
    /// `spec.claimRef.uid`.
    pub claim_uid: Option<String>,
    pub phase: Option<String>,
    pub reclaim_policy: Option<String>,
}

/// A claim as the invariants see it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ClaimView {
    pub name: String,
    pub uid: String,
    pub bound: bool,
    /// `status.capacity.storage` in bytes.
    pub capacity_bytes: Option<u64>,
    /// `status.currentVolumeAttributesClassName`.
    pub current_class: Option<String>,
}

/// A VolumeSnapshot or VolumeGroupSnapshot of the run's namespace as the invariants see it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SnapshotView {
    pub name: String,
    pub uid: String,
    /// `status.readyToUse`.
    pub ready: bool,
    /// The UID of the VolumeGroupSnapshot that owns it (a group member); None for a group or a single snapshot.
    pub group_uid: Option<String>,
}

/// A change the run asked for on a claim.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Change {
    pub size_bytes: Option<u64>,
    pub class: Option<String>,
}

/// Everything observed once quiet, and what the run expects.
#[derive(Debug, Clone, Default)]
pub struct Observation {
    pub backend_volumes: BTreeSet<String>,
    pub backend_snapshots: BTreeSet<String>,
    /// Backend group snapshots: group id → its member snapshot ids (also in `backend_snapshots`).
    pub backend_groups: BTreeMap<String, BTreeSet<String>>,
    /// The snapshot handles of every VolumeSnapshotContent of the driver.
    pub snapshot_handles: BTreeSet<String>,
    /// The group snapshot handles of every VolumeGroupSnapshotContent of the driver.
    pub group_handles: BTreeSet<String>,
    /// The namespace's VolumeSnapshots (single ones and group members).
    pub snapshots: Vec<SnapshotView>,
    /// The namespace's VolumeGroupSnapshots.
    pub groups: Vec<SnapshotView>,
    pub volumes: Vec<VolumeView>,
    pub claims: Vec<ClaimView>,
    /// Names of the claims the run did not delete.
    pub survivors: BTreeSet<String>,
    /// Changes by claim name.
    pub changes: BTreeMap<String, Change>,
    /// Names of the VolumeSnapshots the run created and did not delete.
    pub surviving_snapshots: BTreeSet<String>,
    /// Names of the VolumeGroupSnapshots the run created and did not delete, with the number of claims each took.
    pub surviving_groups: BTreeMap<String, usize>,
    /// Names of the VolumeGroupSnapshots the run deleted.
    pub deleted_groups: BTreeSet<String>,
    /// Names of the VolumeSnapshots the run deleted.
    pub deleted_snapshots: BTreeSet<String>,
    /// The in-flight journals' entries, as `<Lease>/<claim UID>`.
    pub journal_entries: Vec<String>,
    /// The changing calls the plugin served, in order, and which sidecar each process the run started is.
    pub calls: Vec<Call>,
    pub sidecar_of: BTreeMap<u32, String>,
    /// Process ids the run saw for two processes: their calls cannot be told apart.
    pub reused_pids: BTreeSet<u32>,
}

/// The counts of the last line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tally {
    pub leaked_volumes: usize,
    pub leaked_snapshots: usize,
    pub orphan_pvs: usize,
    pub lost_claims: usize,
    pub lost_changes: usize,
    pub stale_journal_entries: usize,
    pub duplicate_calls: usize,
}

impl Tally {
    pub fn clean(&self) -> bool {
        *self == Tally::default()
    }
}

impl fmt::Display for Tally {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "leaked volumes: {}, leaked snapshots: {}, orphan PVs: {}, lost claims: {}, lost changes: {}, \
             stale journal entries: {}, duplicate calls: {}",
            self.leaked_volumes,
            self.leaked_snapshots,
            self.orphan_pvs,
            self.lost_claims,
            self.lost_changes,
            self.stale_journal_entries,
            self.duplicate_calls
        )
    }
}

/// Each broken invariant's object names, so a failed run says which objects to look at.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Findings {
    pub leaked_volumes: Vec<String>,
    pub leaked_snapshots: Vec<String>,
    pub orphan_pvs: Vec<String>,
    pub lost_claims: Vec<String>,
    pub lost_changes: Vec<String>,
    pub stale_journal_entries: Vec<String>,
    pub duplicate_calls: Vec<String>,
}

impl Findings {
    pub fn tally(&self) -> Tally {
        Tally {
            leaked_volumes: self.leaked_volumes.len(),
            leaked_snapshots: self.leaked_snapshots.len(),
            orphan_pvs: self.orphan_pvs.len(),
            lost_claims: self.lost_claims.len(),
            lost_changes: self.lost_changes.len(),
            stale_journal_entries: self.stale_journal_entries.len(),
            duplicate_calls: self.duplicate_calls.len(),
        }
    }
}

impl Observation {
    pub fn findings(&self) -> Findings {
        let handles: BTreeSet<&str> = self.volumes.iter().map(|v| v.handle.as_str()).collect();
        let claims_by_uid: BTreeSet<&str> = self.claims.iter().map(|c| c.uid.as_str()).collect();
        let claims_by_name: BTreeMap<&str, &ClaimView> = self.claims.iter().map(|c| (c.name.as_str(), c)).collect();
        let leaked_volumes = self.backend_volumes.iter().filter(|id| !handles.contains(id.as_str())).cloned().collect();
        let leaked_snapshots = self.leaked_snapshots();
        let orphan_pvs = self
            .volumes
            .iter()
            .filter(|v| !v.claim_uid.as_deref().is_some_and(|uid| claims_by_uid.contains(uid)))
            .filter(|v| !(v.phase.as_deref() == Some("Released") && v.reclaim_policy.as_deref() == Some("Retain")))
            .map(|v| v.name.clone())
            .collect();
        let lost_claims = self
            .survivors
            .iter()
            .filter(|name| !claims_by_name.get(name.as_str()).is_some_and(|c| c.bound))
            .cloned()
            .collect();
        let mut lost_changes: Vec<String> = self
            .changes
            .iter()
            .filter(|(name, change)| !claims_by_name.get(name.as_str()).is_some_and(|claim| change.applied_to(claim)))
            .map(|(name, _)| name.clone())
            .collect();
        lost_changes.extend(self.lost_snapshots());
        let stale_journal_entries = self.journal_entries.clone();
        let duplicate_calls = duplicate_calls(&self.calls, &self.sidecar_of, &self.reused_pids);
        Findings {
            leaked_volumes,
            leaked_snapshots,
            orphan_pvs,
            lost_claims,
            lost_changes,
            stale_journal_entries,
            duplicate_calls,
        }
    }

    /// Backend group snapshots without a content, backend snapshots without a content outside a live group, and
    /// snapshots and group snapshots the run deleted that stay.
    fn leaked_snapshots(&self) -> Vec<String> {
        let live_groups: Vec<&String> =
            self.backend_groups.keys().filter(|g| self.group_handles.contains(*g)).collect();
        let live_members: BTreeSet<&String> = live_groups.iter().flat_map(|g| &self.backend_groups[*g]).collect();
        let groups =
            self.backend_groups.keys().filter(|g| !self.group_handles.contains(*g)).map(|g| format!("group {g}"));
        let snapshots = self
            .backend_snapshots
            .iter()
            .filter(|id| !self.snapshot_handles.contains(*id) && !live_members.contains(id))
            .cloned();
        let lingering = self
            .groups
            .iter()
            .filter(|g| self.deleted_groups.contains(&g.name))
            .map(|g| format!("VolumeGroupSnapshot {} (deleted)", g.name));
        let lingering_snapshots = self
            .snapshots
            .iter()
            .filter(|s| self.deleted_snapshots.contains(&s.name))
            .map(|s| format!("VolumeSnapshot {} (deleted)", s.name));
        groups.chain(snapshots).chain(lingering).chain(lingering_snapshots).collect()
    }

    /// Surviving VolumeSnapshots not ready, and surviving VolumeGroupSnapshots not ready or short of ready members.
    fn lost_snapshots(&self) -> Vec<String> {
        let ready_snapshot = |name: &str| self.snapshots.iter().any(|s| s.name == name && s.ready);
        let snapshots = self
            .surviving_snapshots
            .iter()
            .filter(|name| !ready_snapshot(name))
            .map(|name| format!("VolumeSnapshot {name}"));
        let ready_members =
            |uid: &str| self.snapshots.iter().filter(|s| s.ready && s.group_uid.as_deref() == Some(uid)).count();
        let groups = self
            .surviving_groups
            .iter()
            .filter(|(name, members)| {
                !self.groups.iter().any(|g| g.name == **name && g.ready && ready_members(&g.uid) >= **members)
            })
            .map(|(name, _)| format!("VolumeGroupSnapshot {name}"));
        snapshots.chain(groups).collect()
    }
}

impl Change {
    fn applied_to(&self, claim: &ClaimView) -> bool {
        let size_ok = self.size_bytes.is_none_or(|want| claim.capacity_bytes.is_some_and(|got| got >= want));
        let class_ok = self.class.is_none() || claim.current_class == self.class;
        size_ok && class_ok
    }
}

/// What the run did to the system, for the line before the last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Injected {
    pub faults: u64,
    pub kills: u64,
    pub restarts: u64,
    /// Leaders stopped (SIGSTOP) past their Lease and then resumed.
    pub pauses: u64,
    /// Answers of the API proxy that were not the API server's (errors, cut connections, expired watches).
    pub api_faults: u64,
}

impl Injected {
    pub fn line(&self, quiesce: Duration) -> String {
        format!(
            "injected: {} faults, {} kills, {} restarts, {} pauses, {} API faults; quiet {:.1} s after the last fault",
            self.faults,
            self.kills,
            self.restarts,
            self.pauses,
            self.api_faults,
            quiesce.as_secs_f64()
        )
    }
}

/// How many of a phase's objects have not settled yet: a survivor missing or not ready, or a deleted one still
/// there. `present` is what the namespace holds, by name, with its readiness.
pub fn unsettled<'a>(
    present: &BTreeMap<String, bool>,
    survivors: impl IntoIterator<Item = &'a String>,
    deleted: &BTreeSet<String>,
) -> usize {
    let waiting = survivors.into_iter().filter(|name| present.get(*name) != Some(&true)).count();
    waiting + deleted.iter().filter(|name| present.contains_key(*name)).count()
}

/// Bytes of a Kubernetes quantity with a binary or decimal suffix (`1Mi`, `2G`, `1048576`); None for forms a
/// storage size does not take.
pub fn quantity_bytes(text: &str) -> Option<u64> {
    const SUFFIXES: &[(&str, u64)] = &[
        ("Ki", 1 << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("Ti", 1 << 40),
        ("k", 1_000),
        ("M", 1_000_000),
        ("G", 1_000_000_000),
        ("T", 1_000_000_000_000),
    ];
    let text = text.trim();
    let (number, factor) = SUFFIXES
        .iter()
        .find_map(|(suffix, factor)| text.strip_suffix(suffix).map(|n| (n, *factor)))
        .unwrap_or((text, 1));
    number.parse::<u64>().ok()?.checked_mul(factor)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    fn pv(name: &str, handle: &str, uid: Option<&str>, phase: &str, policy: &str) -> VolumeView {
        VolumeView {
            name: name.into(),
            handle: handle.into(),
            claim_uid: uid.map(String::from),
            phase: Some(phase.into()),
            reclaim_policy: Some(policy.into()),
        }
    }

    fn claim(name: &str, uid: &str, bound: bool) -> ClaimView {
        ClaimView { name: name.into(), uid: uid.into(), bound, capacity_bytes: Some(1 << 20), current_class: None }
    }

    fn view(name: &str, uid: &str, ready: bool, group_uid: Option<&str>) -> SnapshotView {
        SnapshotView { name: name.into(), uid: uid.into(), ready, group_uid: group_uid.map(String::from) }
    }

    /// A quiet, clean world: two bound claims, their PVs and backend volumes, one snapshot with its content, and a
    /// group snapshot of both claims with its content, its two members and their contents.
    fn clean() -> Observation {
        Observation {
            backend_volumes: set(&["vol-a", "vol-b"]),
            backend_snapshots: set(&["snap-1", "snap-2", "snap-3"]),
            backend_groups: BTreeMap::from([("gs-1".to_string(), set(&["snap-2", "snap-3"]))]),
            snapshot_handles: set(&["snap-1", "snap-2", "snap-3"]),
            group_handles: set(&["gs-1"]),
            snapshots: vec![
                view("s", "u-s", true, None),
                view("m-a", "u-ma", true, Some("u-g")),
                view("m-b", "u-mb", true, Some("u-g")),
            ],
            groups: vec![view("g", "u-g", true, None)],
            volumes: vec![
                pv("pv-a", "vol-a", Some("u-a"), "Bound", "Delete"),
                pv("pv-b", "vol-b", Some("u-b"), "Bound", "Delete"),
            ],
            claims: vec![claim("a", "u-a", true), claim("b", "u-b", true)],
            survivors: set(&["a", "b"]),
            changes: BTreeMap::new(),
            surviving_snapshots: set(&["s"]),
            surviving_groups: BTreeMap::from([("g".to_string(), 2)]),
            deleted_groups: set(&["gone"]),
            deleted_snapshots: set(&["gone-s"]),
            journal_entries: Vec::new(),
            calls: Vec::new(),
            sidecar_of: BTreeMap::new(),
            reused_pids: BTreeSet::new(),
        }
    }

    /// One row: what is broken, how, and the counts that must show it.
    type Row = (&'static str, fn(&mut Observation), Tally);

    #[test]
    fn each_rule_counts_its_own_breakage() {
        let rows: &[Row] = &[
            ("clean", |_| {}, Tally::default()),
            (
                "backend volume without a PV",
                |o| {
                    o.backend_volumes.insert("vol-x".into());
                },
                Tally { leaked_volumes: 1, ..Tally::default() },
            ),
            (
                "backend snapshot without a content",
                |o| {
                    o.backend_snapshots.insert("snap-x".into());
                },
                Tally { leaked_snapshots: 1, ..Tally::default() },
            ),
            (
                "a content whose backend snapshot is gone is no leak",
                |o| {
                    o.snapshot_handles.insert("snap-gone".into());
                },
                Tally::default(),
            ),
            (
                "PV of a deleted claim, policy Delete",
                |o| {
                    o.backend_volumes.insert("vol-c".into());
                    o.volumes.push(pv("pv-c", "vol-c", Some("u-deleted"), "Released", "Delete"));
                },
                Tally { orphan_pvs: 1, ..Tally::default() },
            ),
            (
                "PV kept Released by Retain",
                |o| {
                    o.backend_volumes.insert("vol-c".into());
                    o.volumes.push(pv("pv-c", "vol-c", Some("u-deleted"), "Released", "Retain"));
                },
                Tally::default(),
            ),
            (
                "PV without a claimRef",
                |o| {
                    o.backend_volumes.insert("vol-c".into());
                    o.volumes.push(pv("pv-c", "vol-c", None, "Available", "Delete"));
                },
                Tally { orphan_pvs: 1, ..Tally::default() },
            ),
            (
                "PV bound to an older claim of the same name",
                |o| o.volumes[0].claim_uid = Some("u-old".into()),
                Tally { orphan_pvs: 1, ..Tally::default() },
            ),
            ("survivor Pending", |o| o.claims[1].bound = false, Tally { lost_claims: 1, ..Tally::default() }),
            (
                "survivor gone",
                |o| {
                    o.claims.pop();
                    o.volumes.pop();
                    o.backend_volumes.remove("vol-b");
                },
                Tally { lost_claims: 1, ..Tally::default() },
            ),
            (
                "expansion shown in the status",
                |o| {
                    o.claims[0].capacity_bytes = Some(2 << 20);
                    o.changes.insert("a".into(), Change { size_bytes: Some(2 << 20), class: None });
                },
                Tally::default(),
            ),
            (
                "expansion never applied",
                |o| {
                    o.changes.insert("a".into(), Change { size_bytes: Some(2 << 20), class: None });
                },
                Tally { lost_changes: 1, ..Tally::default() },
            ),
            (
                "class never applied",
                |o| {
                    o.claims[1].current_class = Some("silver".into());
                    o.changes.insert("b".into(), Change { size_bytes: None, class: Some("gold".into()) });
                },
                Tally { lost_changes: 1, ..Tally::default() },
            ),
            (
                "class applied",
                |o| {
                    o.claims[1].current_class = Some("gold".into());
                    o.changes.insert("b".into(), Change { size_bytes: None, class: Some("gold".into()) });
                },
                Tally::default(),
            ),
            (
                "storage group snapshot without a content, its members' contents there",
                |o| {
                    o.group_handles.clear();
                },
                Tally { leaked_snapshots: 1, ..Tally::default() },
            ),
            (
                "storage group snapshot and its members without contents",
                |o| {
                    o.group_handles.clear();
                    o.snapshot_handles = set(&["snap-1"]);
                },
                Tally { leaked_snapshots: 3, ..Tally::default() },
            ),
            (
                "member of a live group without a content of its own",
                |o| {
                    o.snapshot_handles.remove("snap-3");
                },
                Tally::default(),
            ),
            (
                "a group content whose storage group is gone is no leak",
                |o| {
                    o.group_handles.insert("gs-gone".into());
                },
                Tally::default(),
            ),
            (
                "group snapshot the run deleted still there",
                |o| o.groups.push(view("gone", "u-gone", true, None)),
                Tally { leaked_snapshots: 1, ..Tally::default() },
            ),
            (
                "surviving snapshot not ready",
                |o| o.snapshots[0].ready = false,
                Tally { lost_changes: 1, ..Tally::default() },
            ),
            (
                "surviving snapshot gone",
                |o| {
                    o.snapshots.remove(0);
                },
                Tally { lost_changes: 1, ..Tally::default() },
            ),
            (
                "a snapshot the run neither kept nor deleted may be anything",
                |o| o.snapshots.push(view("other", "u-o", false, None)),
                Tally::default(),
            ),
            (
                "a snapshot the run deleted still there",
                |o| o.snapshots.push(view("gone-s", "u-gs", true, None)),
                Tally { leaked_snapshots: 1, ..Tally::default() },
            ),
            (
                "an in-flight journal entry once quiet",
                |o| o.journal_entries.push("driver-in-flight/u-a".into()),
                Tally { stale_journal_entries: 1, ..Tally::default() },
            ),
            (
                "a replica calling the driver after another took over",
                |o| {
                    o.sidecar_of = BTreeMap::from([(1, "csi-provisioner".into()), (2, "csi-provisioner".into())]);
                    o.calls = [1, 2, 1].map(|pid| Call { method: "CreateVolume".into(), pid }).to_vec();
                },
                Tally { duplicate_calls: 1, ..Tally::default() },
            ),
            ("surviving group not ready", |o| o.groups[0].ready = false, Tally { lost_changes: 1, ..Tally::default() }),
            (
                "surviving group with a member not ready",
                |o| o.snapshots[2].ready = false,
                Tally { lost_changes: 1, ..Tally::default() },
            ),
            (
                "surviving group with a member missing",
                |o| {
                    o.snapshots.pop();
                },
                Tally { lost_changes: 1, ..Tally::default() },
            ),
            (
                "members of another group do not count",
                |o| {
                    o.snapshots[2].group_uid = Some("u-other".into());
                },
                Tally { lost_changes: 1, ..Tally::default() },
            ),
            ("surviving group gone", |o| o.groups.clear(), Tally { lost_changes: 1, ..Tally::default() }),
            (
                "change on a claim that is gone",
                |o| {
                    o.changes.insert("z".into(), Change { size_bytes: Some(1), class: None });
                },
                Tally { lost_changes: 1, ..Tally::default() },
            ),
        ];
        for (what, breakage, want) in rows {
            let mut observation = clean();
            breakage(&mut observation);
            assert_eq!(observation.findings().tally(), *want, "{what}");
        }
    }

    #[test]
    fn findings_name_the_objects() {
        let mut observation = clean();
        observation.backend_volumes.insert("vol-x".into());
        observation.claims[0].bound = false;
        observation.group_handles.clear();
        observation.groups[0].ready = false;
        observation.journal_entries.push("driver-in-flight/u-b".into());
        let findings = observation.findings();
        assert_eq!(findings.leaked_volumes, ["vol-x"]);
        assert_eq!(findings.leaked_snapshots, ["group gs-1"]);
        assert_eq!(findings.lost_claims, ["a"]);
        assert_eq!(findings.lost_changes, ["VolumeGroupSnapshot g"]);
        assert_eq!(findings.stale_journal_entries, ["driver-in-flight/u-b"]);
    }

    #[test]
    fn last_lines_read_as_the_issue_asks() {
        let tally = Tally {
            leaked_volumes: 1,
            leaked_snapshots: 2,
            orphan_pvs: 3,
            lost_claims: 4,
            lost_changes: 5,
            stale_journal_entries: 6,
            duplicate_calls: 7,
        };
        assert_eq!(
            tally.to_string(),
            "leaked volumes: 1, leaked snapshots: 2, orphan PVs: 3, lost claims: 4, lost changes: 5, \
             stale journal entries: 6, duplicate calls: 7"
        );
        assert!(!tally.clean());
        assert!(Tally::default().clean());
        let injected = Injected { faults: 120, kills: 9, restarts: 2, pauses: 4, api_faults: 300 };
        assert_eq!(
            injected.line(Duration::from_millis(12_340)),
            "injected: 120 faults, 9 kills, 2 restarts, 4 pauses, 300 API faults; quiet 12.3 s after the last fault"
        );
    }

    #[test]
    fn counts_what_has_not_settled() {
        let present: BTreeMap<String, bool> =
            [("ready", true), ("cutting", false), ("going", true)].iter().map(|(n, r)| (n.to_string(), *r)).collect();
        let rows: &[(&[&str], &[&str], usize)] = &[
            (&["ready"], &[], 0),
            (&["ready", "cutting"], &[], 1),
            (&["ready", "never-created"], &[], 1),
            (&["ready"], &["going"], 1),
            (&["ready"], &["gone"], 0),
            (&["cutting", "missing"], &["going", "gone"], 3),
        ];
        for (survivors, deleted, want) in rows {
            let survivors = set(survivors);
            assert_eq!(unsettled(&present, &survivors, &set(deleted)), *want, "{survivors:?} / {deleted:?}");
        }
    }

    #[test]
    fn reads_storage_quantities() {
        let rows: &[(&str, Option<u64>)] = &[
            ("1Mi", Some(1 << 20)),
            ("2Gi", Some(2 << 30)),
            ("1048576", Some(1 << 20)),
            ("5M", Some(5_000_000)),
            ("3k", Some(3_000)),
            ("1.5Gi", None),
            ("Mi", None),
            ("", None),
        ];
        for (text, want) in rows {
            assert_eq!(quantity_bytes(text), *want, "{text:?}");
        }
    }
}
