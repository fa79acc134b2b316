//! A cache's objects, and the read view controllers get ([`Cache`]).
//!
//! The table holds each object once, in its held form ([`Cached::Slim`]), found by namespace and name without a key
//! of its own (the key is read from the held object).

use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use hashbrown::HashTable;

use super::kinds::{Cached, Key};

/// The objects of one cache.
pub(super) struct Table<K: Cached> {
    objects: HashTable<Arc<K::Slim>>,
    hasher: RandomState,
}

impl<K: Cached> Default for Table<K> {
    fn default() -> Self {
        Table { objects: HashTable::new(), hasher: RandomState::new() }
    }
}

fn same_key<K: Cached>(namespace: Option<&str>, name: &str) -> impl Fn(&Arc<K::Slim>) -> bool {
    move |held| {
        let key = K::key(held);
        key.name == name && key.namespace == namespace
    }
}

impl<K: Cached> Table<K> {
    fn hash(&self, namespace: Option<&str>, name: &str) -> u64 {
        self.hasher.hash_one((namespace, name))
    }

    pub(super) fn get(&self, namespace: Option<&str>, name: &str) -> Option<&Arc<K::Slim>> {
        self.objects.find(self.hash(namespace, name), same_key::<K>(namespace, name))
    }

    /// Holds `held`, in place of what had its namespace and name; returns that.
    pub(super) fn insert(&mut self, held: Arc<K::Slim>) -> Option<Arc<K::Slim>> {
        let Key { namespace, name, .. } = K::key(&held);
        let hash = self.hash(namespace, name);
        let hasher = |h: &Arc<K::Slim>| {
            let key = K::key(h);
            self.hasher.hash_one((key.namespace, key.name))
        };
        match self.objects.entry(hash, same_key::<K>(namespace, name), hasher) {
            hashbrown::hash_table::Entry::Occupied(mut entry) => Some(std::mem::replace(entry.get_mut(), held)),
            hashbrown::hash_table::Entry::Vacant(entry) => {
                entry.insert(held);
                None
            }
        }
    }

