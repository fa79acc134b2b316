//! Watch caches for controllers: one reflector per kind, each change handed to the controller after the cache has
//! it, and one loop that waits for every cache before any worker starts.
//!
//! A controller declares its caches first and its handlers later, because the handlers need the controller's shared
//! state and that state holds the caches:
//!
//! ```ignore
//! let (claims, claims_feed) = watch::cache::<PersistentVolumeClaim>();
//! let shared = Arc::new(Shared { claims, /* … */ });
//! let mut watches = Watches::default();
//! let s = shared.clone();
//! watches.watch(claims_feed, Api::all(client), move |change| s.claim_changed(change));
//! watches.serve(stop, || async { shared.queue_everything(); shared.run_workers(stop).await }).await;
//! ```
//!
//! Why not kube-runtime's `Controller`: it has no per-object retry backoff (kube-rs #1916), and the upstream sidecars
//! retry each object from `--retry-interval-start` to `--retry-interval-max`; [`crate::WorkQueue`] does that.

use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use futures::StreamExt;
use futures::future::{join_all, select_all};
use kube::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use tokio_util::sync::CancellationToken;

/// What a cached kind needs.
pub trait Watched:
    kube::Resource<DynamicType = ()> + Clone + Debug + serde::de::DeserializeOwned + Send + Sync + 'static
{
}
impl<K> Watched for K where
    K: kube::Resource<DynamicType = ()> + Clone + Debug + serde::de::DeserializeOwned + Send + Sync + 'static
{
}

/// One change a watch reports, after the cache has applied it.
#[derive(Debug)]
pub enum Change<'a, K> {
    /// Created or updated, or listed when the watch (re)starts (`listed`). `old` is what the cache held before
    /// (`None` when the object is new to the cache).
    Applied {
        old: Option<Arc<K>>,
        object: &'a K,
        listed: bool,
    },
    Deleted(&'a K),
    /// A (re)list is complete: every `Applied { listed: true }` of it has been handed over.
    Listed,
}

impl<K> Change<'_, K> {
    /// The object an `Applied` or `Deleted` change is about.
    pub fn object(&self) -> Option<&K> {
        match self {
            Change::Applied { object, .. } => Some(object),
            Change::Deleted(object) => Some(object),
            Change::Listed => None,
        }
    }
}

/// The writing half of a cache, until it is given to [`Watches::watch`].
pub struct CacheFeed<K: Watched> {
    writer: Writer<K>,
}

/// A new cache: its read view (cheap to clone) and the feed its watch writes through.
pub fn cache<K: Watched>() -> (Store<K>, CacheFeed<K>) {
    let (store, writer) = reflector::store();
    (store, CacheFeed { writer })
}

/// [`cache`] when `wanted`, else neither half.
pub fn optional_cache<K: Watched>(wanted: bool) -> (Option<Store<K>>, Option<CacheFeed<K>>) {
    if !wanted {
        return (None, None);
    }
    let (store, feed) = cache();
    (Some(store), Some(feed))
}

type Task = Pin<Box<dyn Future<Output = ()> + Send>>;
type Ready = Pin<Box<dyn Future<Output = bool> + Send>>;

/// The watches of one controller.
#[derive(Default)]
pub struct Watches {
    watches: Vec<Task>,
    ready: Vec<Ready>,
}

