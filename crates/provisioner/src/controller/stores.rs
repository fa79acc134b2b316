//! The watch caches, and which change queues which key.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::{CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment};
use kube::Api;
use sidecar_runtime::watch::{Cache, CacheFeed, CacheProvider, Change, Watches};

use super::Shared;
use crate::translate::watch_keys::{
    ClaimKey, bound_claim_key, claim_concerns_us, claim_key, cloned_claim, detached_volume, may_change_capacity_keys,
    restored_snapshot, waits_for_class,
};

/// Read-only views of the caches.
pub struct Stores {
    pub claims: Cache<PersistentVolumeClaim>,
    pub volumes: Cache<PersistentVolume>,
    pub classes: Cache<StorageClass>,
    /// Only when the driver supports topology, and never in node mode (which takes its topology from NodeGetInfo).
    pub csi_nodes: Option<Cache<CSINode>>,
    pub nodes: Option<Cache<Node>>,
    /// Only when the driver attaches volumes (PUBLISH_UNPUBLISH_VOLUME): an attachment blocks deletion.
    pub attachments: Option<Cache<VolumeAttachment>>,
    /// Only with `--enable-capacity`: this instance's CSIStorageCapacity objects.
    pub capacities: Option<Cache<CSIStorageCapacity>>,
}

/// The writing halves of the caches, until the watches start.
pub struct Feeds {
    claims: CacheFeed<PersistentVolumeClaim>,
    volumes: CacheFeed<PersistentVolume>,
    classes: CacheFeed<StorageClass>,
    csi_nodes: Option<CacheFeed<CSINode>>,
    nodes: Option<CacheFeed<Node>>,
    attachments: Option<CacheFeed<VolumeAttachment>>,
    capacities: Option<CacheFeed<CSIStorageCapacity>>,
}

impl Stores {
    /// The caches from the process's provider: shared with the other sidecars of a `csi-sidecars` process.
    pub fn new(caches: &CacheProvider, topology: bool, attachments: bool) -> (Stores, Feeds) {
        let (claims, claims_feed) = caches.cache();
        let (volumes, volumes_feed) = caches.cache();
        let (classes, classes_feed) = caches.cache();
        let (csi_nodes, csi_nodes_feed) = caches.optional_cache(topology);
        let (nodes, nodes_feed) = caches.optional_cache(topology);
        let (attachments, attachments_feed) = caches.optional_cache(attachments);
        let feeds = Feeds {
            claims: claims_feed,
            volumes: volumes_feed,
            classes: classes_feed,
            csi_nodes: csi_nodes_feed,
            nodes: nodes_feed,
            attachments: attachments_feed,
            capacities: None,
        };
        (Stores { claims, volumes, classes, csi_nodes, nodes, attachments, capacities: None }, feeds)
    }

    /// Adds the cache of the capacity publisher's own objects, which `config` selects.
    pub fn with_capacities(
        &mut self,
        feeds: &mut Feeds,
        caches: &CacheProvider,
        config: kube::runtime::watcher::Config,
    ) {
        let (capacities, feed) = caches.selected_cache(config);
        self.capacities = Some(capacities);
        feeds.capacities = Some(feed);
    }

    pub fn claim(&self, key: &ClaimKey) -> Option<Arc<PersistentVolumeClaim>> {
        let claim = self.claims.get_in(&key.namespace, &key.name)?;
        (claim.metadata.uid.as_deref() == Some(key.uid.as_str())).then_some(claim)
    }

    pub fn volume(&self, name: &str) -> Option<Arc<PersistentVolume>> {
        self.volumes.get(name)
    }

    pub fn class(&self, name: &str) -> Option<Arc<StorageClass>> {
        if name.is_empty() {
            return None;
        }
        self.classes.get(name)
    }

    /// The claims with a data source: the only ones the clone and restore rules (a source claim or snapshot still
    /// in use) look at, rebuilt from the cache without rebuilding the others.
    pub fn claims_with_data_source(&self) -> Vec<Arc<PersistentVolumeClaim>> {
        self.claims
            .filter(|claim| claim.spec.as_ref().is_some_and(|s| s.data_source.is_some() || s.data_source_ref.is_some()))
    }
}

/// Once the caches are filled, everything they hold is queued once, as an informer's initial adds are.
pub(super) fn queue_everything(shared: &Shared) {
    for key in shared.stores.claims.filter_map(claim_key) {
        shared.claims.add(key);
    }
    for name in shared.stores.volumes.keys(|key| Some(key.name.to_string())) {
        shared.volumes.add(name);
    }
}

