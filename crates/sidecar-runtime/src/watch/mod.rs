//! Watch caches for controllers: one reflector per kind and process ([`CacheProvider`]), each change handed to every
//! controller that subscribed after the cache has it, and one loop that waits for every cache before any worker
//! starts.
//!
//! A controller declares its caches first and its handlers later, because the handlers need the controller's shared
//! state and that state holds the caches:
//!
//! ```ignore
//! let (claims, claims_feed) = caches.cache::<PersistentVolumeClaim>(); // caches: the process's CacheProvider
//! let shared = Arc::new(Shared { claims, /* … */ });
//! let mut watches = Watches::default();
//! let s = shared.clone();
//! watches.watch(claims_feed, Api::all(client), move |change| s.claim_changed(change));
//! watches.serve(stop, || async { shared.queue_everything(); shared.run_workers(stop).await }).await;
//! ```
//!
//! Why not kube-runtime's `Controller`: it has no per-object retry backoff (kube-rs #1916), and the upstream sidecars
//! retry each object from `--retry-interval-start` to `--retry-interval-max`; [`crate::WorkQueue`] does that.

mod cache;
mod dead;
mod decode;
pub mod kinds;
mod provider;
pub mod strings;
mod written;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use futures::future::join_all;
use kube::Api;
use tokio_util::sync::CancellationToken;

pub use cache::Cache;
pub use dead::dead_watch;
pub use kinds::{Cached, Key};
pub use provider::{CacheFeed, CacheProvider};
pub use written::Written;

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

/// A new cache of its own, not shared with anyone: a provider with one consumer.
pub fn cache<K: Cached>() -> (Cache<K>, CacheFeed<K>) {
    CacheProvider::default().cache()
}

type Ready = Pin<Box<dyn Future<Output = bool> + Send>>;

/// One controller's subscription to one cache, before it starts.
trait Subscription: Send {
    /// Starts receiving changes; returns when the cache is filled (false: it never will be) and how to stop.
    fn start(self: Box<Self>) -> (Ready, Box<dyn FnOnce() + Send>);
}

struct Subscribe<K: Cached, F> {
    feed: CacheFeed<K>,
    api: Api<K>,
    on_change: F,
}

impl<K: Cached, F: FnMut(Change<'_, K>) + Send + 'static> Subscription for Subscribe<K, F> {
    fn start(self: Box<Self>) -> (Ready, Box<dyn FnOnce() + Send>) {
        // Filled for this controller once it has been handed a complete list. (Not `Store::wait_until_ready`: its
        // oneshot wakes only the last of several waiters, and a shared cache has several.)
        let (filled, filled_rx) = tokio::sync::oneshot::channel();
        let mut filled = Some(filled);
        let mut on_change = self.on_change;
        let handler = move |change: Change<'_, K>| {
            let listed = matches!(change, Change::Listed);
            on_change(change);
            if listed && let Some(filled) = filled.take() {
                let _ = filled.send(());
            }
        };
        let cache = self.feed.cache;
        let id = cache.subscribe(self.api, Box::new(handler));
        let ready: Ready = Box::pin(async move { filled_rx.await.is_ok() });
        (ready, Box::new(move || cache.unsubscribe(id)))
    }
}

/// The watches of one controller.
#[derive(Default)]
pub struct Watches {
    subscriptions: Vec<Box<dyn Subscription>>,
}

impl Watches {
    /// Subscribes to `feed`'s cache, watching `api` (cluster-wide) if nobody watches its kind yet; `on_change`
    /// sees every change after the cache has it, from [`Watches::serve`] until it returns.
    pub fn watch<K: Cached>(
        &mut self,
        feed: CacheFeed<K>,
        api: Api<K>,
        on_change: impl FnMut(Change<'_, K>) + Send + 'static,
    ) {
        self.subscriptions.push(Box::new(Subscribe { feed, api, on_change }));
    }

    /// Starts the subscriptions; once every cache holds a complete list, runs `work` until it returns. The
    /// subscriptions end when this returns. If `stop` fires before the caches are filled, returns at once.
    pub async fn serve<W, F>(self, stop: &CancellationToken, work: W)
    where
        W: FnOnce() -> F,
        F: Future<Output = ()>,
    {
        let (ready, stops): (Vec<Ready>, Vec<_>) = self.subscriptions.into_iter().map(|s| s.start()).unzip();
        let _unsubscribe = Unsubscribe(stops);
        tokio::select! {
            _ = stop.cancelled() => return,
            ready = join_all(ready) => if !ready.iter().all(|r| *r) {
                tracing::error!("a watch ended before its cache was filled");
                return;
            },
        }
        release_free_memory();
        tracing::info!("caches filled, starting workers");
        work().await;
    }
}

/// Hands back to the system the memory the first lists left free: every object arrived decoded whole and is held
/// slim, so the allocator's arenas end the list with free space between the objects they keep, which glibc keeps
/// resident until it is trimmed.
fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free pages of the allocator's arenas to the kernel.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Ends a controller's subscriptions when its `serve` returns, or is dropped (a lost Lease, a stopped process).
struct Unsubscribe(Vec<Box<dyn FnOnce() + Send>>);

impl Drop for Unsubscribe {
    fn drop(&mut self) {
        for stop in self.0.drain(..) {
            stop();
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

    #[tokio::test]
    async fn two_controllers_of_one_cache_both_start_once_it_is_listed() {
        let provider = CacheProvider::default();
        // A client whose every request fails: only the events applied below reach the cache.
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        let stop = CancellationToken::new();
        let mut running = Vec::new();
        let (store, feed) = provider.cache::<ConfigMap>();
        let cache = feed.cache.clone();
        for feed in [feed, provider.cache::<ConfigMap>().1] {
            let mut watches = Watches::default();
            watches.watch(feed, Api::all(client.clone()), |_| {});
            let stop = stop.clone();
            running.push(tokio::spawn(async move {
                let mut worked = false;
                watches.serve(&stop, || async { worked = true }).await;
                worked
            }));
        }
        tokio::task::yield_now().await;
        cache.apply(&kube::runtime::watcher::Event::Init);
        cache.apply(&kube::runtime::watcher::Event::InitApply(config_map("a", "1")));
        cache.apply(&kube::runtime::watcher::Event::InitDone);
        for serving in running {
            let worked = tokio::time::timeout(std::time::Duration::from_secs(5), serving).await;
            assert!(matches!(worked, Ok(Ok(true))), "each controller's workers start");
        }
        assert_eq!(store.state().len(), 1);
    }
}
