//! csi-snapshotter's group loop (upstream: external-snapshotter, pkg/sidecar-controller/groupsnapshot_helper.go): a
//! cache of VolumeGroupSnapshotContents and one of VolumeGroupSnapshotClasses, one queue of content names
//! (`csi-snapshotter-groupsnapshotcontent`, upstream's name). For the contents of its driver it calls
//! CreateVolumeGroupSnapshot (the being-created annotation stored before), writes the answer into the status, asks
//! again with backoff until the group and every member are ready, and on deletion calls DeleteVolumeGroupSnapshot
//! with every member's snapshot id before releasing the content.
//!
//! Run inside csi-snapshotter with `--feature-gates=CSIVolumeGroupSnapshot=true`, or alone as csi-group-snapshotter.

mod sync;

use std::sync::Arc;
use std::time::Duration;

use csi_client::CsiClient;
use kube::Api;
use kube::runtime::reflector::{ObjectRef, Store};
use sidecar_runtime::watch::{CacheFeed, CacheProvider, Change, Watches};
use sidecar_runtime::{EventRecorder, Loop, QueueMetrics, RetryPolicy, WorkQueue};
use snapshot_api::{VolumeGroupSnapshotClass, VolumeGroupSnapshotContent};
use tokio_util::sync::CancellationToken;

use crate::translate::create_request::RequestOptions;

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
    feeds: (CacheFeed<VolumeGroupSnapshotContent>, CacheFeed<VolumeGroupSnapshotClass>),
}

pub(crate) struct Shared {
    client: kube::Client,
    csi: CsiClient,
    events: EventRecorder,
    options: Options,
    contents: Store<VolumeGroupSnapshotContent>,
    classes: Store<VolumeGroupSnapshotClass>,
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
        let (contents, contents_feed) = caches.cache();
        let (classes, classes_feed) = caches.cache();
        let queue = WorkQueue::with_optional_metrics(GROUP_CONTENT_QUEUE, options.retry, queue_metrics);
        let shared = Shared { client, csi, events, options, contents, classes, queue };
        Controller { shared: Arc::new(shared), feeds: (contents_feed, classes_feed) }
    }

    /// Watches, waits for complete caches, then works until `stop` fires; returns once running syncs finished.
    /// Every content is synced again every `--resync-period`, as upstream's informer resync does.
    pub async fn run(self, stop: CancellationToken) {
        let shared = self.shared;
        let (contents_feed, classes_feed) = self.feeds;
        let mut watches = Watches::default();
        let s = shared.clone();
        // Every change is looked at, as upstream's (whose group content updates are not filtered).
        watches.watch(contents_feed, Api::all(shared.client.clone()), move |change| match change {
            Change::Applied { object, .. } => s.queue.add(object.metadata.name.clone().unwrap_or_default()),
            Change::Deleted(object) => s.queue.forget(&object.metadata.name.clone().unwrap_or_default()),
            Change::Listed => {}
        });
        watches.watch(classes_feed, Api::all(shared.client.clone()), |_| {});
        Loop::new(shared.clone(), watches)
            .queue(&shared.queue, shared.options.workers, |shared: Arc<Shared>, name: String| async move {
                shared.sync(&name).await
            })
            .resync(shared.options.resync_period, |shared| {
                shared.contents.state().iter().filter_map(|c| c.metadata.name.clone()).collect()
            })
            .serve(&stop)
            .await;
    }
}

impl Shared {
    fn content(&self, name: &str) -> Option<Arc<VolumeGroupSnapshotContent>> {
        self.contents.get(&ObjectRef::new(name))
    }

    fn class(&self, name: &str) -> Option<Arc<VolumeGroupSnapshotClass>> {
        self.classes.get(&ObjectRef::new(name))
    }
}
