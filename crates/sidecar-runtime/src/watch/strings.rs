//! The strings and string maps cached objects share: one copy of each namespace, class, driver, annotation key and
//! value, label, finalizer, access mode and quantity, however many objects hold it, and one copy of each whole
//! annotation map or finalizer list that several objects hold alike (every claim bound by kube-controller-manager
//! carries the same four annotations and one finalizer).
//!
//! An interner keeps what it hands out until no cached object holds it any more: once it has doubled since it was
//! last swept, it drops the values only it still holds, so objects that come and go do not grow it for ever.

use std::borrow::Borrow;
use std::collections::{BTreeMap, HashSet};
use std::hash::Hash;
use std::sync::{Arc, LazyLock, Mutex};

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// One key and its value, both shared.
pub type Pair = (Arc<str>, Arc<str>);
/// A string map (annotations, labels, quantities, volume attributes), in key order, shared.
pub type Pairs = Arc<[Pair]>;
/// A string list (finalizers, access modes, mount options), shared.
pub type List = Arc<[Arc<str>]>;

/// One interner per shape, for the whole process: the caches of every sidecar in it share their strings.
static STRINGS: LazyLock<Interner<str>> = LazyLock::new(Interner::default);
static PAIRS: LazyLock<Interner<[Pair]>> = LazyLock::new(Interner::default);
static LISTS: LazyLock<Interner<[Arc<str>]>> = LazyLock::new(Interner::default);

/// Below this many values an interner is never swept.
const FIRST_SWEEP: usize = 1024;

struct Interner<T: ?Sized> {
    values: Mutex<Values<T>>,
}

struct Values<T: ?Sized> {
    set: HashSet<Arc<T>>,
    sweep_at: usize,
}

impl<T: ?Sized> Default for Interner<T> {
    fn default() -> Self {
        Interner { values: Mutex::new(Values { set: HashSet::new(), sweep_at: FIRST_SWEEP }) }
    }
}

impl<T: ?Sized + Hash + Eq> Interner<T>
where
    for<'a> Arc<T>: From<&'a T>,
{
    fn intern(&self, value: &T) -> Arc<T> {
        let mut values = self.values.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(shared) = values.set.get(value) {
            return shared.clone();
        }
        if values.set.len() >= values.sweep_at {
            // Nobody else holds a value whose count is 1, and nobody can get it but through this lock.
            values.set.retain(|v| Arc::strong_count(v) > 1);
            values.sweep_at = (values.set.len() * 2).max(FIRST_SWEEP);
        }
        let shared: Arc<T> = Arc::from(value);
        values.set.insert(shared.clone());
        shared
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.values.lock().unwrap().set.len()
    }
}

/// The shared copy of `value`.
pub fn shared(value: &str) -> Arc<str> {
    STRINGS.intern(value)
}

pub fn shared_opt(value: &Option<String>) -> Option<Arc<str>> {
    value.as_deref().map(shared)
}

/// A string only one object holds (a name, a uid, a volume handle): a box of exactly its length.
pub fn text(value: &Option<String>) -> Option<Box<str>> {
    value.as_deref().map(Box::from)
}

pub fn string(value: &Option<impl Borrow<str>>) -> Option<String> {
    value.as_ref().map(|v| v.borrow().to_string())
}

/// The shared copy of a string map.
pub fn pairs<'a>(map: impl IntoIterator<Item = (&'a String, &'a str)>) -> Pairs {
    let pairs: Vec<Pair> = map.into_iter().map(|(k, v)| (shared(k), shared(v))).collect();
    PAIRS.intern(&pairs)
}

pub fn string_map(map: &Option<BTreeMap<String, String>>) -> Option<Pairs> {
    map.as_ref().map(|m| pairs(m.iter().map(|(k, v)| (k, v.as_str()))))
}

pub fn quantity_map(map: &Option<BTreeMap<String, Quantity>>) -> Option<Pairs> {
    map.as_ref().map(|m| pairs(m.iter().map(|(k, v)| (k, v.0.as_str()))))
}

pub fn to_string_map(pairs: &Option<Pairs>) -> Option<BTreeMap<String, String>> {
    pairs.as_ref().map(|p| p.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
}

pub fn to_quantity_map(pairs: &Option<Pairs>) -> Option<BTreeMap<String, Quantity>> {
    pairs.as_ref().map(|p| p.iter().map(|(k, v)| (k.to_string(), Quantity(v.to_string()))).collect())
}

/// The shared copy of a string list.
pub fn list(values: &Option<Vec<String>>) -> Option<List> {
    values.as_ref().map(|v| {
        let list: Vec<Arc<str>> = v.iter().map(|s| shared(s)).collect();
        LISTS.intern(&list)
    })
}

pub fn to_list(list: &Option<List>) -> Option<Vec<String>> {
    list.as_ref().map(|l| l.iter().map(|s| s.to_string()).collect())
}

/// A uid, held in 16 bytes when it is a UUID as the API server writes them (lowercase, hyphenated), else as it came.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Uid {
    Uuid([u8; 16]),
    Text(Box<str>),
}

