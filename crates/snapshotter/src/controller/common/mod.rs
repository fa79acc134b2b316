//! The snapshot-controller's I/O half: watches of snapshots, contents, classes and claims; one queue of snapshots
//! (`namespace/name`) and one of contents (name), as upstream's `snapshot-controller-snapshot` and
//! `snapshot-controller-content`; the writes [`crate::translate::common`] asks for.
//!
//! - [`snapshot`]: the snapshot worker, in the order the translate module documents.
//! - [`content`]: the content worker.
//! - [`metrics`]: how long snapshots take to be cut, made ready and deleted.
//! - [`writes`]: how each write value reaches the API server (merge patches on snapshots and contents, the status
//!   subresource, guarded updates of claims: the verbs upstream's ClusterRole grants).

mod content;
pub mod crds;
/// The operation metrics live in sidecar-runtime: the group loop observes the same histogram.
pub use sidecar_runtime::snapshot_operations as metrics;
mod snapshot;
mod stores;
mod writes;

use std::sync::Arc;
use std::time::Duration;

use sidecar_runtime::{EventRecorder, Loop, QueueMetrics, RetryPolicy, WorkQueue};
use tokio_util::sync::CancellationToken;

use crate::translate::common::dynamic_content::ContentOptions;
use metrics::SnapshotMetrics;
use stores::{Feeds, Stores};

/// The events' source component, as upstream's.
pub const EVENT_COMPONENT: &str = "snapshot-controller";
/// The Lease, as upstream's.
pub const LEASE_NAME: &str = "snapshot-controller-leader";

/// How the controller works, from the flags.
#[derive(Clone, Debug)]
pub struct Options {
    /// `--worker-threads`, per queue.
    pub workers: usize,
    pub retry: RetryPolicy,
    /// `--resync-period`: every snapshot and content is synced again this often.
    pub resync_period: Duration,
    /// `--prevent-volume-mode-conversion`.
    pub content: ContentOptions,
    /// `--enable-distributed-snapshotting`: Nodes are watched, and each dynamic content is labelled with the node
    /// of its volume.
    pub distributed_snapshotting: bool,
}

pub struct Controller {
    shared: Arc<Shared>,
    feeds: Feeds,
}

pub(crate) struct Shared {
    client: kube::Client,
    events: EventRecorder,
    options: Options,
    stores: Stores,
    snapshots: WorkQueue<String>,
    contents: WorkQueue<String>,
    metrics: SnapshotMetrics,
}

impl Controller {
    pub fn new(
        client: kube::Client,
        events: EventRecorder,
        options: Options,
        queue_metrics: Option<&QueueMetrics>,
        metrics: SnapshotMetrics,
    ) -> Controller {
        let (stores, feeds) = Stores::new(options.distributed_snapshotting);
        let snapshots = WorkQueue::with_optional_metrics("snapshot-controller-snapshot", options.retry, queue_metrics);
        let contents = WorkQueue::with_optional_metrics("snapshot-controller-content", options.retry, queue_metrics);
        let shared = Shared { client, events, options, stores, snapshots, contents, metrics };
        Controller { shared: Arc::new(shared), feeds }
    }

    /// Watches, waits for complete caches, then works until `stop` fires; returns once running syncs finished.
    /// Every snapshot and content is synced again every `--resync-period`, as upstream's informer resync does.
    pub async fn run(self, stop: CancellationToken) {
        let shared = self.shared;
        let (workers, period) = (shared.options.workers, shared.options.resync_period);
        Loop::new(shared.clone(), stores::watches(&shared, self.feeds))
            .queue(&shared.snapshots, workers, snapshot::sync_snapshot)
            .resync(period, |shared| shared.stores.snapshot_keys())
            .queue(&shared.contents, workers, content::sync_content)
            .resync(period, |shared| shared.stores.content_names())
            .serve(&stop)
            .await;
    }
}
