//! The I/O half of the resizer: watch caches, one work queue keyed by claim, the driver calls and the writes. Every
//! rule lives in the pure modules ([`crate::translate::expansion`], [`crate::translate::modification`],
//! [`crate::translate::watch_filter`]); this module only reads the caches, hands plain values to them and carries out
//! the steps they plan ([`steps`]).
//!
//! Expansion and modification of a claim run in the same sync of the same queue key, one after the other, so they
//! never race (deliberate difference from upstream, which runs two controllers on two queues).

mod expand;
mod memory;
mod metrics;
mod modify;
mod steps;
mod stores;
mod sync;
mod writes;

use std::sync::Arc;
use std::time::Duration;

use csi_client::CsiClient;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use sidecar_runtime::watch::{CacheProvider, Written};
use sidecar_runtime::{EventRecorder, Loop, QueueMetrics, RetryPolicy, WorkQueue};
use tokio_util::sync::CancellationToken;

pub use metrics::ResizerMetrics;

use crate::translate::expansion::decide::ExpansionConfig;
use crate::translate::modification::decide::ModificationConfig;
use crate::translate::names::EVENT_COMPONENT;
use memory::Memory;
use stores::{Feeds, Stores};

/// The queue key of a claim: `namespace/name`, as upstream.
pub type ClaimKey = String;

/// What the controller does and how.
#[derive(Clone, Debug)]
pub struct Options {
    pub workers: usize,
    pub retry: RetryPolicy,
    pub resync_period: Duration,
    /// `None`: the driver cannot expand (or expansion is off).
    pub expansion: Option<ExpansionConfig>,
    /// `None`: the driver cannot modify, or the VolumeAttributesClass gate is off.
    pub modification: Option<ModificationConfig>,
    /// `--handle-volume-inuse-error`: watch Pods.
    pub handle_volume_inuse_error: bool,
    /// The limit of one ControllerExpandVolume call (`--resize-timeout`, or `--timeout` when given).
    pub expand_timeout: Duration,
    /// The limit of one ControllerModifyVolume call (`--modify-timeout`, or `--timeout` when given).
    pub modify_timeout: Duration,
}

/// The events' source component: `external-resizer <driver>`, as upstream.
pub fn event_component(driver_name: &str) -> String {
    format!("{EVENT_COMPONENT} {driver_name}")
}

pub struct Controller {
    shared: Arc<Shared>,
    feeds: Feeds,
}

pub(crate) struct Shared {
    client: kube::Client,
    csi: CsiClient,
    events: EventRecorder,
    options: Options,
    stores: Stores,
    queue: WorkQueue<ClaimKey>,
    memory: Memory,
    metrics: ResizerMetrics,
    /// Claims (by key) and PVs (by name) as our writes left them, until the caches catch up.
    written_claims: Written<PersistentVolumeClaim>,
    written_volumes: Written<PersistentVolume>,
}

impl Controller {
    pub fn new(
        client: kube::Client,
        caches: &CacheProvider,
        csi: CsiClient,
        events: EventRecorder,
        options: Options,
        queue_metrics: Option<&QueueMetrics>,
        metrics: ResizerMetrics,
    ) -> Controller {
        let queue = WorkQueue::with_optional_metrics("resizer", options.retry, queue_metrics);
        let (stores, feeds) = Stores::new(caches, options.modification.is_some(), options.handle_volume_inuse_error);
        let memory = Memory::new(options.retry.max);
        let (written_claims, written_volumes) = (Written::default(), Written::default());
        let shared =
            Shared { client, csi, events, options, stores, queue, memory, metrics, written_claims, written_volumes };
        Controller { shared: Arc::new(shared), feeds }
    }

    /// Watches, waits for complete caches, then works until `stop` fires; returns once running syncs finished.
    /// Every claim is looked at again every `--resync-period`, as upstream's informer resync does.
    pub async fn run(self, stop: CancellationToken) {
        let shared = self.shared;
        Loop::new(shared.clone(), stores::watches(&shared, self.feeds))
            .queue(&shared.queue, shared.options.workers, sync::sync)
            .resync(shared.options.resync_period, |shared| shared.stores.claim_keys())
            .serve(&stop)
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_source_names_the_driver() {
        assert_eq!(event_component("hostpath.csi.k8s.io"), "external-resizer hostpath.csi.k8s.io");
    }
}
