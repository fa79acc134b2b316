//! Publishing CSIStorageCapacity objects (`--enable-capacity`; external-provisioner pkg/capacity/capacity.go).
//!
//! One refresh loop does all the work: it computes the objects that should exist from the caches (classes, and
//! CSINodes with Nodes or the node-local segment), matches them with the objects this instance manages, deletes
//! the obsolete ones, asks GetCapacity for each key and writes what changed through the separate, slower client of
//! `--kube-api-capacity-qps/-burst`. A refresh runs every `--capacity-poll-interval`, and soon after anything that
//! may change the answer: a class or node change, a provisioned or deleted volume, an object someone else deleted.
//! Running one refresh at a time is what keeps two objects from being created for one key. Its own objects come
//! from one of the loop's declared watches (its namespace, its labels), so a watch that ends fails `/healthz` as
//! any other does.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::AtomicI64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use csi_client::proto::{GetCapacityRequest, Topology};
use futures::StreamExt;
use k8s_openapi::api::storage::v1::CSIStorageCapacity;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use kube::runtime::watcher;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use sidecar_runtime::api_error::{api_error_text, is_conflict, is_not_found};
use sidecar_runtime::watch::Cache;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::Shared;
use crate::translate::capacity::{
    CapacityKey, LABEL_DRIVER_NAME, LABEL_MANAGED_BY, Measured, Publisher, Segment, desired, is_managed, new_object,
    reconcile, segments, updated_object,
};

/// `--enable-capacity` and its companions.
#[derive(Clone, Debug)]
pub struct CapacityOptions {
    pub publisher: Publisher,
    /// `--capacity-poll-interval`
    pub poll_interval: Duration,
    /// `--capacity-for-immediate-binding`
    pub immediate_binding: bool,
    /// `--capacity-threads`: GetCapacity calls and writes in flight at once.
    pub threads: usize,
    /// Node mode: the one segment this instance serves, from NodeGetInfo.
    pub fixed_segment: Option<Segment>,
}

/// The ALPHA gauges upstream exports for capacity objects (pkg/capacity/capacity.go, `DescribeWithStability`).
#[derive(Clone, Default)]
pub struct CapacityMetrics {
    goal: Gauge<i64, AtomicI64>,
    current: Gauge<i64, AtomicI64>,
    obsolete: Gauge<i64, AtomicI64>,
}

impl CapacityMetrics {
    pub fn register(registry: &mut Registry) -> CapacityMetrics {
        let metrics = CapacityMetrics::default();
        registry.register(
            "csistoragecapacities_desired_goal",
            "[ALPHA] Number of CSIStorageCapacity objects that are supposed to be managed automatically.",
            metrics.goal.clone(),
        );
        registry.register(
            "csistoragecapacities_desired_current",
            "[ALPHA] Number of CSIStorageCapacity objects that exist and are supposed to be managed automatically.",
            metrics.current.clone(),
        );
        registry.register(
            "csistoragecapacities_obsolete",
            "[ALPHA] Number of CSIStorageCapacity objects that exist and will be deleted automatically. Objects that exist and may need an update are not considered obsolete and therefore not included in this value.",
            metrics.obsolete.clone(),
        );
        metrics
    }
}

/// Publishes with the publisher `--enable-capacity` configured, if any, until `stop`.
pub(super) async fn publish(shared: Arc<Shared>, stop: CancellationToken) {
    if let Some(capacity) = shared.capacity.clone() {
        capacity.run(shared, stop).await;
    }
}

/// The publisher's state, shared with the provisioner's workers (which nudge it).
pub struct Capacity {
    /// The client limited by `--kube-api-capacity-qps/-burst` (upstream PR #711).
    client: kube::Client,
    options: CapacityOptions,
    metrics: CapacityMetrics,
    nudge: Notify,
    /// Nudged on class and node changes: a refresh follows only when the set of keys changed.
    keys_may_have_changed: Notify,
    /// The keys of the last refresh.
    last_keys: Mutex<BTreeSet<CapacityKey>>,
    /// Our writes the watch may not have shown yet, by object name: without them a refresh right after a create
    /// would not see the new object and create a second one.
    written: Mutex<BTreeMap<String, CSIStorageCapacity>>,
}

impl Capacity {
    pub fn new(client: kube::Client, options: CapacityOptions, metrics: CapacityMetrics) -> Capacity {
        Capacity {
            client,
            options,
            metrics,
            nudge: Notify::new(),
            keys_may_have_changed: Notify::new(),
            last_keys: Mutex::default(),
            written: Mutex::default(),
        }
    }

