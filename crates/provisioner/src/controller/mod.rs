//! The I/O half of the provisioner: watch claims, volumes, classes (and CSINodes and Nodes when the driver has
//! topology), queue what changed, and drive the rules of [`crate::translate`] with CSI calls and API writes.
//!
//! - [`stores`]: kube-runtime reflectors, and which watch events queue which keys.
//! - [`provision`]: the claim worker (keyed by claim UID): whether to provision, one attempt (CreateVolume and the
//!   PV), and what a refusal means; [`prepare`] computes the request, [`claim_writes`] writes claims and PVs.
//! - [`in_flight`]: claims in flight recorded in the in-flight journal (or with the provisioning-protection
//!   finalizer) before CreateVolume, and what their record asks for; [`recover`]: volumes that must go: a claim
//!   deleted mid-call and a volume that cannot be used.
//! - [`snapshot_source`]: restores from VolumeSnapshots, their source-protection finalizer and its orphan sweep.
//! - [`delete`]: the volume worker (keyed by PV name): the reclaim-policy finalizer and DeleteVolume.
//! - [`own_writes`]: which claim changes are our own finalizer writes, so they do not defeat a claim's backoff.
//! - [`ownership`]: `--node-deployment` with Immediate binding: the race between the instances for a claim.
//! - [`capacity`]: CSIStorageCapacity publishing (`--enable-capacity`).
//! - [`migration`]: CSI migration, classes and volumes of the in-tree plugin the driver replaces.
//! - [`metrics`]: `controller_persistentvolumeclaim_provision_*` and `controller_persistentvolume_delete_*`.
//!
//! No business rule lives here: every decision is a call into `translate`.

pub mod capacity;
pub mod capacity_owner;
mod claim_writes;
mod delete;
mod in_flight;
pub mod metrics;
mod migration;
mod own_writes;
mod ownership;
mod prepare;
mod provision;
mod recover;
mod snapshot_source;
mod stores;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use csi_client::CsiClient;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::Resource;
use sidecar_runtime::journal::{Journal, JournalOptions};
use sidecar_runtime::update::Updated;
use sidecar_runtime::watch::CacheProvider;
use sidecar_runtime::{EventRecorder, Loop, QueueMetrics, RetryPolicy, WorkQueue};
use tokio_util::sync::CancellationToken;

use crate::translate::provisioner::Provisioner;
use crate::translate::refusal::PlannedEvent;
use crate::translate::topology::TopologyPin;
use capacity::Capacity;
pub use metrics::ProvisioningMetrics;
use own_writes::OwnWrites;
use stores::{Feeds, Stores};

/// A claim in the queue. Claims are queued by UID as upstream does; the name travels with it for the store lookup
/// (a claim's namespace and name never change, so equality by all three is equality by UID).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ClaimKey {
    pub uid: String,
    pub namespace: String,
    pub name: String,
}

/// How the controller works, from the flags.
#[derive(Clone, Debug)]
pub struct Options {
    /// `--worker-threads`, for claims and again for volumes.
    pub workers: usize,
    /// `--retry-interval-start` / `--retry-interval-max`.
    pub retry: RetryPolicy,
    /// `--snapshot-orphan-sweep-interval` (zero: no sweep).
    pub snapshot_orphan_sweep_interval: Duration,
    /// Where claims in flight are recorded (see [`in_flight`]).
    pub journal: JournalOptions,
}

/// The provisioner's controllers. Cheap to clone.
pub struct Controller {
    shared: Arc<Shared>,
    feeds: Feeds,
    /// Where the caches come from, should `with_capacity` need more of them.
    caches: CacheProvider,
}

struct Shared {
    client: kube::Client,
    csi: CsiClient,
    provisioner: Provisioner,
    events: EventRecorder,
    options: Options,
    stores: Stores,
    claims: WorkQueue<ClaimKey>,
    volumes: WorkQueue<String>,
    /// Per claim UID: what the topology was computed from, so that retries send the same requirements (item 41).
    pins: Mutex<HashMap<String, TopologyPin>>,
    /// Which claim versions the watch shows are our own finalizer writes (see [`own_writes`]).
    own_writes: Mutex<OwnWrites>,
    /// `--node-deployment`: per claim UID, the tries at becoming its owner so far (the backoff of item 72).
    ownership_attempts: Mutex<HashMap<String, u32>>,
    /// PVs (by UID) this provisioner deleted whose removal the cache has not shown yet: their watch events must not
    /// repeat the deletion (memory only; after a restart one repeat is harmless, DeleteVolume is idempotent).
    deleted_volumes: Mutex<HashSet<String>>,
    /// Fires when the controllers stop, so that a worker waiting to own a claim gives up at once.
    stopping: CancellationToken,
    metrics: ProvisioningMetrics,
    /// `--enable-capacity`: the publisher, nudged after provisioning and deleting.
    capacity: Option<Arc<Capacity>>,
    /// Claims in flight, by UID (see [`in_flight`]).
    journal: Journal,
}

