//! The watch caches and what their changes queue (external-attacher pkg/controller/controller.go, the informers'
//! handlers). Handlers only route: the rules are [`crate::translate::filter`]'s.

use std::sync::Arc;

use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::api::storage::v1::{CSINode, VolumeAttachment};
use kube::Api;
use kube::runtime::reflector::{ObjectRef, Store};
use sidecar_runtime::watch::{CacheFeed, CacheProvider, Change, Watches};

use super::Shared;
use crate::translate::filter::{self, Direction};

/// Read-only views of the caches.
pub struct Stores {
    pub attachments: Store<VolumeAttachment>,
    /// Only when the driver publishes (the PVs' finalizers and the volumes' CSI form).
    pub volumes: Option<Store<PersistentVolume>>,
    /// Only when the driver publishes (the node IDs).
    pub csi_nodes: Option<Store<CSINode>>,
}

/// The writing halves of the caches, until the watches start.
pub struct Feeds {
    attachments: CacheFeed<VolumeAttachment>,
    volumes: Option<CacheFeed<PersistentVolume>>,
    csi_nodes: Option<CacheFeed<CSINode>>,
}

impl Stores {
    /// The caches from the process's provider (shared with the other sidecars of a `csi-sidecars` process).
    pub fn new(caches: &CacheProvider, publishing: bool) -> (Stores, Feeds) {
        let (attachments, attachments_feed) = caches.cache();
        let (volumes, volumes_feed) = caches.optional_cache(publishing);
        let (csi_nodes, csi_nodes_feed) = caches.optional_cache(publishing);
        let feeds = Feeds { attachments: attachments_feed, volumes: volumes_feed, csi_nodes: csi_nodes_feed };
        (Stores { attachments, volumes, csi_nodes }, feeds)
    }

    pub fn attachment(&self, name: &str) -> Option<Arc<VolumeAttachment>> {
        self.attachments.get(&ObjectRef::new(name))
    }

    pub fn volume(&self, name: &str) -> Option<Arc<PersistentVolume>> {
        self.volumes.as_ref()?.get(&ObjectRef::new(name))
    }

    pub fn csi_node(&self, name: &str) -> Option<Arc<CSINode>> {
        self.csi_nodes.as_ref()?.get(&ObjectRef::new(name))
    }

    /// The names of the driver's VolumeAttachments that a resync queues in `direction` (`None`: every one, for a
    /// driver that attaches nothing).
    pub fn names_to(&self, driver: &str, direction: Option<Direction>) -> Vec<String> {
        let state = self.attachments.state();
        let wanted = |va: &VolumeAttachment| {
            filter::for_driver(va, driver) && direction.is_none_or(|d| filter::direction(va) == d)
        };
        state.iter().filter(|va| wanted(va)).filter_map(|va| va.metadata.name.clone()).collect()
    }

    /// The PVs whose finalizer may have to go.
    pub fn volumes_to_sync(&self, driver: &str) -> Vec<String> {
        let Some(volumes) = &self.volumes else { return Vec::new() };
        let state = volumes.state();
        state
            .iter()
            .filter(|pv| filter::volume_needs_sync(pv, driver))
            .filter_map(|pv| pv.metadata.name.clone())
            .collect()
    }
}

/// The watches feeding the caches and the queues. Every VolumeAttachment is cached; only this driver's are queued.
pub fn watches(shared: &Arc<Shared>, feeds: Feeds) -> Watches {
    let client = shared.client.clone();
    let mut watches = Watches::default();

    let s = shared.clone();
    watches.watch(feeds.attachments, Api::all(client.clone()), move |change| match change {
        Change::Applied { old, object, listed } => {
            s.written.seen(object);
            let changed = listed || old.is_none_or(|old| filter::update_needs_sync(&old, object));
            if changed && filter::for_driver(object, &s.options.driver) {
                s.route(object);
            }
        }
        Change::Deleted(attachment) => {
            s.written.forget(attachment);
            let name = attachment.metadata.name.clone().unwrap_or_default();
            s.take_forced(&name);
            if let Some(volume) = filter::volume_of_deleted(attachment).filter(|_| s.stores.volumes.is_some()) {
                s.volumes.add(volume.to_string());
            }
        }
        Change::Listed => {}
    });

    if let Some(feed) = feeds.volumes {
        let s = shared.clone();
        watches.watch(feed, Api::all(client.clone()), move |change| {
            if let Change::Applied { object: volume, .. } = change
                && filter::volume_needs_sync(volume, &s.options.driver)
            {
                s.volumes.add(volume.metadata.name.clone().unwrap_or_default());
            }
        });
    }
    if let Some(feed) = feeds.csi_nodes {
        // Read when a VolumeAttachment is synced; a change of a CSINode queues nothing (as upstream's lister).
        watches.watch(feed, Api::<CSINode>::all(client), |_| {});
    }
    watches
}