    /// Asks for a refresh soon; many nudges while one runs make one more.
    pub fn nudge(&self) {
        self.nudge.notify_one();
    }

    /// A class, CSINode or Node changed: refresh if that changes which objects should exist. Node status updates
    /// arrive all the time in a large cluster and almost never do.
    pub fn nudge_keys(&self) {
        self.keys_may_have_changed.notify_one();
    }

    fn api(&self) -> Api<CSIStorageCapacity> {
        Api::namespaced(self.client.clone(), &self.options.publisher.namespace)
    }

    fn written(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, CSIStorageCapacity>> {
        self.written.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The watch of this instance's objects: in its namespace, selected by its labels, as upstream's informer is.
    pub(super) fn watch_config(&self) -> watcher::Config {
        let publisher = &self.options.publisher;
        let selector = format!("{LABEL_DRIVER_NAME}={},{LABEL_MANAGED_BY}={}", publisher.driver, publisher.managed_by);
        watcher::Config::default().labels(&selector)
    }

    /// The namespace its objects live in.
    pub(super) fn namespace(&self) -> &str {
        &self.options.publisher.namespace
    }

    /// One of its objects was deleted (by anyone): ours to keep if still wanted, so the next refresh re-creates it.
    pub(super) fn deleted(&self, object: &CSIStorageCapacity) {
        if let Some(name) = &object.metadata.name {
            self.written().remove(name);
        }
        self.nudge();
    }

    /// Refreshes until `stop`. The loop has filled the caches already, this instance's objects among them.
    async fn run(self: Arc<Self>, shared: Arc<Shared>, stop: CancellationToken) {
        let publisher = &self.options.publisher;
        tracing::info!(namespace = %publisher.namespace, managed_by = %publisher.managed_by, "publishing CSIStorageCapacity");
        let mut next_poll = tokio::time::Instant::now();
        loop {
            if tokio::time::Instant::now() >= next_poll {
                next_poll = tokio::time::Instant::now() + self.options.poll_interval;
            }
            self.refresh(&shared).await;
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep_until(next_poll) => break,
                    _ = self.nudge.notified() => break,
                    _ = self.keys_may_have_changed.notified() => {
                        let keys = self.desired(&shared);
                        if *self.last_keys.lock().unwrap_or_else(|p| p.into_inner()) != keys {
                            break;
                        }
                    }
                }
            }
        }
    }

    /// The keys that should have an object now.
    fn desired(&self, shared: &Shared) -> BTreeSet<CapacityKey> {
        let driver = &self.options.publisher.driver;
        let segments = match &self.options.fixed_segment {
            Some(segment) => BTreeSet::from([segment.clone()]),
            // Runs on every Node event in node-heavy clusters: read the caches in place, copying only labels.
            None => {
                let csi_nodes = shared.stores.csi_nodes.as_ref().map(Cache::state).unwrap_or_default();
                let node_labels = |name: &str| {
                    let node = shared.stores.nodes.as_ref()?.get(name)?;
                    Some(node.metadata.labels.clone().unwrap_or_default())
                };
                segments(driver, csi_nodes.iter().map(|n| &**n), node_labels)
            }
        };
        let classes = shared.stores.classes.state();
        desired(classes.iter().map(|c| &**c), driver, &segments, self.options.immediate_binding)
    }

    /// The managed objects: the cache, with our own writes it has not shown yet.
    fn existing(&self, shared: &Shared) -> Vec<CSIStorageCapacity> {
        let publisher = &self.options.publisher;
        let mut objects: BTreeMap<String, CSIStorageCapacity> = BTreeMap::new();
        for object in shared.stores.capacities.as_ref().map(Cache::state).unwrap_or_default() {
            if is_managed(&object, &publisher.driver, &publisher.managed_by) {
                objects.insert(object.metadata.name.clone().unwrap_or_default(), (*object).clone());
            }
        }
        let mut written = self.written();
        written.retain(|name, ours| match objects.get(name) {
            // The cache has caught up with our write (or gone past it): forget it.
            Some(cached) if caught_up(cached, ours) => false,
            _ => {
                objects.insert(name.clone(), ours.clone());
                true
            }
        });
        objects.into_values().collect()
    }

