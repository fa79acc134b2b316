//! The watch caches and the event filters: which change queues which key.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::{CSINode, StorageClass, VolumeAttachment};
use kube::Api;
use kube::runtime::reflector::{ObjectRef, Store};
use sidecar_runtime::watch::{CacheFeed, CacheProvider, Change, Watches};

use super::{ClaimKey, Shared};
use crate::translate::claim_filter::claim_class_name;
use crate::translate::clone_source::has_clone_protection;
use crate::translate::data_source::{DataSource, claim_data_source};
use crate::translate::names::{
    ANN_BETA_STORAGE_PROVISIONER, ANN_STORAGE_PROVISIONER, KIND_PERSISTENT_VOLUME_CLAIM, KIND_VOLUME_SNAPSHOT,
    SNAPSHOT_API_GROUP,
};

/// Read-only views of the caches.
pub struct Stores {
    pub claims: Store<PersistentVolumeClaim>,
    pub volumes: Store<PersistentVolume>,
    pub classes: Store<StorageClass>,
    /// Only when the driver supports topology (item 44), and never in node mode (item 70).
    pub csi_nodes: Option<Store<CSINode>>,
    pub nodes: Option<Store<Node>>,
    /// Only when the driver attaches volumes (PUBLISH_UNPUBLISH_VOLUME): an attachment blocks deletion (item 62).
    pub attachments: Option<Store<VolumeAttachment>>,
}

/// The writing halves of the caches, until the watches start.
pub struct Feeds {
    claims: CacheFeed<PersistentVolumeClaim>,
    volumes: CacheFeed<PersistentVolume>,
    classes: CacheFeed<StorageClass>,
    csi_nodes: Option<CacheFeed<CSINode>>,
    nodes: Option<CacheFeed<Node>>,
    attachments: Option<CacheFeed<VolumeAttachment>>,
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
        };
        (Stores { claims, volumes, classes, csi_nodes, nodes, attachments }, feeds)
    }

    pub fn claim(&self, key: &ClaimKey) -> Option<Arc<PersistentVolumeClaim>> {
        let claim = self.claims.get(&ObjectRef::new(&key.name).within(&key.namespace))?;
        (claim.metadata.uid.as_deref() == Some(key.uid.as_str())).then_some(claim)
    }

    pub fn volume(&self, name: &str) -> Option<Arc<PersistentVolume>> {
        self.volumes.get(&ObjectRef::new(name))
    }

    pub fn class(&self, name: &str) -> Option<Arc<StorageClass>> {
        if name.is_empty() {
            return None;
        }
        self.classes.get(&ObjectRef::new(name))
    }
}

/// The queue key of a claim.
pub fn claim_key(claim: &PersistentVolumeClaim) -> Option<ClaimKey> {
    Some(ClaimKey {
        uid: claim.metadata.uid.clone()?,
        namespace: claim.metadata.namespace.clone()?,
        name: claim.metadata.name.clone()?,
    })
}

/// Event filter for claims: the ones that name a provisioner at all (the worker decides whether it is this one),
/// and clone sources carrying the clone protection.
fn claim_concerns_us(claim: &PersistentVolumeClaim) -> bool {
    let annotations = claim.metadata.annotations.as_ref();
    annotations.is_some_and(|a| a.contains_key(ANN_STORAGE_PROVISIONER) || a.contains_key(ANN_BETA_STORAGE_PROVISIONER))
        || has_clone_protection(claim)
}

/// The claim `claim` clones, if it is in the cache: its clone protection may depend on `claim`'s phase.
fn clone_source_key(shared: &Shared, claim: &PersistentVolumeClaim) -> Option<ClaimKey> {
    // With the gate off a cross-namespace source is refused anyway; asking with it on finds the source either way.
    let source = claim_data_source(claim, true).ok()??;
    if source.kind != KIND_PERSISTENT_VOLUME_CLAIM || !source.api_group.is_empty() {
        return None;
    }
    let source = shared.stores.claims.get(&ObjectRef::new(&source.name).within(&source.namespace))?;
    claim_key(&source)
}