/// Where a canonical UUID has its hyphens.
const HYPHENS: [usize; 4] = [8, 13, 18, 23];

impl Uid {
    pub fn of(text: &str) -> Uid {
        Uid::uuid(text).map(Uid::Uuid).unwrap_or_else(|| Uid::Text(text.into()))
    }

    fn uuid(text: &str) -> Option<[u8; 16]> {
        let bytes = text.as_bytes();
        if bytes.len() != 36 || HYPHENS.iter().any(|&i| bytes[i] != b'-') {
            return None;
        }
        let mut digits = bytes.iter().enumerate().filter(|(i, _)| !HYPHENS.contains(i)).map(|(_, b)| match b {
            b'0'..=b'9' => Some(b - b'0'),
            b'a'..=b'f' => Some(b - b'a' + 10),
            _ => None,
        });
        let mut uuid = [0u8; 16];
        for byte in &mut uuid {
            *byte = (digits.next()?? << 4) | digits.next()??;
        }
        Some(uuid)
    }

    pub fn text(&self) -> String {
        match self {
            Uid::Text(text) => text.to_string(),
            Uid::Uuid(uuid) => {
                let mut text = String::with_capacity(36);
                for (i, byte) in uuid.iter().enumerate() {
                    if [4, 6, 8, 10].contains(&i) {
                        text.push('-');
                    }
                    text.push_str(&format!("{byte:02x}"));
                }
                text
            }
        }
    }
}

pub fn uid(value: &Option<String>) -> Option<Uid> {
    value.as_deref().map(Uid::of)
}

pub fn uid_text(value: &Option<Uid>) -> Option<String> {
    value.as_ref().map(Uid::text)
}

/// A resourceVersion, held as a number when it is one in its plain decimal form (etcd's revisions), else as it came.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Version {
    Number(u64),
    Text(Box<str>),
}

impl Version {
    pub fn of(text: &str) -> Version {
        let plain =
            !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) && (text == "0" || !text.starts_with('0'));
        match text.parse() {
            Ok(number) if plain => Version::Number(number),
            _ => Version::Text(text.into()),
        }
    }

    pub fn text(&self) -> String {
        match self {
            Version::Number(number) => number.to_string(),
            Version::Text(text) => text.to_string(),
        }
    }
}

pub fn version(value: &Option<String>) -> Option<Version> {
    value.as_deref().map(Version::of)
}

pub fn version_text(value: &Option<Version>) -> Option<String> {
    value.as_ref().map(Version::text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uids_and_versions_come_back_as_they_came() {
        for text in [
            "0a7c6a9e-2d5b-4c8e-9f1a-3b2c1d0e9f8a",
            "0A7C6A9E-2d5b-4c8e-9f1a-3b2c1d0e9f8a",
            "u-1",
            "",
            "0a7c6a9e-2d5b-4c8e-9f1a-3b2c1d0e9f8",
        ] {
            assert_eq!(Uid::of(text).text(), text);
        }
        assert!(matches!(Uid::of("0a7c6a9e-2d5b-4c8e-9f1a-3b2c1d0e9f8a"), Uid::Uuid(_)));
        assert!(matches!(Uid::of("0A7C6A9E-2d5b-4c8e-9f1a-3b2c1d0e9f8a"), Uid::Text(_)), "upper case is not canonical");
        for text in ["123456", "0", "007", "", "18446744073709551616", "12a"] {
            assert_eq!(Version::of(text).text(), text);
        }
        assert_eq!(Version::of("123456"), Version::Number(123456));
        assert!(matches!(Version::of("007"), Version::Text(_)));
    }

    #[test]
    fn equal_strings_and_maps_are_one_copy() {
        let a = shared("kubernetes.io/pvc-protection");
        let b = shared(&String::from("kubernetes.io/pvc-protection"));
        assert!(Arc::ptr_eq(&a, &b));
        let map = Some(BTreeMap::from([("pv.kubernetes.io/bind-completed".to_string(), "yes".to_string())]));
        let (x, y) = (string_map(&map).unwrap(), string_map(&map.clone()).unwrap());
        assert!(Arc::ptr_eq(&x, &y));
        assert_eq!(to_string_map(&Some(x)), map);
        let modes = Some(vec!["ReadWriteOnce".to_string()]);
        assert!(Arc::ptr_eq(&list(&modes).unwrap(), &list(&modes).unwrap()));
        assert_eq!(to_list(&list(&modes)), modes);
        assert_eq!(list(&Some(vec![])).map(|l| l.len()), Some(0), "an empty list stays a list");
        assert_eq!(list(&None), None);
    }

    #[test]
    fn values_nobody_holds_are_swept_once_the_interner_doubles() {
        let interner = Interner::<str>::default();
        let kept = interner.intern("kept");
        for i in 0..FIRST_SWEEP * 3 {
            interner.intern(&format!("gone-{i}"));
        }
        assert!(interner.len() <= FIRST_SWEEP * 2, "swept: {}", interner.len());
        assert!(Arc::ptr_eq(&kept, &interner.intern("kept")), "a value still held stays the one copy");
    }
}