impl Controller {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        client: kube::Client,
        caches: CacheProvider,
        csi: CsiClient,
        provisioner: Provisioner,
        events: EventRecorder,
        options: Options,
        queue_metrics: Option<&QueueMetrics>,
        metrics: ProvisioningMetrics,
    ) -> Controller {
        // Node mode takes its topology from NodeGetInfo, not from watching every Node (item 70).
        let topology = provisioner.supports_topology() && provisioner.node_deployment.is_none();
        let (stores, feeds) = Stores::new(&caches, topology, attaches(&provisioner));
        let shared = Shared {
            client,
            csi,
            provisioner,
            events,
            journal: Journal::new(options.journal.clone()),
            claims: WorkQueue::with_optional_metrics("claims", options.retry, queue_metrics),
            volumes: WorkQueue::with_optional_metrics("volumes", options.retry, queue_metrics),
            options,
            stores,
            pins: Mutex::default(),
            own_writes: Mutex::default(),
            ownership_attempts: Mutex::default(),
            deleted_volumes: Mutex::default(),
            stopping: CancellationToken::new(),
            metrics,
            capacity: None,
        };
        Controller { shared: Arc::new(shared), feeds, caches }
    }

    /// Publishes CSIStorageCapacity with `capacity`. Call before [`Controller::run`].
    pub fn with_capacity(mut self, capacity: Capacity) -> Controller {
        let shared = Arc::get_mut(&mut self.shared).expect("with_capacity is called before the controller runs");
        // Central capacity needs the segments of every node, whether or not provisioning uses topology.
        if shared.provisioner.node_deployment.is_none() {
            (shared.stores, self.feeds) = Stores::new(&self.caches, true, attaches(&shared.provisioner));
        }
        shared.capacity = Some(Arc::new(capacity));
        self
    }

    /// Watches, then works until `stop` fires; returns once in-flight work has finished. The journal's writer
    /// outlives the workers: those still draining after `stop` may record claims.
    pub async fn run(self, stop: CancellationToken) {
        let shared = self.shared;
        let workers = shared.options.workers;
        Loop::new(shared.clone(), stores::watches(&shared, self.feeds))
            .outliving(|shared, done| async move { shared.journal.run(shared.client.clone(), done).await })
            // Everything the caches hold now is queued once, as an informer's initial adds are.
            .on_filled(|shared| shared.queue_everything())
            .queue(&shared.claims, workers, |shared: Arc<Shared>, key: ClaimKey| async move {
                shared.sync_claim(&key).await
            })
            .queue(&shared.volumes, workers, |shared: Arc<Shared>, name: String| async move {
                shared.sync_volume(&name).await
            })
            .task(|shared, stop| async move {
                stop.cancelled().await;
                shared.stopping.cancel();
            })
            .task(|shared, stop| async move {
                let interval = shared.options.snapshot_orphan_sweep_interval;
                shared.sweep_snapshot_protection(interval, stop).await
            })
            .task(|shared, stop| async move {
                if let Some(capacity) = shared.capacity.clone() {
                    capacity.run(shared, stop).await;
                }
            })
            .task(|shared, stop| async move {
                tokio::select! {
                    _ = shared.queue_journal_entries() => {}
                    _ = stop.cancelled() => {}
                }
            })
            .serve(&stop)
            .await;
    }
}

impl Shared {
    fn queue_everything(&self) {
        for claim in self.stores.claims.state() {
            if let Some(key) = stores::claim_key(&claim) {
                self.claims.add(key);
            }
        }
        for volume in self.stores.volumes.state() {
            if let Some(name) = volume.metadata.name.clone() {
                self.volumes.add(name);
            }
        }
    }

