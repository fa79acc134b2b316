//! Objects as a controller's own writes returned them, kept until its watch delivers that version or a newer one.
//! A watch cache cannot be written from outside, and the next sync of an object often starts before the watch event
//! of the last write arrives (the write's own event queued the object again): reading the newer of the cached and
//! the written object keeps that sync from doing the last step a second time. client-go controllers get the same by
//! putting a patched object back into their informer store.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use kube::runtime::reflector::ObjectRef;

use super::Watched;

/// The written objects a cache has not caught up with, by object reference.
pub struct Written<K: Watched> {
    objects: Mutex<HashMap<ObjectRef<K>, Arc<K>>>,
}

impl<K: Watched> Default for Written<K> {
    fn default() -> Self {
        Written { objects: Mutex::new(HashMap::new()) }
    }
}

impl<K: Watched> Written<K> {
    /// Keeps `object` as the API server answered a write of it.
    pub fn record(&self, object: K) {
        self.entries().insert(ObjectRef::from_obj(&object), Arc::new(object));
    }

    /// What a sync should read: the written object while `cached` is older, else `cached` (then the entry goes).
    pub fn newest(&self, cached: Arc<K>) -> Arc<K> {
        let key = ObjectRef::from_obj(cached.as_ref());
        let mut entries = self.entries();
        match entries.get(&key) {
            Some(written) if !caught_up(resource_version(cached.as_ref()), resource_version(written.as_ref())) => {
                written.clone()
            }
            Some(_) => {
                entries.remove(&key);
                cached
            }
            None => cached,
        }
    }

    /// The watch delivered `object`: its entry goes once this is the written version or a newer one.
    pub fn seen(&self, object: &K) {
        let key = ObjectRef::from_obj(object);
        let mut entries = self.entries();
        if entries
            .get(&key)
            .is_some_and(|written| caught_up(resource_version(object), resource_version(written.as_ref())))
        {
            entries.remove(&key);
        }
    }

    /// The object is gone: nothing is kept for it.
    pub fn forget(&self, object: &K) {
        self.entries().remove(&ObjectRef::from_obj(object));
    }

    fn entries(&self) -> MutexGuard<'_, HashMap<ObjectRef<K>, Arc<K>>> {
        self.objects.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn resource_version<K: Watched>(object: &K) -> &str {
    object.meta().resource_version.as_deref().unwrap_or_default()
}

/// Whether a delivered resourceVersion is at least the written one. Versions are opaque, except that equal ones name
/// the same object; the API server's are etcd revisions, so two numbers compare as numbers. A pair that cannot be
/// compared counts as caught up, so an entry never hides a change it cannot judge.
fn caught_up(delivered: &str, written: &str) -> bool {
    if delivered == written {
        return true;
    }
    match (delivered.parse::<u64>(), written.parse::<u64>()) {
        (Ok(delivered), Ok(written)) => delivered > written,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    use super::*;

    fn object(name: &str, version: &str) -> ConfigMap {
        let metadata = ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            resource_version: Some(version.into()),
            ..Default::default()
        };
        ConfigMap { metadata, ..Default::default() }
    }

    fn read(written: &Written<ConfigMap>, name: &str, cached: &str) -> String {
        let newest = written.newest(Arc::new(object(name, cached)));
        newest.metadata.resource_version.clone().unwrap_or_default()
    }

    #[test]
    fn delivered_versions_are_compared_as_etcd_revisions() {
        // (rule, delivered, written, caught up)
        let table = [
            ("the same version", "7", "7", true),
            ("an older delivery", "6", "7", false),
            ("a newer delivery", "8", "7", true),
            ("numbers, not text", "10", "9", true),
            ("not comparable: caught up", "x", "7", true),
        ];
        for (rule, delivered, written, want) in table {
            assert_eq!(caught_up(delivered, written), want, "{rule}");
        }
    }

    #[test]
    fn a_sync_reads_the_newer_of_cache_and_write() {
        let written = Written::default();
        written.record(object("a", "7"));
        assert_eq!(read(&written, "a", "6"), "7", "a stale cache yields the write");
        assert_eq!(read(&written, "b", "6"), "6", "another object is untouched");
        assert_eq!(read(&written, "a", "8"), "8", "a newer cache wins");
        assert_eq!(read(&written, "a", "6"), "6", "and the entry went with it");
    }

    #[test]
    fn the_watch_delivering_the_write_or_the_object_going_drops_the_entry() {
        let written = Written::default();
        written.record(object("a", "7"));
        written.seen(&object("a", "6"));
        assert_eq!(read(&written, "a", "6"), "7", "an older event keeps the entry");
        written.seen(&object("a", "7"));
        assert_eq!(read(&written, "a", "6"), "6", "the written version delivered");
        written.record(object("a", "9"));
        written.forget(&object("a", "9"));
        assert_eq!(read(&written, "a", "8"), "8", "forgotten");
    }
}
