//! The watch caches and their handlers: each change goes to a pure rule of [`crate::translate::watch_filter`], and the
//! claims it names are queued.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::VolumeAttributesClass;
use kube::Api;
use kube::runtime::reflector::{ObjectRef, Store};
use sidecar_runtime::watch::{CacheFeed, CacheProvider, Change, Watches};

use super::Shared;
use crate::translate::claim::claim_key;
use crate::translate::expansion::in_use::claims_in_use;
use crate::translate::modification::decide::uncertain_at_startup;
use crate::translate::watch_filter::{
    changed_class, claim_of_new_volume, claim_update_needs_sync, claims_freed_by_pod, waits_for_class,
};

/// Read-only views of the caches.
pub struct Stores {
    pub claims: Store<PersistentVolumeClaim>,
    pub volumes: Store<PersistentVolume>,
    /// Only when modification runs.
    pub classes: Option<Store<VolumeAttributesClass>>,
    /// Only with `--handle-volume-inuse-error`.
    pub pods: Option<Store<Pod>>,
}

/// The writing halves of the caches, until the watches start.
pub struct Feeds {
    claims: CacheFeed<PersistentVolumeClaim>,
    volumes: CacheFeed<PersistentVolume>,
    classes: Option<CacheFeed<VolumeAttributesClass>>,
    pods: Option<CacheFeed<Pod>>,
}

impl Stores {
    /// The caches from the process's provider: shared with the other sidecars of a `csi-sidecars` process.
    pub fn new(caches: &CacheProvider, classes: bool, pods: bool) -> (Stores, Feeds) {
        let (claims, claims_feed) = caches.cache();
        let (volumes, volumes_feed) = caches.cache();
        let (classes, classes_feed) = caches.optional_cache(classes);
        let (pods, pods_feed) = caches.optional_cache(pods);
        let feeds = Feeds { claims: claims_feed, volumes: volumes_feed, classes: classes_feed, pods: pods_feed };
        (Stores { claims, volumes, classes, pods }, feeds)
    }

    /// The claim of a `namespace/name` key.
    pub fn claim(&self, key: &str) -> Option<Arc<PersistentVolumeClaim>> {
        let (namespace, name) = key.split_once('/')?;
        self.claims.get(&ObjectRef::new(name).within(namespace))
    }

    pub fn volume(&self, name: &str) -> Option<Arc<PersistentVolume>> {
        self.volumes.get(&ObjectRef::new(name))
    }

    pub fn class(&self, name: &str) -> Option<Arc<VolumeAttributesClass>> {
        if name.is_empty() {
            return None;
        }
        self.classes.as_ref()?.get(&ObjectRef::new(name))
    }

    /// Whether a pod that has not terminated uses the claim.
    pub fn used_by_pod(&self, key: &str) -> bool {
        let Some(pods) = &self.pods else { return false };
        pods.state().iter().any(|pod| claims_in_use(pod).iter().any(|k| k == key))
    }
}

/// The watches feeding the caches and the queue.
pub fn watches(shared: &Arc<Shared>, feeds: Feeds) -> Watches {
    let client = shared.client.clone();
    let mut watches = Watches::default();

    let s = shared.clone();
    let mut first_list = true;
    watches.watch(feeds.claims, Api::all(client.clone()), move |change| match change {
        Change::Applied { object: claim, listed: true, .. } => {
            let key = claim_key(claim);
            s.written_claims.seen(claim);
            if first_list && uncertain_at_startup(claim) {
                s.memory.mark_uncertain(&key);
            }
            s.queue.add(key);
        }
        Change::Applied { old, object: claim, listed: false } => {
            s.written_claims.seen(claim);
            let (expansion, modification) = (s.options.expansion.as_ref(), s.options.modification.is_some());
            let volume_cached = |volume: &str| s.stores.volume(volume).is_some();
            if old.is_none_or(|old| claim_update_needs_sync(&old, claim, expansion, modification, volume_cached)) {
                s.queue.add(claim_key(claim));
            }
        }
        Change::Deleted(claim) => {
            let key = claim_key(claim);
            s.queue.forget(&key);
            s.memory.forget(&key);
            s.written_claims.forget(claim);
        }
        Change::Listed => first_list = false,
    });

    let s = shared.clone();
    watches.watch(feeds.volumes, Api::all(client.clone()), move |change| {
        match change {
            Change::Applied { object: volume, .. } => s.written_volumes.seen(volume),
            Change::Deleted(volume) => s.written_volumes.forget(volume),
            Change::Listed => {}
        }
        if let Some(key) = claim_of_new_volume(&change) {
            s.queue.add(key);
        }
    });

    if let Some(feed) = feeds.classes {
        let s = shared.clone();
        watches.watch(feed, Api::<VolumeAttributesClass>::all(client.clone()), move |change| {
            let Some(class) = changed_class(&change) else { return };
            for claim in s.stores.claims.state().iter().filter(|claim| waits_for_class(claim, class)) {
                s.queue.add(claim_key(claim));
            }
        });
    }

    if let Some(feed) = feeds.pods {
        let s = shared.clone();
        watches.watch(feed, Api::<Pod>::all(client), move |change| {
            for key in claims_freed_by_pod(&change, |key| s.memory.in_use_error(key)) {
                s.queue.add(key);
            }
        });
    }
    watches
}