    async fn refresh(&self, shared: &Shared) {
        let desired = self.desired(shared);
        *self.last_keys.lock().unwrap_or_else(|p| p.into_inner()) = desired.clone();
        let reconciliation = reconcile(&self.existing(shared), &desired);
        self.metrics.goal.set(desired.len() as i64);
        self.metrics.current.set(reconciliation.current.len() as i64);
        self.metrics.obsolete.set(reconciliation.obsolete.len() as i64);
        for name in &reconciliation.obsolete {
            match self.api().delete(name, &DeleteParams::default()).await {
                Ok(_) => tracing::debug!(object = %name, "deleted an obsolete CSIStorageCapacity"),
                Err(err) if is_not_found(&err) => {}
                Err(err) => {
                    tracing::warn!(object = %name, error = %err, "cannot delete an obsolete CSIStorageCapacity")
                }
            }
            self.written().remove(name);
        }
        let current = &reconciliation.current;
        futures::stream::iter(desired.iter())
            .for_each_concurrent(self.options.threads.max(1), |key| async move {
                if let Err(message) = self.sync(shared, key, current.get(key)).await {
                    tracing::warn!(class = %key.class, segment = ?key.segment, error = %message, "cannot publish capacity");
                }
            })
            .await;
        let current = self.existing(shared).len().min(desired.len());
        self.metrics.current.set(current as i64);
    }

    /// GetCapacity for one key, then create or update its object when needed.
    async fn sync(
        &self,
        shared: &Shared,
        key: &CapacityKey,
        existing: Option<&CSIStorageCapacity>,
    ) -> Result<(), String> {
        let Some(class) = shared.stores.class(&key.class) else { return Ok(()) };
        let request = GetCapacityRequest {
            volume_capabilities: Vec::new(),
            parameters: class.parameters.clone().unwrap_or_default().into_iter().collect(),
            accessible_topology: Some(Topology { segments: key.segment.clone().into_iter().collect() }),
        };
        let response = shared.csi.get_capacity(request).await.map_err(|e| e.go_text())?;
        let measured =
            Measured { available: response.available_capacity, maximum_volume_size: response.maximum_volume_size };
        let publisher = &self.options.publisher;
        let written = match existing {
            None => {
                let object = new_object(key, measured, publisher);
                self.api().create(&PostParams::default(), &object).await.map_err(|e| api_error_text(&e))?
            }
            Some(existing) => {
                let Some(object) = updated_object(existing, measured, publisher) else { return Ok(()) };
                let name = object.metadata.name.clone().unwrap_or_default();
                match self.api().replace(&name, &PostParams::default(), &object).await {
                    Ok(written) => written,
                    Err(err) => {
                        // Written meanwhile by someone else: the next refresh starts from the cache again.
                        if is_conflict(&err) {
                            self.written().remove(&name);
                        }
                        return Err(api_error_text(&err));
                    }
                }
            }
        };
        tracing::debug!(object = ?written.metadata.name, class = %key.class, capacity = ?written.capacity, "published capacity");
        self.written().insert(written.metadata.name.clone().unwrap_or_default(), written);
        Ok(())
    }
}

/// Whether the cached object is our write or newer. Resource versions are opaque, but the API server's are etcd
/// revisions: compared as numbers when both are, else only equality counts.
fn caught_up(cached: &CSIStorageCapacity, ours: &CSIStorageCapacity) -> bool {
    let (cached, ours) = (cached.metadata.resource_version.as_deref(), ours.metadata.resource_version.as_deref());
    match (cached.and_then(|c| c.parse::<u64>().ok()), ours.and_then(|o| o.parse::<u64>().ok())) {
        (Some(cached), Some(ours)) => cached >= ours,
        _ => cached == ours,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(version: Option<&str>) -> CSIStorageCapacity {
        let mut object = CSIStorageCapacity::default();
        object.metadata.resource_version = version.map(str::to_string);
        object
    }

    #[test]
    fn the_cache_catches_up_with_our_writes() {
        // (case, cached version, our version, caught up)
        let table = [
            ("same version", Some("10"), Some("10"), true),
            ("someone wrote after us", Some("11"), Some("10"), true),
            ("the cache lags", Some("9"), Some("10"), false),
            ("opaque versions: only equality", Some("b"), Some("a"), false),
            ("opaque and equal", Some("a"), Some("a"), true),
        ];
        for (case, cached, ours, want) in table {
            assert_eq!(caught_up(&at(cached), &at(ours)), want, "{case}");
        }
    }
}