/// The watches feeding the caches and the queues.
pub fn watches(shared: &Arc<Shared>, feeds: Feeds) -> Watches {
    let client = shared.client.clone();
    let mut watches = Watches::default();

    let s = shared.clone();
    watches.watch(feeds.claims, Api::all(client.clone()), move |change| match change {
        Change::Applied { object: claim, .. } => {
            if claim_concerns_us(claim)
                && s.claim_changed(claim)
                && let Some(key) = claim_key(claim)
            {
                s.claims.add(key);
            }
            if let Some(source) = clone_source_key(&s, claim) {
                s.claims.add(source);
            }
        }
        Change::Deleted(claim) => {
            if let Some(uid) = claim.metadata.uid.as_deref() {
                s.forget_pin(uid);
                s.own_writes().forget(uid);
                s.forget_ownership(uid);
            }
            if let Some(source) = clone_source_key(&s, claim) {
                s.claims.add(source);
            }
            // The last pending restore from a snapshot may have gone: its source protection may come off now
            // rather than at the next orphan sweep.
            if let Some(source) = snapshot_source(claim) {
                let (s, claim) = (s.clone(), claim.clone());
                tokio::spawn(async move { s.release_snapshot(&claim, &source).await });
            }
        }
        Change::Listed => {}
    });

    let s = shared.clone();
    watches.watch(feeds.volumes, Api::all(client.clone()), move |change| {
        if let Change::Deleted(volume) = &change
            && let Some(uid) = &volume.metadata.uid
        {
            s.deleted_volumes().remove(uid);
        }
        if let Change::Applied { object: volume, .. } = change {
            if let Some(name) = volume.metadata.name.clone() {
                s.volumes.add(name);
            }
            // A claim waiting for its PV to drop the provisioning finalizer.
            if let Some(key) = bound_claim_key(volume) {
                s.claims.add(key);
            }
        }
    });

    let s = shared.clone();
    watches.watch(feeds.classes, Api::all(client.clone()), move |change| {
        if matches!(change, Change::Applied { listed: false, .. } | Change::Deleted(_)) {
            s.capacity_keys_may_have_changed();
        }
        if let Change::Applied { object: class, listed: false, .. } = change {
            // A class that appears or changes may unblock its claims.
            let name = class.metadata.name.clone().unwrap_or_default();
            for claim in s.stores.claims.state() {
                let pending = claim.spec.as_ref().and_then(|s| s.volume_name.as_deref()).is_none_or(str::is_empty);
                if pending
                    && claim_class_name(&claim) == name
                    && claim_concerns_us(&claim)
                    && let Some(key) = claim_key(&claim)
                {
                    s.claims.add(key);
                }
            }
        }
    });

    // Topology objects matter only to the published capacity once the caches are filled.
    if let Some(feed) = feeds.csi_nodes {
        let s = shared.clone();
        watches.watch(feed, Api::<CSINode>::all(client.clone()), move |change| {
            if matches!(change, Change::Applied { listed: false, .. } | Change::Deleted(_)) {
                s.capacity_keys_may_have_changed();
            }
        });
    }
    if let Some(feed) = feeds.attachments {
        let s = shared.clone();
        watches.watch(feed, Api::<VolumeAttachment>::all(client.clone()), move |change| {
            // A detached volume may be deleted now.
            if let Change::Deleted(attachment) = change
                && let Some(volume) = &attachment.spec.source.persistent_volume_name
            {
                s.volumes.add(volume.clone());
            }
        });
    }
    if let Some(feed) = feeds.nodes {
        let s = shared.clone();
        watches.watch(feed, Api::<Node>::all(client), move |change| {
            if matches!(change, Change::Applied { listed: false, .. } | Change::Deleted(_)) {
                s.capacity_keys_may_have_changed();
            }
        });
    }
    watches
}

/// The VolumeSnapshot `claim` restores from, if any.
fn snapshot_source(claim: &PersistentVolumeClaim) -> Option<DataSource> {
    let source = claim_data_source(claim, true).ok()??;
    (source.kind == KIND_VOLUME_SNAPSHOT && source.api_group == SNAPSHOT_API_GROUP).then_some(source)
}

fn bound_claim_key(volume: &PersistentVolume) -> Option<ClaimKey> {
    let reference = volume.spec.as_ref()?.claim_ref.as_ref()?;
    Some(ClaimKey {
        uid: reference.uid.clone()?,
        namespace: reference.namespace.clone()?,
        name: reference.name.clone()?,
    })
}
