//! The snapshot-controller's caches, and which change queues which key: the handlers only route, the rules of
//! which snapshot a change wakes are [`crate::translate::common`]'s.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim};
use kube::{Api, ResourceExt};
use sidecar_runtime::watch::{self, Cache, CacheFeed, Change, Watches};
use snapshot_api::{VolumeSnapshot, VolumeSnapshotClass, VolumeSnapshotContent};

use super::Shared;
use crate::translate::common::content_sync::snapshot_woken_by_deleted_content;
use crate::translate::common::default_class::snapshots_woken_by_class;
use crate::translate::common::names::snapshot_key;

/// Read-only views of the caches.
pub struct Stores {
    pub snapshots: Cache<VolumeSnapshot>,
    pub contents: Cache<VolumeSnapshotContent>,
    pub classes: Cache<VolumeSnapshotClass>,
    /// Claims, for the claim finalizer and for pending restores (upstream keeps a claim lister too).
    pub claims: Cache<PersistentVolumeClaim>,
    /// Nodes, only with `--enable-distributed-snapshotting` (upstream's node informer likewise).
    pub nodes: Option<Cache<Node>>,
}

/// The writing halves of the caches, until the watches start.
pub struct Feeds {
    snapshots: CacheFeed<VolumeSnapshot>,
    contents: CacheFeed<VolumeSnapshotContent>,
    classes: CacheFeed<VolumeSnapshotClass>,
    claims: CacheFeed<PersistentVolumeClaim>,
    nodes: Option<CacheFeed<Node>>,
}

impl Stores {
    /// The caches; Nodes too with `distributed_snapshotting`.
    pub fn new(distributed_snapshotting: bool) -> (Stores, Feeds) {
        let (snapshots, snapshots_feed) = watch::cache();
        let (contents, contents_feed) = watch::cache();
        let (classes, classes_feed) = watch::cache();
        let (claims, claims_feed) = watch::cache();
        let (nodes, nodes_feed) = distributed_snapshotting.then(watch::cache).unzip();
        let feeds = Feeds {
            snapshots: snapshots_feed,
            contents: contents_feed,
            classes: classes_feed,
            claims: claims_feed,
            nodes: nodes_feed,
        };
        (Stores { snapshots, contents, classes, claims, nodes }, feeds)
    }

    /// Every cached Node (none without `--enable-distributed-snapshotting`).
    pub fn nodes(&self) -> Vec<Arc<Node>> {
        self.nodes.as_ref().map(Cache::state).unwrap_or_default()
    }

    /// The snapshot of a `namespace/name` key.
    pub fn snapshot(&self, key: &str) -> Option<Arc<VolumeSnapshot>> {
        let (namespace, name) = key.split_once('/')?;
        self.snapshots.get_in(namespace, name)
    }

    pub fn content(&self, name: &str) -> Option<Arc<VolumeSnapshotContent>> {
        self.contents.get(name)
    }

    pub fn class(&self, name: &str) -> Option<Arc<VolumeSnapshotClass>> {
        self.classes.get(name)
    }

    pub fn claim(&self, namespace: &str, name: &str) -> Option<Arc<PersistentVolumeClaim>> {
        self.claims.get_in(namespace, name)
    }

    /// The claims of one namespace.
    pub fn claims_in(&self, namespace: &str) -> Vec<Arc<PersistentVolumeClaim>> {
        self.claims.state_in(namespace)
    }

    /// Every cached snapshot's queue key, for the resync.
    pub fn snapshot_keys(&self) -> Vec<String> {
        self.snapshots.state().iter().map(|s| snapshot_key(s)).collect()
    }

    /// Every cached content's queue key, for the resync.
    pub fn content_names(&self) -> Vec<String> {
        self.contents.keys(|key| Some(key.name.to_string()))
    }

    /// The snapshots of one namespace.
    pub fn snapshots_in(&self, namespace: &str) -> Vec<Arc<VolumeSnapshot>> {
        self.snapshots.state_in(namespace)
    }
}

/// The watches feeding the caches and the two queues.
pub fn watches(shared: &Arc<Shared>, feeds: Feeds) -> Watches {
    let client = shared.client.clone();
    let mut watches = Watches::default();

    let s = shared.clone();
    watches.watch(feeds.snapshots, Api::all(client.clone()), move |change| match change {
        Change::Applied { object, .. } => s.snapshots.add(snapshot_key(object)),
        Change::Deleted(object) => {
            s.snapshots.forget(&snapshot_key(object));
            s.metrics.snapshot_gone(&object.uid().unwrap_or_default());
        }
        Change::Listed => {}
    });

    let s = shared.clone();
    watches.watch(feeds.contents, Api::all(client.clone()), move |change| match change {
        Change::Applied { object, .. } => s.contents.add(object.name_any()),
        Change::Deleted(object) => {
            s.contents.forget(&object.name_any());
            s.snapshots.add(snapshot_woken_by_deleted_content(object));
        }
        Change::Listed => {}
    });

    let s = shared.clone();
    watches.watch(feeds.classes, Api::all(client.clone()), move |change| {
        // A live change only: the initial list queues every snapshot anyway.
        if let Change::Applied { object: class, listed: false, .. } = change {
            let snapshots = s.stores.snapshots.state();
            snapshots_woken_by_class(class, snapshots.iter().map(|v| &**v))
                .into_iter()
                .for_each(|key| s.snapshots.add(key));
        }
    });

    if let Some(nodes) = feeds.nodes {
        watches.watch(nodes, Api::all(client.clone()), |_| {});
    }
    watches.watch(feeds.claims, Api::all(client), |_| {});
    watches
}
