//! csi-snapshotter's group loop (upstream: external-snapshotter, pkg/sidecar-controller/groupsnapshot_helper.go): a
//! cache of VolumeGroupSnapshotContents and one of VolumeGroupSnapshotClasses, one queue of content names
//! (`csi-snapshotter-groupsnapshotcontent`, upstream's name). For the contents of its driver it calls
//! CreateVolumeGroupSnapshot (the being-created annotation stored before), writes the answer into the status, asks
//! again with backoff until the group and every member are ready, and on deletion calls DeleteVolumeGroupSnapshot
//! with every member's snapshot id before releasing the content.
//!
//! Run inside csi-snapshotter while `CSIVolumeGroupSnapshot` is on (its default), or alone as csi-group-snapshotter.
//!
//! - `stores`: the two caches, and the watch handler that queues every change of a content.
//! - `sync`: the worker entry `sync::sync`: one content of this driver per run.
//! - `writes`: the shared context's own helpers: the content's writes, its events and Secret reads.

mod stores;
mod sync;
mod writes;

use std::sync::Arc;
use std::time::Duration;

use csi_client::CsiClient;
use sidecar_runtime::watch::CacheProvider;
use sidecar_runtime::{EventRecorder, Loop, QueueMetrics, RetryPolicy, WorkQueue};
use tokio_util::sync::CancellationToken;

use crate::translate::create_request::RequestOptions;
use stores::{Feeds, Stores};

/// Upstream's name of the group content queue.
pub const GROUP_CONTENT_QUEUE: &str = "csi-snapshotter-groupsnapshotcontent";

/// What the loop does and how.
#[derive(Clone, Debug)]
pub struct Options {
    /// The CSI driver whose contents are handled.
    pub driver: String,
    /// `--groupsnapshot-name-prefix`, `--groupsnapshot-name-uuid-length`, `--extra-create-metadata`.
    pub request: RequestOptions,
    /// `--worker-threads`.
    pub workers: usize,
    pub retry: RetryPolicy,
    /// `--resync-period`.
    pub resync_period: Duration,
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
        let (stores, feeds) = Stores::new(caches);
        let queue = WorkQueue::with_optional_metrics(GROUP_CONTENT_QUEUE, options.retry, queue_metrics);
        let shared = Shared { client, csi, events, options, stores, queue };
        Controller { shared: Arc::new(shared), feeds }
    }

    /// Watches, waits for complete caches, then works until `stop` fires; returns once running syncs finished.
    /// Every content is synced again every `--resync-period`, as upstream's informer resync does.
    pub async fn run(self, stop: CancellationToken) {
        let shared = self.shared;
        Loop::new(shared.clone(), stores::watches(&shared, self.feeds))
            .queue(&shared.queue, shared.options.workers, sync::sync)
            .resync(shared.options.resync_period, |shared| shared.stores.content_names())
            .serve(&stop)
            .await;
    }
}

/// Whether the API server serves the two group kinds csi-snapshotter's group loop reads (one-item lists of
/// VolumeGroupSnapshotContents and VolumeGroupSnapshotClasses, as external-snapshotter cmd/csi-snapshotter/main.go,
/// ensureVolumeGroupSnapshotCRDsExist, asks; upstream's role grants nothing on VolumeGroupSnapshots).
pub async fn crds_served(client: &kube::Client) -> Result<(), kube::Error> {
    use kube::api::{Api, ListParams};
    use snapshot_api::{VolumeGroupSnapshotClass, VolumeGroupSnapshotContent};
    let one = ListParams::default().limit(1);
    Api::<VolumeGroupSnapshotContent>::all(client.clone()).list_metadata(&one).await?;
    Api::<VolumeGroupSnapshotClass>::all(client.clone()).list_metadata(&one).await?;
    Ok(())
}