    async fn publish<K: Resource<DynamicType = ()>>(&self, object: &K, event: &PlannedEvent) {
        self.events.record(object, event).await;
    }

    /// Something that may change the published capacity happened (a class, a node, a volume).
    fn capacity_changed(&self) {
        if let Some(capacity) = &self.capacity {
            capacity.nudge();
        }
    }

    /// A class or node changed: the publisher refreshes if that changes which objects should exist.
    fn capacity_keys_may_have_changed(&self) {
        if let Some(capacity) = &self.capacity {
            capacity.nudge_keys();
        }
    }

    fn forget_pin(&self, uid: &str) {
        self.pins.lock().unwrap_or_else(|p| p.into_inner()).remove(uid);
    }

    fn pin(&self, uid: &str) -> TopologyPin {
        self.pins.lock().unwrap_or_else(|p| p.into_inner()).get(uid).cloned().unwrap_or_default()
    }

    fn keep_pin(&self, uid: &str, pin: TopologyPin) {
        self.pins.lock().unwrap_or_else(|p| p.into_inner()).insert(uid.to_string(), pin);
    }

    fn deleted_volumes(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.deleted_volumes.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn own_writes(&self) -> std::sync::MutexGuard<'_, OwnWrites> {
        self.own_writes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a claim version the watch shows should queue the claim: not when it is our own write.
    fn claim_changed(&self, claim: &PersistentVolumeClaim) -> bool {
        let (Some(uid), Some(version)) = (&claim.metadata.uid, &claim.metadata.resource_version) else { return true };
        self.own_writes().observed(uid, version)
    }

    /// Runs the finalizer `write` on `claim` as one of our own writes; a foreign change seen meanwhile queues the
    /// claim.
    async fn own_write<F>(
        &self,
        claim: &PersistentVolumeClaim,
        write: F,
    ) -> Result<Updated<PersistentVolumeClaim>, kube::Error>
    where
        F: Future<Output = Result<Updated<PersistentVolumeClaim>, kube::Error>>,
    {
        let uid = claim.metadata.uid.clone().unwrap_or_default();
        self.own_writes().begin(&uid);
        let result = write.await;
        let version = match &result {
            Ok(Updated::Written(stored)) => stored.metadata.resource_version.clone(),
            _ => None,
        };
        if self.own_writes().end(&uid, version.as_deref())
            && let Some(key) = stores::claim_key(claim)
        {
            self.claims.add(key);
        }
        result
    }

    /// `--retry-interval-max`: how long an infeasible claim waits.
    fn slow_retry(&self) -> Duration {
        self.options.retry.max
    }
}

/// Whether the driver attaches volumes, so that VolumeAttachments are watched.
fn attaches(provisioner: &Provisioner) -> bool {
    provisioner.has(csi_client::capabilities::ControllerCapability::PublishUnpublishVolume)
}

/// The events' source component, as the upstream library names it: `<driver>_<hostname>_<random uuid>`.
pub fn event_component(driver_name: &str) -> String {
    let host = hostname::get().map(|h| h.to_string_lossy().into_owned()).unwrap_or_default();
    format!("{driver_name}_{host}_{}", random_uuid())
}

/// A version-4 style UUID from the standard library's randomly keyed hasher (no cryptographic use).
fn random_uuid() -> String {
    use std::hash::{BuildHasher, Hasher};
    let word = |salt: u64| {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u64(salt ^ u64::from(std::process::id()));
        hasher.finish()
    };
    let (high, low) = (word(1), word(2));
    let high = (high & 0xffff_ffff_ffff_0fff) | 0x4000;
    let low = (low & 0x3fff_ffff_ffff_ffff) | 0x8000_0000_0000_0000;
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        high >> 32,
        (high >> 16) & 0xffff,
        high & 0xffff,
        low >> 48,
        low & 0xffff_ffff_ffff
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_component_reads_like_the_library() {
        let component = event_component("hostpath.csi.k8s.io");
        let parts: Vec<&str> = component.split('_').collect();
        assert_eq!(parts.len(), 3, "{component}");
        assert_eq!(parts[0], "hostpath.csi.k8s.io");
        let uuid = parts[2];
        assert_eq!(uuid.len(), 36, "{uuid}");
        assert_eq!(uuid.as_bytes()[14], b'4', "{uuid}");
        assert_ne!(random_uuid(), random_uuid());
    }
}
