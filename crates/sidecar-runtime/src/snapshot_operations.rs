//! `snapshot_controller_operation_total_seconds` and `snapshot_controller_operations_in_flight`, as upstream's
//! snapshot-controller exports them (external-snapshotter pkg/metrics/metrics.go): how long a snapshot took from the
//! first sync that found it uncut until the driver's creation time appeared (`CreateSnapshot`) and until it was ready
//! (`CreateSnapshotAndReady`), and how long a deletion took until the snapshot was gone (`DeleteSnapshot`; creations
//! still pending then end as `cancel`). Group snapshots are timed the same way under `CreateGroupSnapshot`,
//! `CreateGroupSnapshotAndReady` and `DeleteGroupSnapshot` (beyond upstream, a group deleted before it was ready
//! cancels its creations too).
//!
//! Here rather than in a sidecar crate because the snapshot-controller's single-snapshot and group loops (two
//! crates) observe one histogram. Operations live in memory only, as upstream's: a restart starts the clock again.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

pub const CREATE_SNAPSHOT: &str = "CreateSnapshot";
pub const CREATE_SNAPSHOT_AND_READY: &str = "CreateSnapshotAndReady";
pub const DELETE_SNAPSHOT: &str = "DeleteSnapshot";
pub const CREATE_GROUP_SNAPSHOT: &str = "CreateGroupSnapshot";
pub const CREATE_GROUP_SNAPSHOT_AND_READY: &str = "CreateGroupSnapshotAndReady";
pub const DELETE_GROUP_SNAPSHOT: &str = "DeleteGroupSnapshot";
pub const STATUS_SUCCESS: &str = "success";
pub const STATUS_CANCEL: &str = "cancel";
pub const DYNAMIC: &str = "dynamic";
pub const PRE_PROVISIONED: &str = "pre-provisioned";

const BUCKETS: [f64; 13] = [0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0];

/// One operation under way: which snapshot, and what it is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OperationKey {
    pub operation: &'static str,
    /// The VolumeSnapshot's UID.
    pub snapshot_uid: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Started {
    at: Instant,
    driver: String,
    snapshot_type: &'static str,
}

/// A finished operation, to observe.
#[derive(Clone, Debug, PartialEq)]
pub struct Finished {
    pub operation: &'static str,
    pub driver: String,
    pub snapshot_type: &'static str,
    pub status: &'static str,
    pub took: Duration,
}

/// The operations under way, by key. Pure bookkeeping; [`SnapshotMetrics`] observes what it returns.
#[derive(Debug, Default)]
pub struct Operations {
    started: HashMap<OperationKey, Started>,
    /// Operations that ended, until their object is gone: a sync working from a cache that lags behind the write
    /// which ended an operation must not start its clock again (it would be observed twice).
    finished: HashSet<OperationKey>,
}

impl Operations {
    /// Starts the clock unless it runs already (the first sync that sees the operation wins).
    pub fn start(&mut self, key: OperationKey, driver: &str, snapshot_type: &'static str, at: Instant) {
        if self.finished.contains(&key) {
            return;
        }
        let driver = if driver.is_empty() { "unknown" } else { driver };
        self.started.entry(key).or_insert_with(|| Started { at, driver: driver.to_string(), snapshot_type });
    }

    /// Stops the clock of `key`, if it runs.
    pub fn finish(&mut self, key: &OperationKey, status: &'static str, at: Instant) -> Option<Finished> {
        let started = self.started.remove(key)?;
        self.finished.insert(key.clone());
        Some(Finished {
            operation: key.operation,
            driver: started.driver,
            snapshot_type: started.snapshot_type,
            status,
            took: at.saturating_duration_since(started.at),
        })
    }

    /// The snapshot is gone: its deletion succeeded and whatever creation was pending is cancelled.
    pub fn snapshot_gone(&mut self, snapshot_uid: &str, at: Instant) -> Vec<Finished> {
        self.gone(snapshot_uid, [CREATE_SNAPSHOT, CREATE_SNAPSHOT_AND_READY], DELETE_SNAPSHOT, at)
    }

