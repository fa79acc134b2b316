//! The snapshot-controller's group loop: watches of VolumeGroupSnapshots, their contents and classes, claims,
//! volumes and the single-snapshot objects the members are; one queue of group snapshots (`namespace/name`), named
//! as upstream's `snapshot-controller-group-snapshot`. Every change of a group content wakes the group it points
//! at, so the content needs no queue of its own here.
//!
//! - `stores`: the caches, and the watch handlers that route a change to the group it concerns
//!   ([`crate::translate::queue_keys`]).
//! - `group`: the worker entry `group::sync_group`, in the order [`crate::translate`] documents.
//! - `members`: the member VolumeSnapshotContents and VolumeSnapshots made from the driver's answer.
//! - `writes`: the shared context's own helpers: how each write, event and refusal reaches the API server.
//!
//! Pre-provisioned group snapshots (`source.volumeGroupSnapshotContentName`) bind to the content they name; beyond
//! upstream, their members are made as a dynamic group's are.

mod group;
mod members;
mod stores;
mod writes;

use std::sync::Arc;
use std::time::Duration;

use sidecar_runtime::snapshot_operations::SnapshotMetrics;
use sidecar_runtime::{EventRecorder, Loop, QueueMetrics, RetryPolicy, WorkQueue};
use tokio_util::sync::CancellationToken;

use stores::{Feeds, Stores};

/// How the group loop works, from the snapshot-controller's flags.
#[derive(Clone, Debug)]
pub struct Options {
    /// `--worker-threads`.
    pub workers: usize,
    pub retry: RetryPolicy,
    /// `--resync-period`: every group snapshot is synced again this often.
    pub resync_period: Duration,
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
    groups: WorkQueue<String>,
    /// The snapshot-controller's operation histogram, shared with its single-snapshot loop.
    metrics: Option<SnapshotMetrics>,
}

impl Controller {
    /// `events` should carry the snapshot-controller's component name: upstream's group events come from it;
    /// `metrics` the histogram its single-snapshot loop observes.
    pub fn new(
        client: kube::Client,
        events: EventRecorder,
        options: Options,
        queue_metrics: Option<&QueueMetrics>,
        metrics: Option<SnapshotMetrics>,
    ) -> Controller {
        let (stores, feeds) = Stores::new();
        let groups =
            WorkQueue::with_optional_metrics("snapshot-controller-group-snapshot", options.retry, queue_metrics);
        let shared = Shared { client, events, options, stores, groups, metrics };
        Controller { shared: Arc::new(shared), feeds }
    }

    /// Watches, waits for complete caches, then works until `stop` fires; returns once running syncs finished.
    /// Every group snapshot is synced again every `--resync-period`, as upstream's informer resync does.
    pub async fn run(self, stop: CancellationToken) {
        let shared = self.shared;
        Loop::new(shared.clone(), stores::watches(&shared, self.feeds))
            .queue(&shared.groups, shared.options.workers, group::sync_group)
            .resync(shared.options.resync_period, |shared| shared.stores.group_keys())
            .serve(&stop)
            .await;
    }
}

/// Whether the API server serves the three group snapshot kinds (one-item lists). Upstream's controller serves group
/// snapshots only when the gate is on and these CRDs exist; a cluster without them keeps its single snapshots.
pub async fn crds_served(client: &kube::Client) -> Result<(), kube::Error> {
    use kube::api::{Api, ListParams};
    use snapshot_api::{VolumeGroupSnapshot, VolumeGroupSnapshotClass, VolumeGroupSnapshotContent};
    let one = ListParams::default().limit(1);
    Api::<VolumeGroupSnapshot>::all(client.clone()).list_metadata(&one).await?;
    Api::<VolumeGroupSnapshotClass>::all(client.clone()).list_metadata(&one).await?;
    Api::<VolumeGroupSnapshotContent>::all(client.clone()).list_metadata(&one).await?;
    Ok(())
}
