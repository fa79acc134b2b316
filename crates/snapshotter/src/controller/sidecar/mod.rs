//! csi-snapshotter's I/O half (external-snapshotter pkg/sidecar-controller): a cache of VolumeSnapshotContents and one
//! of VolumeSnapshotClasses, one work queue keyed by content name (`csi-snapshotter-content`, upstream's name),
//! `--worker-threads` workers and a resync every `--resync-period`. What a sync does is decided by
//! [`crate::translate::sidecar`]; [`sync`] carries it out in the order the rules document; `writes` holds how each
//! write reaches the API server.
//!
//! Writes go where upstream's ClusterRole allows them: metadata (annotations, finalizers) with a merge patch on the
//! content, the status with a merge patch on its `status` subresource. Secrets are read live when a call needs one;
//! their data goes into the CSI request only (whose `Debug` redacts it).

mod stores;
mod sync;
mod writes;

use std::sync::Arc;
use std::time::Duration;

use csi_client::CsiClient;
use sidecar_runtime::watch::CacheProvider;
use sidecar_runtime::{EventRecorder, Loop, QueueMetrics, RetryPolicy, WorkQueue};
use tokio_util::sync::CancellationToken;

use crate::translate::sidecar::Snapshotter;
use stores::{Feeds, Stores};

/// Upstream's name of the content queue (the `name` label of the `workqueue_*` metrics).
pub const CONTENT_QUEUE: &str = "csi-snapshotter-content";

/// What the controller does and how.
#[derive(Clone, Debug)]
pub struct Options {
    /// The flags and driver facts the rules read.
    pub snapshotter: Snapshotter,
    /// `--worker-threads`.
    pub workers: usize,
    /// `--retry-interval-start` / `--retry-interval-max`.
    pub retry: RetryPolicy,
    /// `--resync-period`; zero turns the resync off.
    pub resync_period: Duration,
    /// `--node-deployment`: only the contents labelled with this node.
    pub node_name: Option<String>,
}

/// The content controller of one driver.
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
    queue: WorkQueue<String>,
}

impl Controller {
    pub fn new(
        client: kube::Client,
        caches: &CacheProvider,
        csi: CsiClient,
        events: EventRecorder,
        options: Options,
        queue_metrics: Option<&QueueMetrics>,
    ) -> Controller {
        let queue = WorkQueue::with_optional_metrics(CONTENT_QUEUE, options.retry, queue_metrics);
        let (stores, feeds) = Stores::new(caches, options.node_name.as_deref());
        let shared = Shared { client, csi, events, options, stores, queue };
        Controller { shared: Arc::new(shared), feeds }
    }

    /// Watches, waits for complete caches, then works until `stop` fires; returns once running syncs finished.
    /// Every content is looked at again every `--resync-period`, as upstream's informer resync does.
    pub async fn run(self, stop: CancellationToken) {
        let shared = self.shared;
        Loop::new(shared.clone(), stores::watches(&shared, self.feeds))
            .queue(&shared.queue, shared.options.workers, sync::sync)
            .resync(shared.options.resync_period, |shared| shared.stores.content_names())
            .serve(&stop)
            .await;
    }
}