    /// The group snapshot is gone: the same for its group operations.
    pub fn group_gone(&mut self, group_uid: &str, at: Instant) -> Vec<Finished> {
        self.gone(group_uid, [CREATE_GROUP_SNAPSHOT, CREATE_GROUP_SNAPSHOT_AND_READY], DELETE_GROUP_SNAPSHOT, at)
    }

    fn gone(&mut self, uid: &str, creations: [&'static str; 2], deletion: &'static str, at: Instant) -> Vec<Finished> {
        let key = |operation| OperationKey { operation, snapshot_uid: uid.to_string() };
        let mut finished: Vec<Finished> =
            creations.into_iter().filter_map(|operation| self.finish(&key(operation), STATUS_CANCEL, at)).collect();
        finished.extend(self.finish(&key(deletion), STATUS_SUCCESS, at));
        let operations = [creations[0], creations[1], deletion];
        self.finished.retain(|k| k.snapshot_uid != uid || !operations.contains(&k.operation));
        finished
    }

    pub fn in_flight(&self) -> usize {
        self.started.len()
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabels {
    driver_name: String,
    operation_name: String,
    operation_status: String,
    snapshot_type: String,
}

/// The snapshot-controller's metrics and the operations they time. Clones share both.
#[derive(Clone)]
pub struct SnapshotMetrics {
    seconds: Family<OperationLabels, Histogram>,
    in_flight: Gauge,
    operations: Arc<Mutex<Operations>>,
}

impl SnapshotMetrics {
    pub fn register(registry: &mut Registry) -> SnapshotMetrics {
        let seconds = Family::<OperationLabels, Histogram>::new_with_constructor(|| Histogram::new(BUCKETS));
        registry.register(
            "snapshot_controller_operation_total_seconds",
            "Total number of seconds spent by the controller on an operation",
            seconds.clone(),
        );
        let in_flight = Gauge::default();
        registry.register(
            "snapshot_controller_operations_in_flight",
            "Total number of operations in flight",
            in_flight.clone(),
        );
        SnapshotMetrics { seconds, in_flight, operations: Arc::default() }
    }

    pub fn start(&self, operation: &'static str, snapshot_uid: &str, driver: &str, snapshot_type: &'static str) {
        let key = OperationKey { operation, snapshot_uid: snapshot_uid.to_string() };
        self.with(|operations| operations.start(key, driver, snapshot_type, Instant::now()));
    }

    pub fn succeeded(&self, operation: &'static str, snapshot_uid: &str) {
        let key = OperationKey { operation, snapshot_uid: snapshot_uid.to_string() };
        let finished = self.with(|operations| operations.finish(&key, STATUS_SUCCESS, Instant::now()));
        finished.into_iter().for_each(|f| self.observe(&f));
    }

    pub fn snapshot_gone(&self, snapshot_uid: &str) {
        let finished = self.with(|operations| operations.snapshot_gone(snapshot_uid, Instant::now()));
        finished.iter().for_each(|f| self.observe(f));
    }

    pub fn group_gone(&self, group_uid: &str) {
        let finished = self.with(|operations| operations.group_gone(group_uid, Instant::now()));
        finished.iter().for_each(|f| self.observe(f));
    }

    fn with<T>(&self, change: impl FnOnce(&mut Operations) -> T) -> T {
        let mut operations = self.operations.lock().unwrap_or_else(|p| p.into_inner());
        let result = change(&mut operations);
        self.in_flight.set(operations.in_flight() as i64);
        result
    }

    fn observe(&self, finished: &Finished) {
        let labels = OperationLabels {
            driver_name: finished.driver.clone(),
            operation_name: finished.operation.to_string(),
            operation_status: finished.status.to_string(),
            snapshot_type: finished.snapshot_type.to_string(),
        };
        self.seconds.get_or_create(&labels).observe(finished.took.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(operation: &'static str) -> OperationKey {
        OperationKey { operation, snapshot_uid: "u1".into() }
    }

    #[test]
    fn operations_are_timed_from_their_first_start() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut operations = Operations::default();
        operations.start(key(CREATE_SNAPSHOT), "hostpath", DYNAMIC, t0);
        operations.start(key(CREATE_SNAPSHOT), "hostpath", DYNAMIC, t0 + s(3));
        operations.start(key(CREATE_SNAPSHOT_AND_READY), "", PRE_PROVISIONED, t0 + s(1));
        assert_eq!(operations.in_flight(), 2);
        let created = operations.finish(&key(CREATE_SNAPSHOT), STATUS_SUCCESS, t0 + s(5)).unwrap();
        assert_eq!(created.took, s(5), "a later start does not reset the clock");
        assert_eq!((created.driver.as_str(), created.snapshot_type, created.status), ("hostpath", DYNAMIC, "success"));
        assert_eq!(operations.finish(&key(CREATE_SNAPSHOT), STATUS_SUCCESS, t0 + s(6)), None, "finished once");
        operations.start(key(CREATE_SNAPSHOT), "hostpath", DYNAMIC, t0 + s(6));
        assert_eq!(operations.in_flight(), 1, "a stale sync does not start a finished operation again");

        operations.start(key(DELETE_SNAPSHOT), "hostpath", PRE_PROVISIONED, t0 + s(7));
        let gone = operations.snapshot_gone("u1", t0 + s(9));
        // (operation, status, took, driver)
        let rows: Vec<(&str, &str, Duration, &str)> =
            gone.iter().map(|f| (f.operation, f.status, f.took, f.driver.as_str())).collect();
        assert_eq!(
            rows,
            [
                (CREATE_SNAPSHOT_AND_READY, STATUS_CANCEL, s(8), "unknown"),
                (DELETE_SNAPSHOT, STATUS_SUCCESS, s(2), "hostpath")
            ]
        );
        assert_eq!(operations.in_flight(), 0);
        assert!(operations.finished.is_empty(), "a gone object leaves nothing behind");
    }

    #[test]
    fn a_group_gone_ends_its_group_operations_only() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut operations = Operations::default();
        for operation in [CREATE_GROUP_SNAPSHOT_AND_READY, DELETE_GROUP_SNAPSHOT, CREATE_SNAPSHOT] {
            operations.start(key(operation), "hostpath", DYNAMIC, t0);
        }
        let gone = operations.group_gone("u1", t0 + s(4));
        // (operation, status)
        let rows: Vec<(&str, &str)> = gone.iter().map(|f| (f.operation, f.status)).collect();
        assert_eq!(rows, [(CREATE_GROUP_SNAPSHOT_AND_READY, STATUS_CANCEL), (DELETE_GROUP_SNAPSHOT, STATUS_SUCCESS)]);
        assert_eq!(operations.in_flight(), 1, "the single-snapshot operation of the same UID stays");
    }

    #[test]
    fn the_histogram_and_gauge_carry_upstream_names() {
        let mut registry = Registry::default();
        let metrics = SnapshotMetrics::register(&mut registry);
        metrics.start(CREATE_SNAPSHOT, "u1", "hostpath", DYNAMIC);
        metrics.succeeded(CREATE_SNAPSHOT, "u1");
        metrics.start(DELETE_SNAPSHOT, "u2", "hostpath", DYNAMIC);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(text.contains(
            "snapshot_controller_operation_total_seconds_count{driver_name=\"hostpath\",operation_name=\"CreateSnapshot\",operation_status=\"success\",snapshot_type=\"dynamic\"} 1"
        ), "{text}");
        assert!(text.contains("snapshot_controller_operations_in_flight 1"), "{text}");
    }
}