/// The watches feeding the caches and the queues. Each handler only routes: which change queues which key
/// ([`crate::translate::watch_keys`] has the rules), and what the in-memory bookkeeping forgets.
pub(super) fn watches(shared: &Arc<Shared>, feeds: Feeds) -> Watches {
    let client = shared.client.clone();
    let mut watches = Watches::default();
    let s = shared.clone();
    watches.watch(feeds.claims, Api::all(client.clone()), move |change| claim_changed(&s, change));
    let s = shared.clone();
    watches.watch(feeds.volumes, Api::all(client.clone()), move |change| volume_changed(&s, change));
    let s = shared.clone();
    watches.watch(feeds.classes, Api::all(client.clone()), move |change| class_changed(&s, change));
    if let Some(feed) = feeds.csi_nodes {
        let s = shared.clone();
        watches.watch(feed, Api::<CSINode>::all(client.clone()), move |change| capacity_keys_changed(&s, &change));
    }
    if let Some(feed) = feeds.attachments {
        let s = shared.clone();
        watches.watch(feed, Api::<VolumeAttachment>::all(client.clone()), move |change| {
            if let Change::Deleted(attachment) = change
                && let Some(volume) = detached_volume(attachment)
            {
                s.volumes.add(volume);
            }
        });
    }
    if let Some(feed) = feeds.nodes {
        let s = shared.clone();
        watches.watch(feed, Api::<Node>::all(client.clone()), move |change| capacity_keys_changed(&s, &change));
    }
    if let (Some(feed), Some(capacity)) = (feeds.capacities, shared.capacity.clone()) {
        let api = Api::<CSIStorageCapacity>::namespaced(client, capacity.namespace());
        watches.watch(feed, api, move |change| {
            if let Change::Deleted(object) = change {
                capacity.deleted(object);
            }
        });
    }
    watches
}

fn claim_changed(s: &Shared, change: Change<'_, PersistentVolumeClaim>) {
    match change {
        Change::Applied { object: claim, .. } => {
            if claim_concerns_us(claim)
                && s.memory.claim_changed(claim)
                && let Some(key) = claim_key(claim)
            {
                s.claims.add(key);
            }
            if let Some(source) = clone_source_key(s, claim) {
                s.claims.add(source);
            }
        }
        Change::Deleted(claim) => {
            if let Some(uid) = claim.metadata.uid.as_deref() {
                s.memory.claim_gone(uid);
            }
            if let Some(source) = clone_source_key(s, claim) {
                s.claims.add(source);
            }
            if let Some(snapshot) = restored_snapshot(claim) {
                s.snapshot_releases.add(snapshot);
            }
        }
        Change::Listed => {}
    }
}

/// The cached claim `claim` clones.
fn clone_source_key(shared: &Shared, claim: &PersistentVolumeClaim) -> Option<ClaimKey> {
    let (namespace, name) = cloned_claim(claim)?;
    claim_key(&*shared.stores.claims.get_in(&namespace, &name)?)
}

fn volume_changed(s: &Shared, change: Change<'_, PersistentVolume>) {
    match change {
        Change::Applied { object: volume, .. } => {
            if let Some(name) = volume.metadata.name.clone() {
                s.volumes.add(name);
            }
            if let Some(key) = bound_claim_key(volume) {
                s.claims.add(key);
            }
        }
        Change::Deleted(volume) => {
            if let Some(uid) = &volume.metadata.uid {
                s.memory.volume_gone(uid);
            }
        }
        Change::Listed => {}
    }
}

fn class_changed(s: &Shared, change: Change<'_, StorageClass>) {
    capacity_keys_changed(s, &change);
    if let Change::Applied { object: class, listed: false, .. } = change {
        let name = class.metadata.name.as_deref().unwrap_or_default();
        for key in s.stores.claims.filter_map(|claim| waits_for_class(claim, name).then(|| claim_key(claim)).flatten())
        {
            s.claims.add(key);
        }
    }
}

/// A class, CSINode or Node change: the capacity publisher refreshes if that changes which objects should exist.
fn capacity_keys_changed<K>(s: &Shared, change: &Change<'_, K>) {
    if may_change_capacity_keys(change) {
        s.capacity_keys_may_have_changed();
    }
}
