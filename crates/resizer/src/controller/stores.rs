//! The watch caches and the event filters (reference §3.2, §4.2): which change queues which claim. The filters are
//! the pure ones from [`crate::translate::expansion::filter`] and [`crate::translate::modification::filter`]; this module only gives them
//! the old and the new object.

use std::fmt::Debug;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::VolumeAttributesClass;
use kube::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};

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
    writers: std::sync::Mutex<Option<Writers>>,
}

struct Writers {
    claims: Writer<PersistentVolumeClaim>,
    volumes: Writer<PersistentVolume>,
    classes: Option<Writer<VolumeAttributesClass>>,
    pods: Option<Writer<Pod>>,
}

fn optional_store<K>(wanted: bool) -> (Option<Store<K>>, Option<Writer<K>>)
where
    K: kube::Resource<DynamicType = ()> + Clone + 'static,
{
    if !wanted {
        return (None, None);
    }
    let (store, writer) = reflector::store();
    (Some(store), Some(writer))
}

async fn ready<K>(store: &Option<Store<K>>) -> bool
where
    K: kube::Resource<DynamicType = ()> + Clone + 'static,
{
    match store {
        Some(store) => store.wait_until_ready().await.is_ok(),
        None => true,
    }
}

impl Stores {
    pub fn new(classes: bool, pods: bool) -> Stores {
        let (claims, claims_writer) = reflector::store();
        let (volumes, volumes_writer) = reflector::store();
        let (classes, classes_writer) = optional_store(classes);
        let (pods, pods_writer) = optional_store(pods);
        let writers =
            Writers { claims: claims_writer, volumes: volumes_writer, classes: classes_writer, pods: pods_writer };
        Stores { claims, volumes, classes, pods, writers: std::sync::Mutex::new(Some(writers)) }
    }

    /// True once every cache holds a complete list; false if a watch ended first.
    pub async fn wait_until_ready(&self) -> bool {
        let (a, b, c, d) = tokio::join!(
            self.claims.wait_until_ready(),
            self.volumes.wait_until_ready(),
            ready(&self.classes),
            ready(&self.pods)
        );
        a.is_ok() && b.is_ok() && c && d
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

/// Runs every watch, feeding the caches and the queue, until one ends (they retry with backoff, so normally never).
pub async fn watch_all(shared: Arc<Shared>) {
    let Some(writers) = shared.stores.writers.lock().unwrap_or_else(|p| p.into_inner()).take() else {
        tracing::error!("the watches were already started");
        return;
    };
    let client = shared.client.clone();

    let claims = {
        let shared = shared.clone();
        let mut first_list = true;
        watch(Api::<PersistentVolumeClaim>::all(client.clone()), writers.claims, move |old, event| match event {
            Event::InitApply(claim) => {
                let key = claim_key(claim);
                if first_list && uncertain_at_startup(claim) {
                    shared.memory.mark_uncertain(&key);
                }
                shared.queue.add(key);
            }
            Event::Apply(claim) => {
                if old.is_none_or(|old| shared.claim_update_needs_sync(&old, claim)) {
                    shared.queue.add(claim_key(claim));
                }
            }
            Event::Delete(claim) => {
                let key = claim_key(claim);
                shared.queue.forget(&key);
                shared.memory.forget(&key);
            }
            Event::InitDone => first_list = false,
            Event::Init => {}
        })
    };
    let volumes = {
        let shared = shared.clone();
        watch(Api::<PersistentVolume>::all(client.clone()), writers.volumes, move |old, event| {
            // A claim waiting for its PV to reach the cache (item 8) goes on as soon as it does.
            if let (None, Event::Apply(volume)) = (old, event)
                && let Some(reference) = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref())
                && let (Some(namespace), Some(name)) = (&reference.namespace, &reference.name)
            {
                shared.queue.add(format!("{namespace}/{name}"));
            }
        })
    };
    let classes = async {
        let Some(writer) = writers.classes else { return std::future::pending().await };
        let shared = shared.clone();
        watch(Api::<VolumeAttributesClass>::all(client.clone()), writer, move |_, event| {
            if let Event::Apply(class) = event {
                shared.queue_claims_waiting_for(class.metadata.name.as_deref().unwrap_or_default());
            }
        })
        .await
    };
    let pods = async {
        let Some(writer) = writers.pods else { return std::future::pending().await };
        let shared = shared.clone();
        watch(Api::<Pod>::all(client.clone()), writer, move |old, event| {
            // A claim whose expansion waits for its pods to go (§3 item 18) is queued when one goes.
            let (Event::Apply(pod) | Event::Delete(pod)) = event else { return };
            let mut keys = claims_in_use(pod);
            if let Some(old) = old {
                keys.extend(claims_in_use(&old));
            }
            for key in keys {
                if shared.memory.in_use_error(&key) {
                    shared.queue.add(key);
                }
            }
        })
        .await
    };
    tokio::select! {
        _ = claims => {}
        _ = volumes => {}
        _ = classes => {}
        _ = pods => {}
    }
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

/// One reflector: a watch with kube-runtime's default backoff, applied to the cache. `on_event` gets the object as
/// the cache held it before the event (`None` for a new one) and the event, after the cache has it.
async fn watch<K>(api: Api<K>, mut writer: Writer<K>, mut on_event: impl FnMut(Option<Arc<K>>, &Event<K>))
where
    K: kube::Resource<DynamicType = ()> + Clone + Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
{
    let kind = K::kind(&()).into_owned();
    let store = writer.as_reader();
    let stream = watcher::watcher(api, watcher::Config::default()).default_backoff();
    futures::pin_mut!(stream);
    while let Some(event) = stream.next().await {
        match event {
            Ok(event) => {
                let old = match &event {
                    Event::Apply(object) | Event::InitApply(object) => store.get(&ObjectRef::from_obj(object)),
                    _ => None,
                };
                writer.apply_watcher_event(&event);
                on_event(old, &event);
            }
            Err(err) => tracing::warn!(kind = %kind, error = %err, "watch failed, retrying"),
        }
    }
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
