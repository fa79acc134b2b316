//! The I/O half of the health monitor: the PV and claim caches, the per-volume queue or the listing task, the driver
//! calls and the writes. Every rule lives in [`crate::translate`].
//!
//! It watches only what its rules read: PersistentVolumes (this driver's are checked) and claims (where reports go).
//! Upstream also caches every Event (to find its own unexpired abnormal events) and, with `--enable-node-watcher`,
//! every Pod and Node; this monitor remembers what it reported per claim instead, and has no node watcher.

mod list;
mod stores;
mod volume;
mod writes;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use csi_client::CsiClient;
use sidecar_runtime::watch::CacheProvider;
use sidecar_runtime::{EventRecorder, Loop, QueueMetrics, WorkQueue};
use tokio_util::sync::CancellationToken;

use crate::translate::health::Condition;
use crate::translate::mode::Mode;
use crate::translate::names::VOLUME_QUEUE;
use crate::translate::patch::StatusWrites;
use stores::{Feeds, Stores};

/// What the controller does and how.
#[derive(Clone, Debug)]
pub struct Options {
    /// The driver's name: PVs whose CSI source names it are monitored.
    pub driver: String,
    pub mode: Mode,
    /// `--worker-threads`: concurrent per-volume checks.
    pub workers: usize,
    /// `--monitor-interval`: each PV checked this often (per-volume mode).
    pub monitor_interval: Duration,
    /// `--list-volumes-interval`: the driver's listing this often (list mode).
    pub list_volumes_interval: Duration,
    /// `--volume-list-add-interval`: every monitored PV queued again this often (per-volume mode).
    pub volume_list_add_interval: Duration,
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
    volumes: WorkQueue<String>,
    /// Per claim UID, the conditions last reported on it (empty: healthy); at start, those the claims carry.
    reported: Mutex<HashMap<String, Vec<Condition>>>,
    /// Whether `status.healthStatus` is written.
    status_writes: Mutex<StatusWrites>,
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
        let volumes = WorkQueue::with_optional_metrics(VOLUME_QUEUE, crate::start::retry_policy(), queue_metrics);
        let (stores, feeds) = Stores::new(caches);
        let shared = Shared {
            client,
            csi,
            events,
            options,
            stores,
            volumes,
            reported: Mutex::default(),
            status_writes: Mutex::new(StatusWrites::Untried),
        };
        Controller { shared: Arc::new(shared), feeds }
    }

    /// Watches, waits for complete caches, then checks until `stop` fires; returns once running checks finished.
    pub async fn run(self, stop: CancellationToken) {
        let shared = self.shared;
        shared.remember_carried().await;
        let watches = stores::watches(&shared, self.feeds);
        match shared.options.mode {
            Mode::List => Loop::new(shared.clone(), watches).task(list::run).serve(&stop).await,
            Mode::PerVolume => {
                let (workers, every) = (shared.options.workers, shared.options.monitor_interval);
                let again = shared.options.volume_list_add_interval;
                Loop::new(shared.clone(), watches)
                    .on_filled(|shared| {
                        shared
                            .stores
                            .monitored_names(&shared.options.driver)
                            .into_iter()
                            .for_each(|n| shared.volumes.add(n))
                    })
                    .queue(&shared.volumes, workers, volume::sync)
                    .resync(every, |shared| shared.stores.monitored_names(&shared.options.driver))
                    .resync(again, |shared| shared.stores.monitored_names(&shared.options.driver))
                    .serve(&stop)
                    .await
            }
        }
    }
}
