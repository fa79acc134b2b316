//! The group loop's caches, and the watch handlers that queue the group snapshot a change concerns.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::{Api, ResourceExt};
use sidecar_runtime::watch::{self, Cache, CacheFeed, Change, Watches};
use snapshot_api::{
    VolumeGroupSnapshot, VolumeGroupSnapshotClass, VolumeGroupSnapshotContent, VolumeSnapshot, VolumeSnapshotContent,
};

use super::Shared;
use crate::translate::members::is_member_of;
use crate::translate::queue_keys::{group_key, owner_group_keys, referenced_group_key, woken_by_claim, woken_by_class};

/// Read-only views of the caches.
pub struct Stores {
    pub groups: Cache<VolumeGroupSnapshot>,
    pub group_contents: Cache<VolumeGroupSnapshotContent>,
    pub classes: Cache<VolumeGroupSnapshotClass>,
    /// Claims and volumes: the selector is applied to the claims, and members are named after the volumes' handles.
    pub claims: Cache<PersistentVolumeClaim>,
    pub volumes: Cache<PersistentVolume>,
    /// The members, as VolumeSnapshots and VolumeSnapshotContents.
    pub snapshots: Cache<VolumeSnapshot>,
    pub contents: Cache<VolumeSnapshotContent>,
}

/// The writing halves of the caches, until the watches start.
pub struct Feeds {
    groups: CacheFeed<VolumeGroupSnapshot>,
    group_contents: CacheFeed<VolumeGroupSnapshotContent>,
    classes: CacheFeed<VolumeGroupSnapshotClass>,
    claims: CacheFeed<PersistentVolumeClaim>,
    volumes: CacheFeed<PersistentVolume>,
    snapshots: CacheFeed<VolumeSnapshot>,
    contents: CacheFeed<VolumeSnapshotContent>,
}

impl Stores {
    pub fn new() -> (Stores, Feeds) {
        let (groups, groups_feed) = watch::cache();
        let (group_contents, group_contents_feed) = watch::cache();
        let (classes, classes_feed) = watch::cache();
        let (claims, claims_feed) = watch::cache();
        let (volumes, volumes_feed) = watch::cache();
        let (snapshots, snapshots_feed) = watch::cache();
        let (contents, contents_feed) = watch::cache();
        let feeds = Feeds {
            groups: groups_feed,
            group_contents: group_contents_feed,
            classes: classes_feed,
            claims: claims_feed,
            volumes: volumes_feed,
            snapshots: snapshots_feed,
            contents: contents_feed,
        };
        (Stores { groups, group_contents, classes, claims, volumes, snapshots, contents }, feeds)
    }

    /// The group snapshot of a `namespace/name` key.
    pub fn group(&self, key: &str) -> Option<Arc<VolumeGroupSnapshot>> {
        let (namespace, name) = key.split_once('/')?;
        self.groups.get_in(namespace, name)
    }

    pub fn group_content(&self, name: &str) -> Option<Arc<VolumeGroupSnapshotContent>> {
        self.group_contents.get(name)
    }

    pub fn class(&self, name: &str) -> Option<Arc<VolumeGroupSnapshotClass>> {
        self.classes.get(name)
    }

    pub fn snapshot(&self, namespace: &str, name: &str) -> Option<Arc<VolumeSnapshot>> {
        self.snapshots.get_in(namespace, name)
    }

    pub fn content(&self, name: &str) -> Option<Arc<VolumeSnapshotContent>> {
        self.contents.get(name)
    }

    /// Every group snapshot's key, for the resync.
    pub fn group_keys(&self) -> Vec<String> {
        self.groups.state().iter().map(|g| group_key(g)).collect()
    }

    /// The group contents whose reference names the group snapshot of a `namespace/name` key.
    pub fn contents_of(&self, key: &str) -> Vec<Arc<VolumeGroupSnapshotContent>> {
        self.group_contents.state().into_iter().filter(|c| referenced_group_key(c) == key).collect()
    }

    /// The claims of one namespace.
    pub fn claims_in(&self, namespace: &str) -> Vec<PersistentVolumeClaim> {
        self.claims.state_in(namespace).into_iter().map(Arc::unwrap_or_clone).collect()
    }

    /// The VolumeSnapshots a group snapshot owns ([`is_member_of`]).
    pub fn members_of(&self, group: &VolumeGroupSnapshot) -> Vec<VolumeSnapshot> {
        self.snapshots.state().into_iter().filter(|s| is_member_of(s, group)).map(|s| (*s).clone()).collect()
    }
}

/// The watches feeding the caches and the queue. Each handler only routes: which group a change concerns is
/// [`crate::translate::queue_keys`]'s to say.
pub fn watches(shared: &Arc<Shared>, feeds: Feeds) -> Watches {
    let client = shared.client.clone();
    let mut watches = Watches::default();

    let s = shared.clone();
    watches.watch(feeds.groups, Api::all(client.clone()), move |change| match change {
        Change::Applied { object, .. } => s.groups.add(group_key(object)),
        Change::Deleted(object) => {
            s.groups.forget(&group_key(object));
            // Once more without the group: a content it leaves behind goes by its policy.
            s.groups.add(group_key(object));
            if let Some(metrics) = &s.metrics {
                metrics.group_gone(&object.uid().unwrap_or_default());
            }
        }
        Change::Listed => {}
    });

    let s = shared.clone();
    watches.watch(feeds.group_contents, Api::all(client.clone()), move |change| match change {
        Change::Applied { object, .. } | Change::Deleted(object) => s.groups.add(referenced_group_key(object)),
        Change::Listed => {}
    });

    let s = shared.clone();
    watches.watch(feeds.classes, Api::all(client.clone()), move |change| {
        if let Change::Applied { listed: false, .. } = change {
            woken_by_class(&s.stores.groups.state()).into_iter().for_each(|key| s.groups.add(key));
        }
    });

    let s = shared.clone();
    watches.watch(feeds.claims, Api::all(client.clone()), move |change| {
        if let Change::Applied { object: claim, listed: false, .. } = change {
            woken_by_claim(&s.stores.groups.state(), claim).into_iter().for_each(|key| s.groups.add(key));
        }
    });
    watches.watch(feeds.volumes, Api::all(client.clone()), |_| {});

    let s = shared.clone();
    watches.watch(feeds.snapshots, Api::all(client.clone()), move |change| match change {
        Change::Applied { object, .. } | Change::Deleted(object) => {
            owner_group_keys(object).into_iter().for_each(|key| s.groups.add(key));
        }
        Change::Listed => {}
    });
    watches.watch(feeds.contents, Api::all(client), |_| {});
    watches
}
