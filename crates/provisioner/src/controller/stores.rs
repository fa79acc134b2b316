//! The watch caches and the event filters: which change queues which key.

use std::fmt::Debug;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use kube::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt, reflector::store::Writer};

use super::{ClaimKey, Shared};
use crate::translate::claim_filter::claim_class_name;
use crate::translate::clone_source::has_clone_protection;
use crate::translate::data_source::claim_data_source;
use crate::translate::names::{ANN_BETA_STORAGE_PROVISIONER, ANN_STORAGE_PROVISIONER, KIND_PERSISTENT_VOLUME_CLAIM};

/// Read-only views of the caches.
pub struct Stores {
    pub claims: Store<PersistentVolumeClaim>,
    pub volumes: Store<PersistentVolume>,
    pub classes: Store<StorageClass>,
    /// Only when the driver supports topology (item 44), and never in node mode (item 70).
    pub csi_nodes: Option<Store<CSINode>>,
    pub nodes: Option<Store<Node>>,
    writers: std::sync::Mutex<Option<Writers>>,
}

struct Writers {
    claims: Writer<PersistentVolumeClaim>,
    volumes: Writer<PersistentVolume>,
    classes: Writer<StorageClass>,
    csi_nodes: Option<Writer<CSINode>>,
    nodes: Option<Writer<Node>>,
}

impl Stores {
    pub fn new(topology: bool) -> Stores {
        let (claims, claims_writer) = reflector::store();
        let (volumes, volumes_writer) = reflector::store();
        let (classes, classes_writer) = reflector::store();
        let (csi_nodes, csi_nodes_writer) = if topology {
            let (store, writer) = reflector::store();
            (Some(store), Some(writer))
        } else {
            (None, None)
        };
        let (nodes, nodes_writer) = if topology {
            let (store, writer) = reflector::store();
            (Some(store), Some(writer))
        } else {
            (None, None)
        };
        let writers = Writers {
            claims: claims_writer,
            volumes: volumes_writer,
            classes: classes_writer,
            csi_nodes: csi_nodes_writer,
            nodes: nodes_writer,
        };
        Stores { claims, volumes, classes, csi_nodes, nodes, writers: std::sync::Mutex::new(Some(writers)) }
    }

    /// True once every cache holds a complete list; false if a watch ended first.
    pub async fn wait_until_ready(&self) -> bool {
        let csi_nodes = async {
            match &self.csi_nodes {
                Some(store) => store.wait_until_ready().await.is_ok(),
                None => true,
            }
        };
        let nodes = async {
            match &self.nodes {
                Some(store) => store.wait_until_ready().await.is_ok(),
                None => true,
            }
        };
        let (a, b, c, d, e) = tokio::join!(
            self.claims.wait_until_ready(),
            self.volumes.wait_until_ready(),
            self.classes.wait_until_ready(),
            csi_nodes,
            nodes
        );
        a.is_ok() && b.is_ok() && c.is_ok() && d && e
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

/// Runs every watch, feeding the caches and the queues, until one ends (they retry with backoff, so normally
/// never).
pub async fn watch_all(shared: Arc<Shared>) {
    let Some(writers) = shared.stores.writers.lock().unwrap_or_else(|p| p.into_inner()).take() else {
        tracing::error!("the watches were already started");
        return;
    };
    let client = shared.client.clone();

    let claims = {
        let shared = shared.clone();
        watch(Api::<PersistentVolumeClaim>::all(client.clone()), writers.claims, move |event| match event {
            Event::Apply(claim) | Event::InitApply(claim) => {
                if claim_concerns_us(claim)
                    && shared.claim_changed(claim)
                    && let Some(key) = claim_key(claim)
                {
                    shared.claims.add(key);
                }
                if let Some(source) = clone_source_key(&shared, claim) {
                    shared.claims.add(source);
                }
            }
            Event::Delete(claim) => {
                if let Some(uid) = claim.metadata.uid.as_deref() {
                    shared.forget_pin(uid);
                    shared.own_writes().forget(uid);
                    shared.forget_ownership(uid);
                }
                if let Some(source) = clone_source_key(&shared, claim) {
                    shared.claims.add(source);
                }
            }
            Event::Init | Event::InitDone => {}
        })
    };
    let volumes = {
        let shared = shared.clone();
        watch(Api::<PersistentVolume>::all(client.clone()), writers.volumes, move |event| match event {
            Event::Apply(volume) | Event::InitApply(volume) => {
                if let Some(name) = volume.metadata.name.clone() {
                    shared.volumes.add(name);
                }
                // A claim waiting for its PV to drop the provisioning finalizer.
                if let Some(key) = bound_claim_key(volume) {
                    shared.claims.add(key);
                }
            }
            Event::Delete(_) | Event::Init | Event::InitDone => {}
        })
    };
    let classes = {
        let shared = shared.clone();
        watch(Api::<StorageClass>::all(client.clone()), writers.classes, move |event| {
            if matches!(event, Event::Apply(_) | Event::Delete(_)) {
                shared.capacity_keys_may_have_changed();
            }
            if let Event::Apply(class) = event {
                // A class that appears or changes may unblock its claims.
                let name = class.metadata.name.clone().unwrap_or_default();
                for claim in shared.stores.claims.state() {
                    let pending = claim.spec.as_ref().and_then(|s| s.volume_name.as_deref()).is_none_or(str::is_empty);
                    if pending
                        && claim_class_name(&claim) == name
                        && claim_concerns_us(&claim)
                        && let Some(key) = claim_key(&claim)
                    {
                        shared.claims.add(key);
                    }
                }
            }
        })
    };
    let csi_nodes = async {
        if let Some(writer) = writers.csi_nodes {
            watch(Api::<CSINode>::all(client.clone()), writer, |event| {
                if matches!(event, Event::Apply(_) | Event::Delete(_)) {
                    shared.capacity_keys_may_have_changed();
                }
            })
            .await;
        } else {
            std::future::pending::<()>().await;
        }
    };
    let nodes = async {
        if let Some(writer) = writers.nodes {
            watch(Api::<Node>::all(client.clone()), writer, |event| {
                if matches!(event, Event::Apply(_) | Event::Delete(_)) {
                    shared.capacity_keys_may_have_changed();
                }
            })
            .await;
        } else {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        _ = claims => {}
        _ = volumes => {}
        _ = classes => {}
        _ = csi_nodes => {}
        _ = nodes => {}
    }
}

fn bound_claim_key(volume: &PersistentVolume) -> Option<ClaimKey> {
    let reference = volume.spec.as_ref()?.claim_ref.as_ref()?;
    Some(ClaimKey {
        uid: reference.uid.clone()?,
        namespace: reference.namespace.clone()?,
        name: reference.name.clone()?,
    })
}

/// One reflector: a watch with kube-runtime's default backoff, applied to the cache, each event passed to
/// `on_event` after the cache has it.
async fn watch<K>(api: Api<K>, writer: Writer<K>, mut on_event: impl FnMut(&Event<K>))
where
    K: kube::Resource<DynamicType = ()> + Clone + Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
{
    let kind = K::kind(&()).into_owned();
    let stream = reflector::reflector(writer, watcher::watcher(api, watcher::Config::default()).default_backoff());
    futures::pin_mut!(stream);
    while let Some(event) = stream.next().await {
        match event {
            Ok(event) => on_event(&event),
            Err(err) => tracing::warn!(kind = %kind, error = %err, "watch failed, retrying"),
        }
    }
}
