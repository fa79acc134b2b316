//! csi-snapshotter's group loop caches: VolumeGroupSnapshotContents (every change queued by name, as upstream's,
//! whose group content updates are not filtered) and VolumeGroupSnapshotClasses (read by the requests).

use std::sync::Arc;

use kube::Api;
use sidecar_runtime::watch::{Cache, CacheFeed, CacheProvider, Change, Watches};
use snapshot_api::{VolumeGroupSnapshotClass, VolumeGroupSnapshotContent};

use super::Shared;

/// Read-only views of the caches.
pub struct Stores {
    contents: Cache<VolumeGroupSnapshotContent>,
    classes: Cache<VolumeGroupSnapshotClass>,
}

/// The writing halves of the caches, until the watches start.
pub struct Feeds {
    contents: CacheFeed<VolumeGroupSnapshotContent>,
    classes: CacheFeed<VolumeGroupSnapshotClass>,
}

impl Stores {
    /// The caches of the process's provider: another loop of the same process watching these kinds shares them.
    pub fn new(caches: &CacheProvider) -> (Stores, Feeds) {
        let (contents, contents_feed) = caches.cache();
        let (classes, classes_feed) = caches.cache();
        (Stores { contents, classes }, Feeds { contents: contents_feed, classes: classes_feed })
    }

    pub fn content(&self, name: &str) -> Option<Arc<VolumeGroupSnapshotContent>> {
        self.contents.get(name)
    }

    pub fn class(&self, name: &str) -> Option<Arc<VolumeGroupSnapshotClass>> {
        self.classes.get(name)
    }

    /// Every content's name, for the resync.
    pub fn content_names(&self) -> Vec<String> {
        self.contents.keys(|key| Some(key.name.to_string()))
    }
}

/// The watches feeding the caches and the queue: a content's change queues its name, its deletion forgets it.
pub fn watches(shared: &Arc<Shared>, feeds: Feeds) -> Watches {
    let mut watches = Watches::default();
    let s = shared.clone();
    watches.watch(feeds.contents, Api::all(shared.client.clone()), move |change| match change {
        Change::Applied { object, .. } => s.queue.add(object.metadata.name.clone().unwrap_or_default()),
        Change::Deleted(object) => s.queue.forget(&object.metadata.name.clone().unwrap_or_default()),
        Change::Listed => {}
    });
    watches.watch(feeds.classes, Api::all(shared.client.clone()), |_| {});
    watches
}
