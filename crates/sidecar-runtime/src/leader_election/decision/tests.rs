use std::time::{Duration, Instant};

use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::*;

const ME: &str = "me";
const LEASE: Duration = Duration::from_secs(15);

fn wall(offset_secs: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + offset_secs).unwrap()
}

fn record(holder: &str, renewed_at: i64, duration_secs: u64, transitions: i32) -> LeaderRecord {
    LeaderRecord {
        holder_identity: holder.to_string(),
        lease_duration: Duration::from_secs(duration_secs),
        acquire_time: Some(wall(renewed_at - 100)),
        renew_time: Some(wall(renewed_at)),
        leader_transitions: transitions,
    }
}

enum Expect {
    Create,
    Renew { transitions: i32, acquire: Timestamp },
    Takeover { transitions: i32 },
    Wait,
}

#[test]
fn decision_table() {
    // `now` is wall(0); `unchanged` is how long ago the record was first seen in this form.
    let cases: Vec<(&str, Option<LeaderRecord>, u64, Expect)> = vec![
        ("no lease yet: create it", None, 0, Expect::Create),
        (
            "ours: renew, keeping acquireTime and transitions",
            Some(record(ME, -5, 15, 3)),
            5,
            Expect::Renew { transitions: 3, acquire: wall(-105) },
        ),
        ("ours, even if it looks expired (restart with the same identity)", Some(record(ME, -60, 15, 2)), 60, {
            Expect::Renew { transitions: 2, acquire: wall(-160) }
        }),
        ("other, renewed just now: wait", Some(record("other", 0, 15, 1)), 0, Expect::Wait),
        (
            "other, first seen now although its renewTime is old: wait (expiry by observation)",
            { Some(record("other", -3600, 15, 1)) },
            0,
            Expect::Wait,
        ),
        ("other, unchanged for 14s: wait", Some(record("other", -14, 15, 1)), 14, Expect::Wait),
        (
            "other, unchanged for 16s: take over",
            Some(record("other", -16, 15, 1)),
            16,
            Expect::Takeover { transitions: 2 },
        ),
        (
            "other, unchanged for 16s but renewTime in the future (skew): wait",
            { Some(record("other", 5, 15, 1)) },
            16,
            Expect::Wait,
        ),
        ("other with a 60s lease, unchanged for 20s: wait", Some(record("other", -20, 60, 1)), 20, Expect::Wait),
        ("other with a 60s lease, unchanged for 61s: take over", Some(record("other", -61, 60, 7)), 61, {
            Expect::Takeover { transitions: 8 }
        }),
        ("other without a duration gets ours: unchanged 10s: wait", Some(record("other", -10, 0, 1)), 10, Expect::Wait),
        ("released (no holder): take over at once", Some(record("", 0, 1, 4)), 0, Expect::Takeover { transitions: 5 }),
    ];

    let start = Instant::now();
    for (name, current, unchanged, expect) in cases {
        let now = Now { instant: start + Duration::from_secs(100), wall: wall(0) };
        let observed_at = now.instant - Duration::from_secs(unchanged);
        let decision = decide(current.as_ref(), observed_at, now, ME, LEASE);
        match (expect, decision) {
            (Expect::Create, Decision::Create(record)) => {
                assert_eq!(
                    record,
                    LeaderRecord {
                        holder_identity: ME.into(),
                        lease_duration: LEASE,
                        acquire_time: Some(wall(0)),
                        renew_time: Some(wall(0)),
                        leader_transitions: 0,
                    },
                    "{name}"
                );
            }
            (Expect::Renew { transitions, acquire }, Decision::Write { record, takeover: false }) => {
                assert_eq!(record.holder_identity, ME, "{name}");
                assert_eq!(record.leader_transitions, transitions, "{name}");
                assert_eq!(record.acquire_time, Some(acquire), "{name}");
                assert_eq!(record.renew_time, Some(wall(0)), "{name}");
                assert_eq!(record.lease_duration, LEASE, "{name}");
            }
            (Expect::Takeover { transitions }, Decision::Write { record, takeover: true }) => {
                assert_eq!(record.holder_identity, ME, "{name}");
                assert_eq!(record.leader_transitions, transitions, "{name}");
                assert_eq!(record.acquire_time, Some(wall(0)), "{name}");
                assert_eq!(record.renew_time, Some(wall(0)), "{name}");
                assert_eq!(record.lease_duration, LEASE, "{name}");
            }
            (Expect::Wait, Decision::Wait { holder }) => {
                assert_eq!(Some(holder), current.map(|c| c.holder_identity), "{name}");
            }
            (_, other) => panic!("{name}: unexpected {other:?}"),
        }
    }
}

#[test]
fn a_missing_acquire_time_on_our_own_lease_is_filled_in() {
    let mut current = record(ME, -5, 15, 0);
    current.acquire_time = None;
    let start = Instant::now();
    let now = Now { instant: start, wall: wall(0) };
    match decide(Some(&current), start, now, ME, LEASE) {
        Decision::Write { record, takeover: false } => assert_eq!(record.acquire_time, Some(wall(0))),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn observer_keeps_the_first_sighting_of_an_unchanged_record() {
    let mut observer = Observer::default();
    let t0 = Instant::now();
    let first = record("other", 0, 15, 1);
    assert_eq!(observer.observe(&first, t0), t0);
    assert_eq!(observer.observe(&first, t0 + Duration::from_secs(5)), t0);
    assert!(!observer.is_holder(ME));

    let renewed = record("other", 5, 15, 1);
    assert_eq!(observer.observe(&renewed, t0 + Duration::from_secs(6)), t0 + Duration::from_secs(6));

    let ours = record(ME, 7, 15, 2);
    observer.wrote(&ours, t0 + Duration::from_secs(7));
    assert!(observer.is_holder(ME));
    assert_eq!(observer.observed_at(), Some(t0 + Duration::from_secs(7)));
    assert_eq!(observer.record(), Some(&ours));

    observer.forget();
    assert_eq!(observer.record(), None);
}

#[test]
fn release_leaves_no_holder_and_keeps_transitions() {
    let current = record(ME, -1, 15, 6);
    let released = released(&current, wall(0));
    assert_eq!(released.holder_identity, "");
    assert_eq!(released.lease_duration, Duration::from_secs(1));
    assert_eq!(released.leader_transitions, 6);
    assert_eq!(released.renew_time, Some(wall(0)));
    // A released record is free for anyone at once.
    let start = Instant::now();
    let now = Now { instant: start, wall: wall(0) + SignedDuration::from_millis(1) };
    assert!(matches!(decide(Some(&released), start, now, "next", LEASE), Decision::Write { takeover: true, .. }));
}
