//! The watch caches and which change queues which content (external-snapshotter
//! pkg/sidecar-controller/snapshot_controller_base.go, the informer handlers of NewCSISnapshotSideCarController). The
//! change filter is [`crate::translate::sidecar::filter::change_needs_sync`]; which contents are ours is decided at
//! sync time, with the class as cached then.

use std::sync::Arc;

use kube::Api;
use kube::runtime::watcher;
use sidecar_runtime::watch::{Cache, CacheFeed, CacheProvider, Change, Watches};
use snapshot_api::{VolumeSnapshotClass, VolumeSnapshotContent};

use super::Shared;
use crate::translate::sidecar::content::content_name;
use crate::translate::sidecar::filter::{change_needs_sync, contents_woken_by_class, node_label_selector};

/// Read-only views of the caches.
pub struct Stores {
    pub contents: Cache<VolumeSnapshotContent>,
    pub classes: Cache<VolumeSnapshotClass>,
}

/// The writing halves of the caches, until the watches start.
pub struct Feeds {
    contents: CacheFeed<VolumeSnapshotContent>,
    classes: CacheFeed<VolumeSnapshotClass>,
}

impl Stores {
    /// The caches from the process's provider: shared with the other sidecars of a `csi-sidecars` process.
    /// In node deployment (`node_name`), only the contents labelled with the node are cached.
    pub fn new(caches: &CacheProvider, node_name: Option<&str>) -> (Stores, Feeds) {
        let contents_config = match node_name {
            Some(node) => watcher::Config::default().labels(&node_label_selector(node)),
            None => watcher::Config::default(),
        };
        let (contents, contents_feed) = caches.selected_cache(contents_config);
        let (classes, classes_feed) = caches.cache();
        (Stores { contents, classes }, Feeds { contents: contents_feed, classes: classes_feed })
    }

    pub fn content(&self, name: &str) -> Option<Arc<VolumeSnapshotContent>> {
        self.contents.get(name)
    }

    pub fn class(&self, name: &str) -> Option<Arc<VolumeSnapshotClass>> {
        self.classes.get(name)
    }

    /// Every cached content's queue key, for the resync.
    pub fn content_names(&self) -> Vec<String> {
        self.contents.filter_map(|c| Some(content_name(c)))
    }
}

/// The watches feeding the caches and the queue.
pub fn watches(shared: &Arc<Shared>, feeds: Feeds) -> Watches {
    let client = shared.client.clone();
    let mut watches = Watches::default();

    let s = shared.clone();
    watches.watch(feeds.contents, Api::all(client.clone()), move |change| match change {
        Change::Applied { old, object: content, .. } => {
            if change_needs_sync(old.as_deref(), content) {
                s.queue.add(content_name(content));
            }
        }
        Change::Deleted(content) => s.queue.forget(&content_name(content)),
        Change::Listed => {}
    });

    let s = shared.clone();
    watches.watch(feeds.classes, Api::all(client), move |change| {
        // A live change only: the initial list queues every content anyway.
        if let Change::Applied { object: class, listed: false, .. } = change {
            // One content rebuilt at a time: a cluster may have tens of thousands.
            s.stores
                .contents
                .filter_map(|content| contents_woken_by_class(class, [content]).pop())
                .into_iter()
                .for_each(|name| s.queue.add(name));
        }
    });
    watches
}
