//! The I/O half of the attacher: watch caches, the queues, the driver calls and the writes. Every rule lives in
//! [`crate::translate`]; the workers read the caches, hand plain values to it and carry out what it says, in the
//! order its modules document.
//!
//! Attach and detach work in separate queues (a deliberate difference from upstream's one VolumeAttachment queue):
//! a burst of detaches never waits in front of an attach. [`holding::Holding`] keeps the two from working on one
//! VolumeAttachment at once, as upstream's single queue does.

mod attach;
mod detach;
mod holding;
mod mark_attached;
mod reconcile;
mod stores;
mod volume;
mod writes;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use csi_client::CsiClient;
use k8s_openapi::api::storage::v1::VolumeAttachment;
use sidecar_runtime::watch::{CacheProvider, Written};
use sidecar_runtime::{Loop, QueueMetrics, RetryPolicy, WorkQueue};
use tokio_util::sync::CancellationToken;

use crate::translate::capabilities::Handling;
use crate::translate::filter::Direction;
use crate::translate::names::{ATTACH_QUEUE, DETACH_QUEUE, VOLUME_QUEUE};
use holding::Holding;
use stores::{Feeds, Stores};

/// What the controller does and how.
#[derive(Clone, Debug)]
pub struct Options {
    /// The driver's name: VolumeAttachments whose `spec.attacher` names it are served.
    pub driver: String,
    pub handling: Handling,
    pub workers: usize,
    pub retry: RetryPolicy,
    /// `--resync`: every VolumeAttachment and PV looked at again this often.
    pub resync: Duration,
    /// `--reconcile-sync`.
    pub reconcile_sync: Duration,
    /// `--max-entries`: ListVolumes page size (0: the driver's).
    pub max_entries: i32,
    /// `status.attachError.errorCode` is written.
    pub attach_error_code: bool,
}

pub struct Controller {
    shared: Arc<Shared>,
    feeds: Feeds,
}

pub(crate) struct Shared {
    client: kube::Client,
    csi: CsiClient,
    options: Options,
    stores: Stores,
    attach: WorkQueue<String>,
    detach: WorkQueue<String>,
    volumes: WorkQueue<String>,
    /// Which VolumeAttachment a worker holds, in either queue.
    holding: Holding,
    /// VolumeAttachments the reconciler found the driver disagrees with: synced once past "already done".
    forced: Mutex<HashSet<String>>,
    /// VolumeAttachments as our writes left them, until the cache catches up.
    written: Written<VolumeAttachment>,
}

impl Controller {
    pub fn new(
        client: kube::Client,
        caches: &CacheProvider,
        csi: CsiClient,
        options: Options,
        queue_metrics: Option<&QueueMetrics>,
    ) -> Controller {
        let queue = |name| WorkQueue::with_optional_metrics(name, options.retry, queue_metrics);
        let (attach, detach, volumes) = (queue(ATTACH_QUEUE), queue(DETACH_QUEUE), queue(VOLUME_QUEUE));
        let publishing = matches!(options.handling, Handling::Publish { .. });
        let (stores, feeds) = Stores::new(caches, publishing);
        let shared = Shared {
            client,
            csi,
            options,
            stores,
            attach,
            detach,
            volumes,
            holding: Holding::default(),
            forced: Mutex::default(),
            written: Written::default(),
        };
        Controller { shared: Arc::new(shared), feeds }
    }

    /// Watches, waits for complete caches, then works until `stop` fires; returns once running syncs finished.
    pub async fn run(self, stop: CancellationToken) {
        let shared = self.shared;
        let (workers, resync) = (shared.options.workers, shared.options.resync);
        let watches = stores::watches(&shared, self.feeds);
        match shared.options.handling {
            Handling::MarkAttached => {
                Loop::new(shared.clone(), watches)
                    .queue(&shared.attach, workers, mark_attached::sync)
                    .resync(resync, |shared| shared.stores.names_to(&shared.options.driver, None))
                    .serve(&stop)
                    .await
            }
            Handling::Publish { reconcile, .. } => {
                let sweep = reconcile.then_some(shared.options.reconcile_sync);
                Loop::new(shared.clone(), watches)
                    .queue(&shared.attach, workers, attach::sync)
                    .resync(resync, |shared| shared.stores.names_to(&shared.options.driver, Some(Direction::Attach)))
                    .queue(&shared.detach, workers, detach::sync)
                    .resync(resync, |shared| shared.stores.names_to(&shared.options.driver, Some(Direction::Detach)))
                    .queue(&shared.volumes, workers, volume::sync)
                    .resync(resync, |shared| shared.stores.volumes_to_sync(&shared.options.driver))
                    .task(move |shared, stop| reconcile::run(shared, sweep, stop))
                    .serve(&stop)
                    .await
            }
        }
    }
}
