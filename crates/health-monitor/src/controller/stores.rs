//! The watch caches and what their changes queue (external-health-monitor pkg/controller/pv_monitor_controller.go,
//! the informers' handlers). Handlers only route: the rules are [`crate::translate::filter`]'s.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::Api;
use sidecar_runtime::watch::{Cache, CacheFeed, CacheProvider, Change, Watches};

use super::Shared;
use crate::translate::filter::{self, Monitored};
use crate::translate::mode::Mode;

/// Read-only views of the caches.
pub struct Stores {
    pub claims: Cache<PersistentVolumeClaim>,
    pub volumes: Cache<PersistentVolume>,
}

/// The writing halves of the caches, until the watches start.
pub struct Feeds {
    claims: CacheFeed<PersistentVolumeClaim>,
    volumes: CacheFeed<PersistentVolume>,
}

impl Stores {
    /// The caches from the process's provider (shared with the other sidecars of a `csi-sidecars` process).
    pub fn new(caches: &CacheProvider) -> (Stores, Feeds) {
        let (claims, claims_feed) = caches.cache();
        let (volumes, volumes_feed) = caches.cache();
        (Stores { claims, volumes }, Feeds { claims: claims_feed, volumes: volumes_feed })
    }

    pub fn volume(&self, name: &str) -> Option<Arc<PersistentVolume>> {
        self.volumes.get(name)
    }

    pub fn claim(&self, monitored: &Monitored) -> Option<Arc<PersistentVolumeClaim>> {
        self.claims.get_in(&monitored.claim_namespace, &monitored.claim_name)
    }

    /// The names of the PVs whose health is checked.
    pub fn monitored_names(&self, driver: &str) -> Vec<String> {
        self.volumes.filter_map(|pv| pv.metadata.name.clone().filter(|_| filter::monitored(pv, driver).is_some()))
    }

    /// The PVs whose health is checked, with where their reports go.
    pub fn monitored(&self, driver: &str) -> Vec<Monitored> {
        self.volumes.filter_map(|pv| filter::monitored(pv, driver))
    }
}

/// The watches feeding the caches (and, per volume, the queue): a PV is queued once it is bound; a deleted claim's
/// memory is dropped.
pub fn watches(shared: &Arc<Shared>, feeds: Feeds) -> Watches {
    let client = shared.client.clone();
    let mut watches = Watches::default();

    let s = shared.clone();
    watches.watch(feeds.volumes, Api::all(client.clone()), move |change| {
        if let Change::Applied { old, object, listed } = change
            && s.options.mode == Mode::PerVolume
            && !listed
            && filter::update_needs_sync(old.as_deref(), object, &s.options.driver)
        {
            s.volumes.add(object.metadata.name.clone().unwrap_or_default());
        }
    });

    let s = shared.clone();
    watches.watch(feeds.claims, Api::<PersistentVolumeClaim>::all(client), move |change| {
        if let Change::Deleted(claim) = change {
            s.forget(&filter::claim_uid(claim));
        }
    });
    watches
}
