//! The leader-election rules of client-go, without I/O: given what the Lease
//! says now, what this elector observed before and the clocks, decide whether to
//! create the Lease, write it (acquire or renew), or keep waiting.
//!
//! Expiry is judged the way client-go judges it, by the *local* time at which
//! this elector last saw the record change, so clock skew between nodes cannot
//! make a live leader look expired. On top of that, a record whose own
//! `renewTime + leaseDurationSeconds` is still in the future is never taken
//! either: with synchronised clocks it changes nothing, and with skew it errs on
//! the side of two electors never leading at once.

use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;

/// What a Lease says about leadership (client-go's `LeaderElectionRecord`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LeaderRecord {
    /// Empty when nobody holds the Lease (never acquired, or released).
    pub holder_identity: String,
    pub lease_duration: Duration,
    pub acquire_time: Option<Timestamp>,
    pub renew_time: Option<Timestamp>,
    pub leader_transitions: i32,
}

/// What to do with the Lease on this try.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// No Lease exists: create it, holding it.
    Create(LeaderRecord),
    /// Write this record over the current one, guarded by its resourceVersion:
    /// renewing our own lease, or taking over an expired or released one.
    Write { record: LeaderRecord, takeover: bool },
    /// Someone else holds a live lease.
    Wait { holder: String },
}

/// The part of client-go's elector state the rules need: the last record seen
/// and the local time it was first seen in that form.
#[derive(Debug, Clone, Default)]
pub struct Observer {
    last: Option<(LeaderRecord, Instant)>,
}

impl Observer {
    /// Notes the record just read; returns when it was first seen unchanged.
    pub fn observe(&mut self, record: &LeaderRecord, now: Instant) -> Instant {
        match &self.last {
            Some((seen, at)) if seen == record => *at,
            _ => {
                self.last = Some((record.clone(), now));
                now
            }
        }
    }

    /// Notes a record this elector has just written.
    pub fn wrote(&mut self, record: &LeaderRecord, now: Instant) {
        self.last = Some((record.clone(), now));
    }

    /// Forgets everything, e.g. after the Lease was deleted.
    pub fn forget(&mut self) {
        self.last = None;
    }

    /// The last record seen or written.
    pub fn record(&self) -> Option<&LeaderRecord> {
        self.last.as_ref().map(|(record, _)| record)
    }

    /// When the last record was seen or written.
    pub fn observed_at(&self) -> Option<Instant> {
        self.last.as_ref().map(|(_, at)| *at)
    }

    /// Whether the last record seen names `identity` as the holder.
    pub fn is_holder(&self, identity: &str) -> bool {
        self.record().is_some_and(|record| record.holder_identity == identity)
    }
}

/// The clocks a decision is made at: monotonic for expiry by observation, wall
/// time for the timestamps written into the Lease.
#[derive(Debug, Clone, Copy)]
pub struct Now {
    pub instant: Instant,
    pub wall: Timestamp,
}

/// client-go's `tryAcquireOrRenew`, as a decision. `observed_at` is what
/// [`Observer::observe`] returned for `current`.
pub fn decide(
    current: Option<&LeaderRecord>,
    observed_at: Instant,
    now: Now,
    identity: &str,
    lease_duration: Duration,
) -> Decision {
    let Some(current) = current else {
        return Decision::Create(LeaderRecord {
            holder_identity: identity.to_string(),
            lease_duration,
            acquire_time: Some(now.wall),
            renew_time: Some(now.wall),
            leader_transitions: 0,
        });
    };

    let ours = current.holder_identity == identity;
    if !ours && held_by_other(current, observed_at, now, lease_duration) {
        return Decision::Wait { holder: current.holder_identity.clone() };
    }

    let record = if ours {
        LeaderRecord {
            holder_identity: identity.to_string(),
            lease_duration,
            acquire_time: current.acquire_time.or(Some(now.wall)),
            renew_time: Some(now.wall),
            leader_transitions: current.leader_transitions,
        }
    } else {
        LeaderRecord {
            holder_identity: identity.to_string(),
            lease_duration,
            acquire_time: Some(now.wall),
            renew_time: Some(now.wall),
            leader_transitions: current.leader_transitions.saturating_add(1),
        }
    };
    Decision::Write { record, takeover: !ours }
}

/// The record to write when giving the Lease up on exit: client-go's release,
/// which leaves no holder and a one-second duration so the next elector can
/// take it at once, and keeps the transition count.
pub fn released(current: &LeaderRecord, now: Timestamp) -> LeaderRecord {
    LeaderRecord {
        holder_identity: String::new(),
        lease_duration: Duration::from_secs(1),
        acquire_time: Some(now),
        renew_time: Some(now),
        leader_transitions: current.leader_transitions,
    }
}

/// Whether a record naming another holder still counts as held.
fn held_by_other(current: &LeaderRecord, observed_at: Instant, now: Now, our_duration: Duration) -> bool {
    if current.holder_identity.is_empty() {
        return false; // released
    }
    // A holder that did not say how long its lease lasts gets ours.
    let duration = if current.lease_duration.is_zero() { our_duration } else { current.lease_duration };
    let unchanged_for = now.instant.saturating_duration_since(observed_at);
    if unchanged_for < duration {
        return true;
    }
    match current.renew_time {
        Some(renewed) => {
            // Saturation cannot fail for a plain duration; if it did, stay on the safe side.
            renewed.saturating_add(duration).map_or(true, |expires| expires > now.wall)
        }
        None => false,
    }
}

#[cfg(test)]
mod tests;