    pub(super) fn remove(&mut self, namespace: Option<&str>, name: &str) -> Option<Arc<K::Slim>> {
        let hash = self.hash(namespace, name);
        match self.objects.find_entry(hash, same_key::<K>(namespace, name)) {
            Ok(entry) => Some(entry.remove().0),
            Err(_) => None,
        }
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &Arc<K::Slim>> {
        self.objects.iter()
    }

    pub(super) fn len(&self) -> usize {
        self.objects.len()
    }
}

/// The read view of a cache. Cheap to clone: clones read the same cache. Each read rebuilds the object from its
/// held form ([`Cached::read`]); reads that need less (whether an object is there, the names of all) do not.
pub struct Cache<K: Cached> {
    table: Arc<RwLock<Table<K>>>,
}

impl<K: Cached> Clone for Cache<K> {
    fn clone(&self) -> Self {
        Cache { table: self.table.clone() }
    }
}

impl<K: Cached> Default for Cache<K> {
    fn default() -> Self {
        Cache { table: Arc::default() }
    }
}

impl<K: Cached> Cache<K> {
    fn read(&self) -> RwLockReadGuard<'_, Table<K>> {
        self.table.read().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn write(&self) -> RwLockWriteGuard<'_, Table<K>> {
        self.table.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Every held object (the table's lock is not held while they are rebuilt).
    pub(super) fn held_all(&self) -> Vec<Arc<K::Slim>> {
        self.read().iter().cloned().collect()
    }

    fn held(&self, namespace: Option<&str>, name: &str) -> Option<Arc<K::Slim>> {
        self.read().get(namespace, name).cloned()
    }

    /// The cluster-scoped object `name`.
    pub fn get(&self, name: &str) -> Option<Arc<K>> {
        self.held(None, name).map(|held| K::read(&held))
    }

    /// The object `name` of `namespace`.
    pub fn get_in(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        self.held(Some(namespace), name).map(|held| K::read(&held))
    }

    /// Whether the cluster-scoped object `name` is cached.
    pub fn contains(&self, name: &str) -> bool {
        self.read().get(None, name).is_some()
    }

    /// Every cached object, all rebuilt at once: for kinds a cluster has few of (classes, nodes). For claims or
    /// volumes, [`Cache::filter`], [`Cache::any`] or [`Cache::keys`].
    pub fn state(&self) -> Vec<Arc<K>> {
        self.held_all().iter().map(K::read).collect()
    }

    /// The cached objects that satisfy `test`, rebuilt one at a time (only those kept stay).
    pub fn filter(&self, mut test: impl FnMut(&K) -> bool) -> Vec<Arc<K>> {
        self.held_all().iter().map(K::read).filter(|object| test(object)).collect()
    }

    /// What `f` makes of each cached object, rebuilt one at a time.
    pub fn filter_map<T>(&self, f: impl FnMut(&K) -> Option<T>) -> Vec<T> {
        let mut f = f;
        self.held_all().iter().filter_map(|held| f(&K::read(held))).collect()
    }

    /// Every cached object of `namespace` (only those are rebuilt).
    pub fn state_in(&self, namespace: &str) -> Vec<Arc<K>> {
        let held: Vec<Arc<K::Slim>> =
            self.read().iter().filter(|h| K::key(h).namespace == Some(namespace)).cloned().collect();
        held.iter().map(K::read).collect()
    }

    /// Whether any cached object satisfies `test`; objects are rebuilt one at a time, never all at once.
    pub fn any(&self, mut test: impl FnMut(&K) -> bool) -> bool {
        self.held_all().iter().any(|h| test(&K::read(h)))
    }

    /// What `f` makes of each cached object's namespace and name (no object is rebuilt).
    pub fn keys<T>(&self, mut f: impl FnMut(Key<'_>) -> Option<T>) -> Vec<T> {
        self.read().iter().filter_map(|held| f(K::key(held))).collect()
    }

    /// How many objects are cached.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolume};
    use kube::api::ObjectMeta;
    use kube::runtime::watcher::Event;

    use crate::watch;

    fn config_map(namespace: &str, name: &str) -> ConfigMap {
        let metadata = ObjectMeta { name: Some(name.into()), namespace: Some(namespace.into()), ..Default::default() };
        ConfigMap { metadata, ..Default::default() }
    }

    #[test]
    fn objects_are_found_by_namespace_and_name() {
        let (cache, feed) = watch::cache::<ConfigMap>();
        for (namespace, name) in [("a", "x"), ("a", "y"), ("b", "x")] {
            feed.apply(&Event::Apply(config_map(namespace, name)));
        }
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.get_in("b", "x").and_then(|m| m.metadata.namespace.clone()).as_deref(), Some("b"));
        assert!(cache.get_in("b", "y").is_none());
        assert!(cache.get("x").is_none(), "a namespaced object is not found without its namespace");
        let mut in_a: Vec<_> = cache.state_in("a").iter().filter_map(|m| m.metadata.name.clone()).collect();
        in_a.sort();
        assert_eq!(in_a, ["x", "y"]);
        let mut keys = cache.keys(|key| Some(format!("{}/{}", key.namespace.unwrap_or_default(), key.name)));
        keys.sort();
        assert_eq!(keys, ["a/x", "a/y", "b/x"]);
        assert_eq!(cache.filter(|m| m.metadata.name.as_deref() == Some("x")).len(), 2);
        assert!(cache.any(|m| m.metadata.namespace.as_deref() == Some("b")));
        feed.apply(&Event::Apply(config_map("a", "x")));
        assert_eq!(cache.len(), 3, "a change replaces the object");
        feed.apply(&Event::Delete(config_map("a", "x")));
        assert!(cache.get_in("a", "x").is_none());
        assert_eq!(cache.filter_map(|m| m.metadata.name.clone()).len(), 2);
    }

    #[test]
    fn a_cluster_scoped_object_is_found_by_its_name() {
        let (cache, feed) = watch::cache::<PersistentVolume>();
        let volume = PersistentVolume {
            metadata: ObjectMeta { name: Some("pv-1".into()), ..Default::default() },
            ..Default::default()
        };
        feed.apply(&Event::Apply(volume.clone()));
        assert!(cache.contains("pv-1"));
        assert_eq!(cache.get("pv-1").as_deref(), Some(&volume));
        assert!(!cache.contains("pv-2"));
    }
}
