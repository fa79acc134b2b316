//! One watch cache per kind for a whole process, however many controllers read it.
//!
//! Each sidecar used to fill caches of its own; in one process running several sidecars (`csi-sidecars`) that would
//! hold every claim and volume once per sidecar. A [`CacheProvider`] hands the same cache to everyone who asks for a
//! kind, and runs one reflector for it. Each controller still sees the changes as if the watch were its own, as
//! client-go's shared informers give them to each handler:
//!
//! - a controller that starts before the first list is complete gets that list as it arrives;
//! - a controller that starts later (another sidecar's Lease won later) is first handed the whole cache as a list
//!   (`Applied { listed: true }` for each object, then `Listed`), then the live changes;
//! - a controller that stops (shutdown, or before it leads) no longer gets changes, and the reflector stops once no
//!   controller listens, to start again from the same cache if one comes back.
//!
//! The single-sidecar binaries use the same provider with one consumer per kind, so there is one code path.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use futures::StreamExt;
use kube::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, InitialListStrategy};
use tokio::task::JoinHandle;

use super::cache::{Cache, Table};
use super::decode::Decoded;
use super::{Cached, Change};

type Handler<K> = Box<dyn FnMut(Change<'_, K>) + Send>;

/// Hands out one cache per kind. Cheap to clone: clones hand out the same caches.
#[derive(Clone, Default)]
pub struct CacheProvider {
    kinds: Arc<Mutex<HashMap<CacheKey, Arc<dyn Any + Send + Sync>>>>,
}

/// A kind, and the label and field selectors of its watch: a filtered watch is a cache of its own.
type CacheKey = (TypeId, Option<String>, Option<String>);

impl CacheProvider {
    /// The cache of `K`: its read view and the feed a controller subscribes through ([`super::Watches::watch`]).
    pub fn cache<K: Cached>(&self) -> (Cache<K>, CacheFeed<K>) {
        self.selected_cache(watcher::Config::default())
    }

    /// The cache of the objects of `K` that `config`'s label and field selectors select.
    pub fn selected_cache<K: Cached>(&self, config: watcher::Config) -> (Cache<K>, CacheFeed<K>) {
        let key = (TypeId::of::<K>(), config.label_selector.clone(), config.field_selector.clone());
        let mut kinds = self.kinds.lock().unwrap_or_else(|p| p.into_inner());
        let entry = kinds.entry(key).or_insert_with(|| Arc::new(SharedCache::<K>::new(config)));
        let cache = entry.clone().downcast::<SharedCache<K>>().expect("one cache type per TypeId");
        (cache.cache.clone(), CacheFeed { cache })
    }

    /// [`CacheProvider::cache`] when `wanted`, else neither half.
    pub fn optional_cache<K: Cached>(&self, wanted: bool) -> (Option<Cache<K>>, Option<CacheFeed<K>>) {
        if !wanted {
            return (None, None);
        }
        let (store, feed) = self.cache();
        (Some(store), Some(feed))
    }

    /// How many caches (kinds, and filtered watches of a kind) there are.
    pub fn kinds(&self) -> usize {
        self.kinds.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

/// A controller's access to a cache, until it is given to [`super::Watches::watch`].
pub struct CacheFeed<K: Cached> {
    pub(super) cache: Arc<SharedCache<K>>,
}

impl<K: Cached> CacheFeed<K> {
    /// Applies one watch event to the cache as its reflector does, handing it to the subscribers: for filling a
    /// cache without a cluster (tests, and the footprint measurement `examples/cache_footprint.rs`).
    pub fn apply(&self, event: &Event<K>) {
        self.cache.apply(event);
    }
}

/// One kind's cache, its reflector and the controllers listening to it.
pub(super) struct SharedCache<K: Cached> {
    cache: Cache<K>,
    config: watcher::Config,
    state: Mutex<State<K>>,
}

struct State<K: Cached> {
    /// The objects of a list that is arriving; they replace the cache's once it is complete.
    relisted: Option<Table<K>>,
    /// Set by the first subscriber; later ones watch the same (every cache watches its kind cluster-wide).
    api: Option<Api<K>>,
    reflector: Option<JoinHandle<()>>,
    /// Between a watch's `Init` and its `InitDone`: a list is arriving.
    listing: bool,
    /// At least one list is complete: the store holds the cluster's state.
    listed_once: bool,
    next_id: u64,
    /// Subscribers that get every change as it comes.
    active: Vec<(u64, Handler<K>)>,
    /// Subscribers that joined while a list was arriving: they get the whole list when it is complete.
    pending: Vec<(u64, Handler<K>)>,
}

impl<K: Cached> SharedCache<K> {
    fn new(config: watcher::Config) -> SharedCache<K> {
        let state = State {
            relisted: None,
            api: None,
            reflector: None,
            listing: false,
            listed_once: false,
            next_id: 0,
            active: Vec::new(),
            pending: Vec::new(),
        };
        SharedCache { cache: Cache::default(), config, state: Mutex::new(state) }
    }

    fn state(&self) -> MutexGuard<'_, State<K>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts handing changes to `handler`, starting the reflector if nobody listened yet. Returns the id
    /// [`SharedCache::unsubscribe`] takes.
    pub(super) fn subscribe(self: &Arc<Self>, api: Api<K>, handler: Handler<K>) -> u64 {
        let mut state = self.state();
        match &state.api {
            None => state.api = Some(api),
            Some(first) if first.resource_url() != api.resource_url() => tracing::error!(
                kind = %K::kind(&()), first = first.resource_url(), other = api.resource_url(),
                "two controllers watch one kind at different URLs; both get the first"
            ),
            Some(_) => {}
        }
        let starts_reflector = state.reflector.is_none();
        let id = self.join(&mut state, handler, starts_reflector);
        if starts_reflector {
            let api = state.api.clone().expect("set above");
            let kind = K::kind(&()).into_owned();
            let watch = reflect(self.clone(), api, self.config.clone());
            state.reflector = Some(tokio::spawn(super::dead::guard(kind, watch)));
        }
        id
    }

    /// Adds a subscriber. When `list_follows` (a reflector is about to start, and will list everything first), it
    /// gets that list as it arrives; when a list is arriving already, it gets the whole list at its end; otherwise
    /// it is handed the cache as a list at once.
    fn join(&self, state: &mut State<K>, mut handler: Handler<K>, list_follows: bool) -> u64 {
        let id = state.next_id;
        state.next_id += 1;
        if list_follows {
            state.active.push((id, handler));
        } else if state.listing || !state.listed_once {
            state.pending.push((id, handler));
        } else {
            replay(&self.cache, &mut handler);
            state.active.push((id, handler));
        }
        id
    }

    /// Stops handing changes to subscriber `id`; the reflector stops when it was the last.
    pub(super) fn unsubscribe(&self, id: u64) {
        let mut state = self.state();
        state.active.retain(|(other, _)| *other != id);
        state.pending.retain(|(other, _)| *other != id);
        if state.active.is_empty()
            && state.pending.is_empty()
            && let Some(reflector) = state.reflector.take()
        {
            reflector.abort();
            state.listing = false;
            state.relisted = None;
        }
    }

    /// Applies one watch event to the cache and hands it to every subscriber, under one lock so that a subscriber
    /// joining meanwhile sees each change exactly once. A list's objects replace the cache's once it is complete,
    /// as kube-runtime's reflector store does; meanwhile readers see the cache as it was.
    ///
    /// A relist (after a 410 Gone, or a restarted watch) also reports what changed while no watch was open, as
    /// client-go's `DeltaFIFO.Replace` does with `DeletedFinalStateUnknown`: an object the cache held that the new
    /// list lacks is handed over as deleted, in its last known state, before `Listed`; an object listed under a
    /// name the cache held for another uid (deleted and created again meanwhile) is handed over as the old one
    /// deleted, then the new one applied.
    pub(super) fn apply(&self, event: &Event<K>) {
        let mut state = self.state();
        let state = &mut *state;
        let listening = !state.active.is_empty();
        let mut gone = Vec::new();
        let old = match event {
            Event::Apply(object) => self.cache.write().insert(Arc::new(object.slim())),
            Event::InitApply(object) => {
                let relisted = state.relisted.get_or_insert_with(Table::default);
                relisted.insert(Arc::new(object.slim()));
                let meta = object.meta();
                self.cache.write().get(meta.namespace.as_deref(), meta.name.as_deref().unwrap_or_default()).cloned()
            }
            Event::Delete(object) => {
                let meta = object.meta();
                self.cache.write().remove(meta.namespace.as_deref(), meta.name.as_deref().unwrap_or_default());
                None
            }
            Event::Init => {
                state.relisted = Some(Table::default());
                None
            }
            Event::InitDone => {
                let relisted = state.relisted.take().unwrap_or_default();
                let mut table = self.cache.write();
                if listening {
                    gone = vanished(&table, &relisted);
                }
                *table = relisted;
                None
            }
        };
        if !gone.is_empty() {
            tracing::info!(kind = %K::kind(&()), gone = gone.len(), "relisted: objects deleted while not watched");
        }
        if listening {
            let old = old.map(|held| K::read(&held));
            // Listed under a name the cache held for another object: that one is gone.
            let replaced = match (event, old.as_deref()) {
                (Event::InitApply(object), Some(held)) if held.meta().uid != object.meta().uid => Some(held),
                _ => None,
            };
            // Rebuilt one at a time, as a scan does: a relist may find many gone.
            for held in &gone {
                let object = K::read(held);
                for (_, handler) in &mut state.active {
                    handler(Change::Deleted(&object));
                }
            }
            for (_, handler) in &mut state.active {
                match event {
                    Event::Apply(object) => handler(Change::Applied { old: old.clone(), object, listed: false }),
                    Event::InitApply(object) => match replaced {
                        Some(held) => {
                            handler(Change::Deleted(held));
                            handler(Change::Applied { old: None, object, listed: true });
                        }
                        None => handler(Change::Applied { old: old.clone(), object, listed: true }),
                    },
                    Event::Delete(object) => handler(Change::Deleted(object)),
                    Event::InitDone => handler(Change::Listed),
                    Event::Init => {}
                }
            }
        }
        match event {
            Event::Init => state.listing = true,
            Event::InitDone => {
                state.listing = false;
                state.listed_once = true;
                for (id, mut handler) in std::mem::take(&mut state.pending) {
                    replay(&self.cache, &mut handler);
                    state.active.push((id, handler));
                }
            }
            _ => {}
        }
    }
}

/// What `held` holds that `relisted` has no object of the same namespace and name for.
fn vanished<K: Cached>(held: &Table<K>, relisted: &Table<K>) -> Vec<Arc<K::Slim>> {
    held.iter()
        .filter(|object| {
            let key = K::key(object);
            relisted.get(key.namespace, key.name).is_none()
        })
        .cloned()
        .collect()
}

/// Hands the whole cache to a subscriber as a complete list, one object rebuilt at a time.
fn replay<K: Cached>(cache: &Cache<K>, handler: &mut Handler<K>) {
    for held in cache.held_all() {
        handler(Change::Applied { old: None, object: &K::read(&held), listed: true });
    }
    handler(Change::Listed);
}

/// The reflector of one kind: runs until the last subscriber leaves (it is aborted then).
///
/// The first list is a streaming watch-list (`sendInitialEvents`, KEP-3157), as client-go's reflector makes where
/// the server allows it: one request, however many objects, where a paged list is one rate-limited request per 500
/// (10,000 claims took 7.5 s to list at 5 requests/s). The objects also arrive one at a time, each decoded without
/// its managedFields ([`Decoded`]: no sidecar reads them, client-go's `TransformStripManagedFields` drops them too,
/// and an update without them keeps the server's) and held slim before the next is read, so the list never holds
/// the whole kind twice. A server with the WatchList feature off (on by default from Kubernetes 1.34, off in 1.33)
/// refuses it; the reflector then lists in pages.
async fn reflect<K: Cached>(cache: Arc<SharedCache<K>>, api: Api<K>, config: watcher::Config) {
    let kind = K::kind(&()).into_owned();
    let namespace = api.namespace().map(str::to_string);
    let api: Api<Decoded<K>> = match namespace {
        Some(namespace) => Api::namespaced_with(api.into_client(), &namespace, &()),
        None => Api::all(api.into_client()),
    };
    let mut config = config.streaming_lists();
    loop {
        let stream = watcher::watcher(api.clone(), config.clone()).default_backoff();
        futures::pin_mut!(stream);
        let mut restart = false;
        while let Some(event) = stream.next().await {
            match event {
                Ok(event) => cache.apply(&decoded(event)),
                Err(err)
                    if config.initial_list_strategy == InitialListStrategy::StreamingList
                        && refuses_streaming_lists(&err) =>
                {
                    tracing::info!(kind = %kind, error = %err, "the server does not stream lists, listing in pages");
                    config.initial_list_strategy = InitialListStrategy::ListWatch;
                    restart = true;
                    break;
                }
                Err(err) => tracing::warn!(kind = %kind, error = %err, "watch failed, retrying"),
            }
        }
        if !restart {
            break;
        }
    }
    tracing::error!(kind = %kind, "watch ended");
}

fn decoded<K>(event: Event<Decoded<K>>) -> Event<K> {
    match event {
        Event::Apply(Decoded(object)) => Event::Apply(object),
        Event::Delete(Decoded(object)) => Event::Delete(object),
        Event::Init => Event::Init,
        Event::InitApply(Decoded(object)) => Event::InitApply(object),
        Event::InitDone => Event::InitDone,
    }
}

/// Whether a watch error is a server refusing `sendInitialEvents` (WatchList feature off: 422 Invalid, or 400 from
/// servers that do not know the parameter's rules), rather than a failure worth retrying the same way.
fn refuses_streaming_lists(err: &watcher::Error) -> bool {
    let code = match err {
        watcher::Error::WatchStartFailed(kube::Error::Api(status)) => status.code,
        watcher::Error::WatchError(status) => status.code,
        _ => return false,
    };
    matches!(code, 400 | 422)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    use kube::api::ObjectMeta;

    use super::*;

    fn config_map(name: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta { name: Some(name.into()), namespace: Some("ns".into()), ..Default::default() },
            ..Default::default()
        }
    }

    #[test]
    fn only_a_refused_send_initial_events_falls_back_to_paged_lists() {
        use kube::core::Status;
        let status = |code: u16| Status::failure("sendInitialEvents is forbidden", "Invalid").with_code(code).boxed();
        let cases = [
            (watcher::Error::WatchStartFailed(kube::Error::Api(status(422))), true),
            (watcher::Error::WatchStartFailed(kube::Error::Api(status(400))), true),
            (watcher::Error::WatchError(status(422)), true),
            (watcher::Error::WatchStartFailed(kube::Error::Api(status(403))), false),
            (watcher::Error::WatchStartFailed(kube::Error::Api(status(500))), false),
            (watcher::Error::WatchError(status(410)), false),
            (watcher::Error::WatchFailed(kube::Error::Api(status(422))), false),
            (watcher::Error::NoResourceVersion, false),
        ];
        for (err, falls_back) in cases {
            assert_eq!(refuses_streaming_lists(&err), falls_back, "{err}");
        }
    }

    /// What a subscriber saw, in order: `+name` listed, `~name` live, `-name` deleted, `listed`.
    fn recorder() -> (Arc<Mutex<Vec<String>>>, Handler<ConfigMap>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        let handler: Handler<ConfigMap> = Box::new(move |change| {
            let entry = match change {
                Change::Applied { object, listed: true, .. } => format!("+{}", object.metadata.name.clone().unwrap()),
                Change::Applied { object, listed: false, .. } => format!("~{}", object.metadata.name.clone().unwrap()),
                Change::Deleted(object) => format!("-{}", object.metadata.name.clone().unwrap()),
                Change::Listed => "listed".to_string(),
            };
            record.lock().unwrap().push(entry);
        });
        (seen, handler)
    }

    fn seen(log: &Arc<Mutex<Vec<String>>>) -> Vec<String> {
        log.lock().unwrap().clone()
    }

    /// A subscriber joining while the reflector runs (the tests drive `apply` themselves).
    fn join(cache: &Arc<SharedCache<ConfigMap>>, handler: Handler<ConfigMap>, list_follows: bool) -> u64 {
        let mut state = cache.state();
        cache.join(&mut state, handler, list_follows)
    }

    #[test]
    fn one_cache_per_kind() {
        let provider = CacheProvider::default();
        let (a, _) = provider.cache::<ConfigMap>();
        let (b, feed) = provider.cache::<ConfigMap>();
        let (_, _) = provider.cache::<Secret>();
        let (_, _) = provider.selected_cache::<ConfigMap>(watcher::Config::default().labels("node=a"));
        assert_eq!(provider.kinds(), 3, "a filtered watch is a cache of its own");
        assert!(Arc::ptr_eq(&feed.cache, &provider.cache::<ConfigMap>().1.cache));
        feed.cache.apply(&Event::Init);
        feed.cache.apply(&Event::InitApply(config_map("a")));
        feed.cache.apply(&Event::InitDone);
        assert_eq!(a.state().len(), 1, "both views read the one cache");
        assert_eq!(b.state().len(), 1);
        let other = CacheProvider::default();
        assert_eq!(other.cache::<ConfigMap>().0.state().len(), 0, "another provider has caches of its own");
    }

    #[test]
    fn every_subscriber_sees_one_complete_list_then_live_changes() {
        let cache = Arc::new(SharedCache::<ConfigMap>::new(watcher::Config::default()));
        let (first, handler) = recorder();
        join(&cache, handler, true);
        cache.apply(&Event::Init);
        cache.apply(&Event::InitApply(config_map("a")));
        // Joins in the middle of the list: gets all of it at its end, not half.
        let (during, handler) = recorder();
        join(&cache, handler, false);
        cache.apply(&Event::InitApply(config_map("b")));
        cache.apply(&Event::InitDone);
        cache.apply(&Event::Apply(config_map("c")));
        cache.apply(&Event::Delete(config_map("a")));

        assert_eq!(seen(&first), ["+a", "+b", "listed", "~c", "-a"]);
        let mut got = seen(&during);
        got[..2].sort();
        assert_eq!(got, ["+a", "+b", "listed", "~c", "-a"]);
    }

    #[test]
    fn a_late_subscriber_is_handed_the_cache_as_a_list() {
        let cache = Arc::new(SharedCache::<ConfigMap>::new(watcher::Config::default()));
        cache.apply(&Event::Init);
        cache.apply(&Event::InitApply(config_map("a")));
        cache.apply(&Event::InitDone);
        let (late, handler) = recorder();
        join(&cache, handler, false);
        assert_eq!(seen(&late), ["+a", "listed"]);
    }

    #[test]
    fn a_subscriber_that_left_sees_nothing_more() {
        let cache = Arc::new(SharedCache::<ConfigMap>::new(watcher::Config::default()));
        let (left, handler) = recorder();
        let id = join(&cache, handler, true);
        cache.apply(&Event::Apply(config_map("a")));
        cache.unsubscribe(id);
        cache.apply(&Event::Apply(config_map("b")));
        assert_eq!(seen(&left), ["~a"]);
    }

    /// A complete list of `objects`, as a watch (re)starting delivers it.
    fn list(cache: &SharedCache<ConfigMap>, objects: impl IntoIterator<Item = ConfigMap>) {
        cache.apply(&Event::Init);
        for object in objects {
            cache.apply(&Event::InitApply(object));
        }
        cache.apply(&Event::InitDone);
    }

    /// A config map `name` of uid `uid` whose data `v` is `v`.
    fn versioned(name: &str, uid: &str, v: &str) -> ConfigMap {
        let mut map = config_map(name);
        map.metadata.uid = Some(uid.into());
        map.data = Some([("v".to_string(), v.to_string())].into());
        map
    }

    /// What a subscriber saw, in order: `+name/uid=v` listed (`old` then `<uid=v`), `~name/uid=v` live,
    /// `-name/uid=v` deleted, `listed`.
    fn detailed_recorder() -> (Arc<Mutex<Vec<String>>>, Handler<ConfigMap>) {
        fn show(map: &ConfigMap) -> String {
            let v = map.data.as_ref().and_then(|d| d.get("v")).cloned().unwrap_or_default();
            format!("{}/{}={v}", map.metadata.name.as_deref().unwrap(), map.metadata.uid.as_deref().unwrap_or("-"))
        }
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        let handler: Handler<ConfigMap> = Box::new(move |change| {
            let entry = match change {
                Change::Applied { old, object, listed } => {
                    let old = old.map(|o| format!("<{}", show(&o))).unwrap_or_default();
                    format!("{}{}{old}", if listed { "+" } else { "~" }, show(object))
                }
                Change::Deleted(object) => format!("-{}", show(object)),
                Change::Listed => "listed".to_string(),
            };
            record.lock().unwrap().push(entry);
        });
        (seen, handler)
    }

    #[test]
    fn a_relist_hands_over_as_deleted_what_went_while_nothing_was_watched() {
        // (case, the cache before, the relist, what a subscriber sees of the relist, the cache after)
        type Row = (&'static str, Vec<ConfigMap>, Vec<ConfigMap>, Vec<&'static str>, Vec<&'static str>);
        let table: Vec<Row> = vec![
            (
                "one gone, one changed, one kept: the gone one in its last known state, before `listed`",
                vec![versioned("a", "1", "2"), versioned("b", "2", "1"), versioned("c", "3", "1")],
                vec![versioned("b", "2", "2"), versioned("c", "3", "1")],
                vec!["+b/2=2<b/2=1", "+c/3=1<c/3=1", "-a/1=2", "listed"],
                vec!["b/2=2", "c/3=1"],
            ),
            (
                "deleted and created again under its name: the old one deleted, then the new one as new",
                vec![versioned("a", "1", "1")],
                vec![versioned("a", "9", "1")],
                vec!["-a/1=1", "+a/9=1", "listed"],
                vec!["a/9=1"],
            ),
            (
                "everything gone",
                vec![versioned("a", "1", "1"), versioned("b", "2", "1")],
                vec![],
                vec!["-a/1=1", "-b/2=1", "listed"],
                vec![],
            ),
            (
                "nothing gone",
                vec![versioned("a", "1", "1")],
                vec![versioned("a", "1", "1")],
                vec!["+a/1=1<a/1=1", "listed"],
                vec!["a/1=1"],
            ),
        ];
        for (case, before, relist, want, after) in table {
            let cache = Arc::new(SharedCache::<ConfigMap>::new(watcher::Config::default()));
            let (log, handler) = detailed_recorder();
            join(&cache, handler, true);
            list(&cache, before);
            let first_list = seen(&log).len();
            // A 410 Gone: kube-runtime's watcher lists again.
            list(&cache, relist);
            let mut got = seen(&log)[first_list..].to_vec();
            // The deletes of vanished objects (the run just before `listed`) come in the table's order.
            let listed = got.len() - 1;
            let gone = got[..listed].iter().rev().take_while(|entry| entry.starts_with('-')).count();
            got[listed - gone..listed].sort();
            assert_eq!(got, want, "{case}");
            let mut held: Vec<String> = cache
                .cache
                .held_all()
                .iter()
                .map(|held| {
                    let map = ConfigMap::read(held);
                    let v = map.data.as_ref().and_then(|d| d.get("v")).cloned().unwrap_or_default();
                    format!("{}/{}={v}", map.metadata.name.as_deref().unwrap(), map.metadata.uid.as_deref().unwrap())
                })
                .collect();
            held.sort();
            assert_eq!(held, after, "{case}: the cache holds the relist alone");
        }
    }

    #[test]
    fn only_subscribers_that_had_the_cache_get_the_deletes_of_a_relist() {
        let cache = Arc::new(SharedCache::<ConfigMap>::new(watcher::Config::default()));
        let (first, handler) = recorder();
        join(&cache, handler, true);
        list(&cache, [config_map("a")]);
        cache.apply(&Event::Init);
        // Joins during the relist: it never had `a`, and gets the new list whole at its end.
        let (during, handler) = recorder();
        join(&cache, handler, false);
        cache.apply(&Event::InitApply(config_map("b")));
        cache.apply(&Event::InitDone);
        assert_eq!(seen(&first), ["+a", "listed", "+b", "-a", "listed"]);
        assert_eq!(seen(&during), ["+b", "listed"]);
    }

    #[test]
    fn a_change_carries_what_the_cache_held_before_and_a_relist_replaces_the_cache_at_its_end() {
        let cache = Arc::new(SharedCache::<ConfigMap>::new(watcher::Config::default()));
        let olds = Arc::new(Mutex::new(Vec::new()));
        let record = olds.clone();
        join(
            &cache,
            Box::new(move |change| {
                if let Change::Applied { old, object, .. } = change {
                    let old = old.and_then(|o| o.data.clone()).map(|d| d["v"].clone());
                    record.lock().unwrap().push((object.metadata.name.clone().unwrap(), old));
                }
            }),
            true,
        );
        let version = |name: &str, v: &str| {
            let mut map = config_map(name);
            map.data = Some([("v".to_string(), v.to_string())].into());
            map
        };
        cache.apply(&Event::Apply(version("a", "1")));
        cache.apply(&Event::Apply(version("a", "2")));
        cache.apply(&Event::Init);
        cache.apply(&Event::InitApply(version("b", "1")));
        assert!(cache.cache.get_in("ns", "a").is_some(), "readers see the cache as it was until the list is complete");
        assert!(cache.cache.get_in("ns", "b").is_none());
        cache.apply(&Event::InitDone);
        assert!(cache.cache.get_in("ns", "a").is_none(), "what the new list lacks is gone");
        assert_eq!(cache.cache.get_in("ns", "b").and_then(|m| m.data.clone()).unwrap()["v"], "1");
        let seen = olds.lock().unwrap().clone();
        let want = [("a", None), ("a", Some("1")), ("b", None)];
        assert_eq!(seen, want.map(|(n, o)| (n.to_string(), o.map(str::to_string))));
    }
}
