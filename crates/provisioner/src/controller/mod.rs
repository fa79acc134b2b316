//! The I/O half of the provisioner: watch claims, volumes, classes (and CSINodes and Nodes when the driver has
//! topology), queue what changed, and drive the rules of [`crate::translate`] with CSI calls and API writes.
//!
//! [`Controller::run`] declares the loop; each part is a plain function in a file of its own:
//! - [`provision::sync_claim`], the claims queue (by claim UID). A claim's way from there enters each file once:
//!   [`in_flight`] first (its in-flight record: journal entry or finalizer), which may hand it to [`recover`] (the
//!   volume of a claim deleted mid-call goes); then [`ownership`] (`--node-deployment` with Immediate binding) or
//!   [`attempt`] (one attempt: the in-flight record, CreateVolume, the PV). [`recover`], [`ownership`] and
//!   [`attempt`] read what CreateVolume needs through [`prepare`], whose rules are [`crate::translate::prepare`].
//! - [`delete::sync_volume`], the volumes queue (by PV name): the reclaim-policy finalizer and DeleteVolume.
//! - [`snapshot_release::release_snapshot`], a queue of snapshots whose restoring claim was deleted, and
//!   [`snapshot_sweep::sweep_snapshots`]: the snapshots' source-protection finalizer.
//! - [`journal`]: the in-flight journal's writer, and every entry's claim queued once it is read.
//! - [`capacity::publish`]: CSIStorageCapacity publishing (`--enable-capacity`).
//!
//! Beside them: [`stores`] (the caches, and which watch change queues which key), [`writes`] (the shared context's
//! writes, events and reads beyond the caches), [`memory`] (what is remembered in memory only, with
//! [`own_writes`]), [`metrics`].
//! No business rule lives here: every decision is a call into `translate`.

mod attempt;
pub mod capacity;
pub mod capacity_owner;
mod delete;
mod in_flight;
mod journal;
mod memory;
pub mod metrics;
mod own_writes;
mod ownership;
mod prepare;
mod provision;
mod recover;
mod snapshot_release;
mod snapshot_sweep;
mod stores;
mod writes;

use std::sync::Arc;
use std::time::Duration;

use csi_client::CsiClient;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use sidecar_runtime::journal::{Journal, JournalOptions};
use sidecar_runtime::watch::CacheProvider;
use sidecar_runtime::{EventRecorder, Loop, QueueMetrics, RetryPolicy, WorkQueue};
use tokio_util::sync::CancellationToken;

use crate::translate::data_source::DataSource;
use crate::translate::provisioner::Provisioner;
pub use crate::translate::watch_keys::ClaimKey;
use capacity::Capacity;
use memory::Memory;
pub use metrics::ProvisioningMetrics;
use stores::{Feeds, Stores};

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

/// The shared context every part of the loop gets.
struct Shared {
    client: kube::Client,
    csi: CsiClient,
    provisioner: Provisioner,
    events: EventRecorder,
    options: Options,
    stores: Stores,
    /// Claims by UID.
    claims: WorkQueue<ClaimKey>,
    /// PVs by name.
    volumes: WorkQueue<String>,
    /// VolumeSnapshots whose restoring claim was deleted: their source protection may go.
    snapshot_releases: WorkQueue<DataSource>,
    /// Claims in flight, by UID (see [`in_flight`]).
    journal: Journal,
    /// What is remembered between syncs in memory only.
    memory: Memory,
    /// The loop's stop: a worker waiting to own a claim gives up at once.
    stop: CancellationToken,
    metrics: ProvisioningMetrics,
    /// `--enable-capacity`: the publisher, nudged after provisioning and deleting.
    capacity: Option<Arc<Capacity>>,
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
        // Node mode takes its topology from NodeGetInfo, not from watching every Node (as upstream's
        // `--node-deployment`, external-provisioner cmd/csi-provisioner/csi-provisioner.go).
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
            snapshot_releases: WorkQueue::new("snapshot-releases", options.retry),
            options,
            stores,
            memory: Memory::default(),
            stop: CancellationToken::new(),
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
        shared.stores.with_capacities(&mut self.feeds, &self.caches, capacity.watch_config());
        shared.capacity = Some(Arc::new(capacity));
        self
    }

    /// Watches, then works until `stop` fires; returns once in-flight work has finished. The journal's writer
    /// outlives the workers: those still draining after `stop` may record claims.
    pub async fn run(mut self, stop: CancellationToken) {
        Arc::get_mut(&mut self.shared).expect("the controller runs once").stop = stop.clone();
        let shared = self.shared;
        let workers = shared.options.workers;
        Loop::new(shared.clone(), stores::watches(&shared, self.feeds))
            .outliving(journal::write_journal)
            .on_filled(stores::queue_everything)
            .queue(&shared.claims, workers, provision::sync_claim)
            .queue(&shared.volumes, workers, delete::sync_volume)
            .queue(&shared.snapshot_releases, workers, snapshot_release::release_snapshot)
            .task(journal::queue_journal_entries)
            .task(snapshot_sweep::sweep_snapshots)
            .task(capacity::publish)
            .serve(&stop)
            .await;
    }
}

/// `namespace/name`, as logs name a claim.
fn claim_path(claim: &PersistentVolumeClaim) -> String {
    format!("{}/{}", namespace_of(claim), name_of(claim))
}

fn namespace_of(claim: &PersistentVolumeClaim) -> &str {
    claim.metadata.namespace.as_deref().unwrap_or_default()
}

fn name_of(claim: &PersistentVolumeClaim) -> &str {
    claim.metadata.name.as_deref().unwrap_or_default()
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
