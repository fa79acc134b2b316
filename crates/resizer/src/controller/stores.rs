//! The watch caches and the event filters (reference §3.2, §4.2): which change queues which claim. The filters are
//! the pure ones from [`crate::translate::expansion::filter`] and [`crate::translate::modification::filter`]; this module only gives them
//! the old and the new object.

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
use crate::translate::modification::filter::awaited_class;
use crate::translate::names::MODIFY_IN_PROGRESS;

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

    /// Whether a pod that has not terminated uses the claim (§3 item 7).
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
            s.written_claims.seen(&key, claim);
            if first_list && uncertain_at_startup(claim) {
                s.memory.mark_uncertain(&key);
            }
            s.queue.add(key);
        }
        Change::Applied { old, object: claim, listed: false } => {
            s.written_claims.seen(&claim_key(claim), claim);
            if old.is_none_or(|old| s.claim_update_needs_sync(&old, claim)) {
                s.queue.add(claim_key(claim));
            }
        }
        Change::Deleted(claim) => {
            let key = claim_key(claim);
            s.queue.forget(&key);
            s.memory.forget(&key);
            s.written_claims.forget(&key);
        }
        Change::Listed => first_list = false,
    });

    let s = shared.clone();
    watches.watch(feeds.volumes, Api::all(client.clone()), move |change| {
        match change {
            Change::Applied { object: volume, .. } => {
                s.written_volumes.seen(volume.metadata.name.as_deref().unwrap_or_default(), volume)
            }
            Change::Deleted(volume) => s.written_volumes.forget(volume.metadata.name.as_deref().unwrap_or_default()),
            Change::Listed => {}
        }
        // A claim waiting for its PV to reach the cache (item 8) goes on as soon as it does.
        if let Change::Applied { old: None, object: volume, listed: false } = change
            && let Some(reference) = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref())
            && let (Some(namespace), Some(name)) = (&reference.namespace, &reference.name)
        {
            s.queue.add(format!("{namespace}/{name}"));
        }
    });

    if let Some(feed) = feeds.classes {
        let s = shared.clone();
        watches.watch(feed, Api::<VolumeAttributesClass>::all(client.clone()), move |change| {
            if let Change::Applied { object: class, listed: false, .. } = change {
                s.queue_claims_waiting_for(class.metadata.name.as_deref().unwrap_or_default());
            }
        });
    }

    if let Some(feed) = feeds.pods {
        let s = shared.clone();
        watches.watch(feed, Api::<Pod>::all(client), move |change| {
            // A claim whose expansion waits for its pods to go (§3 item 18) is queued when one goes.
            let mut keys = match &change {
                Change::Applied { object: pod, listed: false, .. } | Change::Deleted(pod) => claims_in_use(pod),
                _ => return,
            };
            if let Change::Applied { old: Some(old), .. } = &change {
                keys.extend(claims_in_use(old));
            }
            for key in keys {
                if s.memory.in_use_error(&key) {
                    s.queue.add(key);
                }
            }
        });
    }
    watches
}

impl Shared {
    fn claim_update_needs_sync(&self, old: &PersistentVolumeClaim, new: &PersistentVolumeClaim) -> bool {
        let expansion = self.options.expansion.as_ref().is_some_and(|config| {
            crate::translate::expansion::filter::claim_update_needs_sync(
                old,
                new,
                config.recover_volume_expansion_failure,
            )
        });
        let modification = self.options.modification.is_some() && {
            let old_volume = crate::translate::claim::bound_volume_name(old);
            let known = !old_volume.is_empty() && self.stores.volume(old_volume).is_some();
            crate::translate::modification::filter::claim_update_needs_sync(old, new, known)
        };
        expansion || modification
    }

    /// Deliberate difference (§4 item 7): a class that appears (or changes) queues the claims waiting for it.
    fn queue_claims_waiting_for(&self, class: &str) {
        for claim in self.stores.claims.state() {
            if waits_for_class(&claim, class) {
                self.queue.add(claim_key(&claim));
            }
        }
    }
}

/// Whether `claim` waits for `class`: Pending on it (§4 item 16), or InProgress with it as the locked target whose
/// class was missing (§4 item 15).
fn waits_for_class(claim: &PersistentVolumeClaim, class: &str) -> bool {
    let locked = claim.status.as_ref().and_then(|s| s.modify_volume_status.as_ref()).is_some_and(|m| {
        m.status == MODIFY_IN_PROGRESS && m.target_volume_attributes_class_name.as_deref() == Some(class)
    });
    awaited_class(claim) == Some(class) || locked
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ModifyVolumeStatus, PersistentVolumeClaimSpec, PersistentVolumeClaimStatus};

    use super::*;

    fn claim(spec: &str, status: Option<(&str, Option<&str>)>) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            spec: Some(PersistentVolumeClaimSpec {
                volume_attributes_class_name: Some(spec.to_string()),
                ..Default::default()
            }),
            status: Some(PersistentVolumeClaimStatus {
                phase: Some("Bound".into()),
                modify_volume_status: status.map(|(status, target)| ModifyVolumeStatus {
                    status: status.into(),
                    target_volume_attributes_class_name: target.map(str::to_string),
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_new_class_wakes_the_claims_waiting_for_it() {
        // (case, claim, queued when "gold" appears)
        let table = [
            ("Pending on gold", claim("gold", Some(("Pending", None))), true),
            ("Pending on another class", claim("silver", Some(("Pending", None))), false),
            ("InProgress, gold locked", claim("silver", Some(("InProgress", Some("gold")))), true),
            ("InProgress toward another class", claim("gold", Some(("InProgress", Some("silver")))), false),
            ("Infeasible on gold", claim("gold", Some(("Infeasible", Some("gold")))), false),
            ("nothing under way", claim("gold", None), false),
        ];
        for (case, claim, want) in table {
            assert_eq!(waits_for_class(&claim, "gold"), want, "{case}");
        }
    }
}
