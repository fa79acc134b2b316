//! Telling the watch events of our own claim writes from everybody else's.
//!
//! Each provisioning attempt writes the claim (the provisioning-protection finalizer goes on before CreateVolume
//! and, when the driver refuses, comes off again). Were those writes' watch events to queue the claim, a failing
//! claim would run again at once after every attempt and its backoff would never apply. The API's answer to a write
//! carries the new resourceVersion, but the watch event can arrive before that answer, so versions seen while a
//! write is in flight are held until the write returns: its own version is dropped, any other means somebody else
//! changed the claim.

use std::collections::HashMap;

/// How many of our versions the watch has not shown yet are kept per claim (a relist can skip some).
const UNSEEN_KEPT: usize = 4;

#[derive(Debug, Default)]
struct ClaimWrites {
    in_flight: usize,
    /// Versions the watch showed while a write was in flight: ours or not, decided when the write returns.
    held: Vec<String>,
    /// Versions our writes produced that the watch has not shown yet.
    unseen: Vec<String>,
}

/// Per claim UID. Not thread-safe by itself: the controller keeps it under a mutex.
#[derive(Debug, Default)]
pub struct OwnWrites {
    claims: HashMap<String, ClaimWrites>,
}

impl OwnWrites {
    /// A write of the claim `uid` is about to be sent.
    pub fn begin(&mut self, uid: &str) {
        self.claims.entry(uid.to_string()).or_default().in_flight += 1;
    }

    /// The write returned, with the version it produced (None: it failed). True when versions held meanwhile were
    /// not ours: the claim changed under us and must be queued.
    pub fn end(&mut self, uid: &str, version: Option<&str>) -> bool {
        let Some(claim) = self.claims.get_mut(uid) else { return false };
        claim.in_flight = claim.in_flight.saturating_sub(1);
        if let Some(version) = version {
            match claim.held.iter().position(|v| v == version) {
                Some(position) => {
                    claim.held.remove(position);
                }
                None => {
                    if claim.unseen.len() >= UNSEEN_KEPT {
                        claim.unseen.remove(0);
                    }
                    claim.unseen.push(version.to_string());
                }
            }
        }
        let mut foreign = false;
        if claim.in_flight == 0 {
            foreign = !claim.held.is_empty();
            claim.held.clear();
            if claim.unseen.is_empty() {
                self.claims.remove(uid);
            }
        }
        foreign
    }

    /// The watch shows version `version` of the claim: true when it should be queued (not our write).
    pub fn observed(&mut self, uid: &str, version: &str) -> bool {
        let Some(claim) = self.claims.get_mut(uid) else { return true };
        if let Some(position) = claim.unseen.iter().position(|v| v == version) {
            // Events arrive in order: older versions of ours were skipped by a relist.
            claim.unseen.drain(..=position);
            if claim.unseen.is_empty() && claim.in_flight == 0 {
                self.claims.remove(uid);
            }
            return false;
        }
        if claim.in_flight > 0 {
            claim.held.push(version.to_string());
            return false;
        }
        true
    }

    /// The claim is gone.
    pub fn forget(&mut self, uid: &str) {
        self.claims.remove(uid);
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.claims.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Steps of one claim's history and what each returns.
    enum Step {
        Begin,
        End(Option<&'static str>, bool),
        Observed(&'static str, bool),
    }
    use Step::*;

    #[test]
    fn own_writes_do_not_queue_the_claim() {
        // (case, steps)
        let table: Vec<(&str, Vec<Step>)> = vec![
            ("foreign change", vec![Observed("1", true)]),
            ("answer before the event", vec![Begin, End(Some("2"), false), Observed("2", false), Observed("3", true)]),
            ("event before the answer", vec![Begin, Observed("2", false), End(Some("2"), false), Observed("3", true)]),
            (
                "a foreign change during our write is queued when it returns",
                vec![Begin, Observed("2", false), Observed("3", false), End(Some("3"), true)],
            ),
            (
                "add then remove, events late",
                vec![
                    Begin,
                    End(Some("2"), false),
                    Begin,
                    End(Some("3"), false),
                    Observed("2", false),
                    Observed("3", false),
                ],
            ),
            (
                "add then remove, first event early",
                vec![
                    Begin,
                    Observed("2", false),
                    End(Some("2"), false),
                    Begin,
                    End(Some("3"), false),
                    Observed("3", false),
                ],
            ),
            (
                "a relist skipping our version",
                vec![
                    Begin,
                    End(Some("2"), false),
                    Begin,
                    End(Some("3"), false),
                    Observed("3", false),
                    Observed("4", true),
                ],
            ),
            ("a failed write", vec![Begin, End(None, false), Observed("2", true)]),
            ("a failed write with a change meanwhile", vec![Begin, Observed("2", false), End(None, true)]),
        ];
        for (case, steps) in table {
            let mut writes = OwnWrites::default();
            for (index, step) in steps.into_iter().enumerate() {
                match step {
                    Begin => writes.begin("uid"),
                    End(version, queue) => assert_eq!(writes.end("uid", version), queue, "{case}: step {index}"),
                    Observed(version, queue) => {
                        assert_eq!(writes.observed("uid", version), queue, "{case}: step {index}")
                    }
                }
            }
            assert!(writes.is_empty(), "{case}: nothing left behind");
        }
    }

    #[test]
    fn claims_are_independent_and_forgotten() {
        let mut writes = OwnWrites::default();
        writes.begin("a");
        assert!(writes.observed("b", "7"), "another claim's change is queued");
        assert!(!writes.observed("a", "7"), "held while a's write is in flight");
        writes.forget("a");
        assert!(writes.is_empty());
        assert!(!writes.end("a", Some("8")), "the end of a forgotten claim's write is harmless");
    }
}
