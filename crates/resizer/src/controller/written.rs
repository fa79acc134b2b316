//! The objects as the resizer's own writes returned them, until the watch delivers that version (upstream puts every
//! object it patched back into its informer store: external-resizer pkg/controller/resize_status.go,
//! markControllerResizeInProgress). The watch caches cannot be written from outside, so this sits beside them: a sync
//! reads the newer of the two.
//!
//! Why it matters: a claim's own status patches come back as watch events that queue the claim again, and the next
//! sync starts as soon as the first ends. Without this it would often see the claim from before the last patch (the
//! "in progress" mark, not the result) and write the mark again with a stale resourceVersion: a Conflict, a retry and
//! an extra request per expansion or modification.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::Resource;

/// What the watch has shown of an object since a write: the entry goes once the cache holds that version or a newer
/// one.
pub struct Written<K> {
    objects: Mutex<HashMap<String, Arc<K>>>,
}

impl<K: Resource> Default for Written<K> {
    fn default() -> Self {
        Written { objects: Mutex::new(HashMap::new()) }
    }
}

impl<K: Resource> Written<K> {
    /// Remembers `object` as the API server returned it after a write.
    pub fn record(&self, key: String, object: K) {
        self.lock().insert(key, Arc::new(object));
    }

    /// The object a sync should read: the written one while the cache has not caught up with it, else the cached
    /// one. Nothing when the cache has none (deleted, or not seen yet): the cache decides whether the object exists.
    pub fn newest(&self, key: &str, cached: Option<Arc<K>>) -> Option<Arc<K>> {
        let cached = cached?;
        let mut objects = self.lock();
        match objects.get(key) {
            Some(written) if !caught_up(version(cached.as_ref()), version(written.as_ref())) => Some(written.clone()),
            Some(_) => {
                objects.remove(key);
                Some(cached)
            }
            None => Some(cached),
        }
    }

    /// The watch delivered `object`: drops the entry once the cache holds the written version or a newer one.
    pub fn seen(&self, key: &str, object: &K) {
        let mut objects = self.lock();
        if objects.get(key).is_some_and(|written| caught_up(version(object), version(written.as_ref()))) {
            objects.remove(key);
        }
    }

    pub fn forget(&self, key: &str) {
        self.lock().remove(key);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<K>>> {
        self.objects.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn version<K: Resource>(object: &K) -> &str {
    object.meta().resource_version.as_deref().unwrap_or_default()
}

/// Whether a cached resourceVersion is at least the written one. Versions are opaque to clients, except that the
/// same version is the same object; the API server's are etcd revisions, so when both are numbers the larger is the
/// newer. An unreadable pair counts as caught up, so an entry never outlives a change it cannot judge.
pub fn caught_up(cached: &str, written: &str) -> bool {
    if cached == written {
        return true;
    }
    match (cached.parse::<u64>(), written.parse::<u64>()) {
        (Ok(cached), Ok(written)) => cached > written,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::PersistentVolumeClaim;
    use kube::api::ObjectMeta;

    use super::*;

    #[test]
    fn caught_up_rules() {
        let rows = [
            ("the same version", "7", "7", true),
            ("an older cache", "6", "7", false),
            ("a newer cache", "8", "7", true),
            ("numbers compare as numbers, not text", "10", "9", true),
            ("unreadable versions count as caught up", "abc", "7", true),
        ];
        for (rule, cached, written, expected) in rows {
            assert_eq!(caught_up(cached, written), expected, "{rule}");
        }
    }

    fn claim(version: &str) -> PersistentVolumeClaim {
        let metadata = ObjectMeta { resource_version: Some(version.into()), ..Default::default() };
        PersistentVolumeClaim { metadata, ..Default::default() }
    }

    fn version_of(object: Option<Arc<PersistentVolumeClaim>>) -> Option<String> {
        object.and_then(|o| o.metadata.resource_version.clone())
    }

    #[test]
    fn a_sync_reads_the_newer_of_cache_and_write() {
        let written = Written::default();
        written.record("ns/a".into(), claim("7"));
        assert_eq!(version_of(written.newest("ns/a", Some(Arc::new(claim("6"))))), Some("7".into()), "stale cache");
        assert_eq!(version_of(written.newest("ns/a", Some(Arc::new(claim("8"))))), Some("8".into()), "newer cache");
        // The entry went when the newer cache was read.
        assert_eq!(version_of(written.newest("ns/a", Some(Arc::new(claim("6"))))), Some("6".into()), "entry gone");
        assert_eq!(version_of(written.newest("ns/b", Some(Arc::new(claim("1"))))), Some("1".into()), "no write");
    }

    #[test]
    fn the_cache_decides_whether_the_object_exists() {
        let written = Written::default();
        written.record("ns/a".into(), claim("7"));
        assert_eq!(version_of(written.newest("ns/a", None)), None);
    }

    #[test]
    fn the_watch_delivering_the_written_version_drops_the_entry() {
        let written = Written::default();
        written.record("ns/a".into(), claim("7"));
        written.seen("ns/a", &claim("6"));
        assert_eq!(version_of(written.newest("ns/a", Some(Arc::new(claim("6"))))), Some("7".into()), "older event");
        written.seen("ns/a", &claim("7"));
        assert_eq!(version_of(written.newest("ns/a", Some(Arc::new(claim("6"))))), Some("6".into()), "delivered");
        written.record("ns/a".into(), claim("9"));
        written.forget("ns/a");
        assert_eq!(version_of(written.newest("ns/a", Some(Arc::new(claim("8"))))), Some("8".into()), "forgotten");
    }
}