impl Watches {
    /// Watches `api` into `feed`'s cache with kube-runtime's default backoff; `on_change` sees every change after
    /// the cache has it.
    pub fn watch<K: Watched>(
        &mut self,
        feed: CacheFeed<K>,
        api: Api<K>,
        on_change: impl FnMut(Change<'_, K>) + Send + 'static,
    ) {
        self.watch_with(feed, api, watcher::Config::default(), on_change);
    }

    /// [`Watches::watch`] with a watcher configuration (label or field selectors).
    pub fn watch_with<K: Watched>(
        &mut self,
        feed: CacheFeed<K>,
        api: Api<K>,
        config: watcher::Config,
        on_change: impl FnMut(Change<'_, K>) + Send + 'static,
    ) {
        let store = feed.writer.as_reader();
        self.ready.push(Box::pin(async move { store.wait_until_ready().await.is_ok() }));
        self.watches.push(Box::pin(reflect(feed.writer, api, config, on_change)));
    }

    /// Runs the watches; once every cache holds a complete list, runs `work` until it returns. Returns early, with
    /// an error logged, if a watch ends (they retry with backoff, so normally never). The watches stop when this
    /// returns. If `stop` fires before the caches are filled, returns at once.
    pub async fn serve<W, F>(self, stop: &CancellationToken, work: W)
    where
        W: FnOnce() -> F,
        F: Future<Output = ()>,
    {
        let mut watching = if self.watches.is_empty() {
            tokio::spawn(std::future::pending())
        } else {
            tokio::spawn(async move {
                select_all(self.watches).await;
            })
        };
        let filled = join_all(self.ready);
        tokio::select! {
            _ = stop.cancelled() => { watching.abort(); return; }
            ready = filled => if !ready.iter().all(|r| *r) {
                tracing::error!("a watch ended before its cache was filled");
                watching.abort();
                return;
            },
            _ = &mut watching => {
                tracing::error!("a watch ended before its cache was filled");
                return;
            }
        }
        tracing::info!("caches filled, starting workers");
        tokio::select! {
            _ = work() => {}
            _ = &mut watching => tracing::error!("watches ended unexpectedly"),
        }
        watching.abort();
    }
}

/// One reflector, applied to the cache, each change passed on after the cache has it.
async fn reflect<K: Watched>(
    mut writer: Writer<K>,
    api: Api<K>,
    config: watcher::Config,
    mut on_change: impl FnMut(Change<'_, K>),
) {
    let kind = K::kind(&()).into_owned();
    let store = writer.as_reader();
    let stream = watcher::watcher(api, config).default_backoff();
    futures::pin_mut!(stream);
    while let Some(event) = stream.next().await {
        let event = match event {
            Ok(event) => event,
            Err(err) => {
                tracing::warn!(kind = %kind, error = %err, "watch failed, retrying");
                continue;
            }
        };
        let old = match &event {
            Event::Apply(object) | Event::InitApply(object) => store.get(&ObjectRef::from_obj(object)),
            _ => None,
        };
        writer.apply_watcher_event(&event);
        match &event {
            Event::Apply(object) => on_change(Change::Applied { old, object, listed: false }),
            Event::InitApply(object) => on_change(Change::Applied { old, object, listed: true }),
            Event::Delete(object) => on_change(Change::Deleted(object)),
            Event::InitDone => on_change(Change::Listed),
            Event::Init => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    use super::*;

    fn config_map(name: &str, version: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                resource_version: Some(version.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn a_change_names_its_object() {
        let map = config_map("a", "1");
        let applied = Change::Applied { old: None, object: &map, listed: false };
        assert_eq!(applied.object().and_then(|m| m.metadata.name.as_deref()), Some("a"));
        assert_eq!(Change::Deleted(&map).object().map(|m| m.metadata.resource_version.as_deref()), Some(Some("1")));
        assert!(Change::<ConfigMap>::Listed.object().is_none());
    }

    #[tokio::test]
    async fn serve_without_watches_runs_the_work_at_once() {
        let stop = CancellationToken::new();
        let mut ran = false;
        Watches::default().serve(&stop, || async { ran = true }).await;
        assert!(ran);
    }

    #[tokio::test]
    async fn serve_returns_without_work_when_stopped_before_the_caches_fill() {
        let (_store, feed) = cache::<ConfigMap>();
        // A client whose every request fails: the cache never fills.
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        let mut watches = Watches::default();
        watches.watch(feed, Api::namespaced(client, "ns"), |_| {});
        let stop = CancellationToken::new();
        stop.cancel();
        let mut ran = false;
        watches.serve(&stop, || async { ran = true }).await;
        assert!(!ran);
    }
}
