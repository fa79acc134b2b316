//! Watch events decoded without `metadata.managedFields`: the decoder steps over them in the JSON instead of building
//! them (k8s-openapi holds each entry's `fieldsV1` as a `serde_json::Value`: a map and a string per field an owner
//! manages, several times the rest of a claim's allocations, for every event, only to be dropped).
//!
//! [`Decoded`] wraps a kind for kube-runtime's watcher: the same URL and object, only decoded so. The rest of the
//! JSON is decoded by k8s-openapi as before; only the top level and the metadata pass through this filter.

use std::borrow::Cow;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::DynamicResourceScope;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, IntoDeserializer, MapAccess, Visitor};

use super::Cached;

/// An object of `K` as a watch decodes it, without its managedFields.
#[derive(Clone, Debug)]
pub struct Decoded<K>(pub K);

impl<K: Cached> kube::Resource for Decoded<K> {
    type DynamicType = ();
    type Scope = DynamicResourceScope;

    fn kind(dt: &()) -> Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &()) -> Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &()) -> Cow<'_, str> {
        K::version(dt)
    }
    fn plural(dt: &()) -> Cow<'_, str> {
        K::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        self.0.meta()
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        self.0.meta_mut()
    }
}

impl<'de, K: Cached> serde::Deserialize<'de> for Decoded<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        K::deserialize(Level { inner: deserializer, metadata: false }).map(Decoded)
    }
}

/// The object (`metadata: false`) or its metadata (`true`), whose map passes through [`LevelMap`].
struct Level<D> {
    inner: D,
    metadata: bool,
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Level<D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_any(LevelVisitor { inner: visitor, metadata: self.metadata })
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_map(LevelVisitor { inner: visitor, metadata: self.metadata })
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.inner.deserialize_struct(name, fields, LevelVisitor { inner: visitor, metadata: self.metadata })
    }

    /// k8s-openapi decodes `metadata` as an option.
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_option(LevelVisitor { inner: visitor, metadata: self.metadata })
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf unit
        unit_struct newtype_struct seq tuple tuple_struct enum identifier ignored_any
    }
}

struct LevelVisitor<V> {
    inner: V,
    metadata: bool,
}

impl<'de, V: Visitor<'de>> Visitor<'de> for LevelVisitor<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.expecting(f)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.inner.visit_map(LevelMap { inner: map, metadata: self.metadata, metadata_follows: false })
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<V::Value, D::Error> {
        self.inner.visit_some(Level { inner: deserializer, metadata: self.metadata })
    }

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_unit()
    }
}

/// The entries of the object (whose `metadata` value is filtered in turn) or of its metadata (without
/// `managedFields`).
struct LevelMap<A> {
    inner: A,
    metadata: bool,
    metadata_follows: bool,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for LevelMap<A> {
    type Error = A::Error;

    fn next_key_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<Option<S::Value>, A::Error> {
        loop {
            let Some(key) = self.inner.next_key::<Key<'de>>()? else { return Ok(None) };
            if self.metadata && key.as_str() == "managedFields" {
                self.inner.next_value::<IgnoredAny>()?;
                continue;
            }
            self.metadata_follows = !self.metadata && key.as_str() == "metadata";
            return match key {
                Key::Borrowed(key) => seed.deserialize(de::value::BorrowedStrDeserializer::new(key)),
                Key::Owned(key) => seed.deserialize(key.into_deserializer()),
            }
            .map(Some);
        }
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, A::Error> {
        if std::mem::take(&mut self.metadata_follows) {
            self.inner.next_value_seed(LevelSeed { inner: seed })
        } else {
            self.inner.next_value_seed(seed)
        }
    }
}

/// The metadata's value, decoded through [`Level`].
struct LevelSeed<S> {
    inner: S,
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for LevelSeed<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<S::Value, D::Error> {
        self.inner.deserialize(Level { inner: deserializer, metadata: true })
    }
}

/// A map key, borrowed from the input where it can be.
enum Key<'de> {
    Borrowed(&'de str),
    Owned(String),
}

impl Key<'_> {
    fn as_str(&self) -> &str {
        match self {
            Key::Borrowed(key) => key,
            Key::Owned(key) => key,
        }
    }
}

impl<'de> serde::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_borrowed_str<E: de::Error>(self, key: &'de str) -> Result<Key<'de>, E> {
                Ok(Key::Borrowed(key))
            }
            fn visit_str<E: de::Error>(self, key: &str) -> Result<Key<'de>, E> {
                Ok(Key::Owned(key.to_string()))
            }
            fn visit_string<E: de::Error>(self, key: String) -> Result<Key<'de>, E> {
                Ok(Key::Owned(key))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
    use kube::core::WatchEvent;

    use super::*;

    #[test]
    fn an_object_is_decoded_as_k8s_openapi_does_but_for_its_managed_fields() {
        let json = r#"{"type":"MODIFIED","object":{"apiVersion":"v1","kind":"PersistentVolumeClaim",
            "metadata":{"name":"c","namespace":"n","managedFields":[{"manager":"kubectl","operation":"Update",
            "fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:resources":{}}}}],"annotations":{"a\"b":"c"},
            "resourceVersion":"7"},"spec":{"volumeName":"pv","resources":{"requests":{"storage":"1Gi"}}},
            "status":{"phase":"Bound","capacity":{"storage":"1Gi"}}}}"#;
        let WatchEvent::Modified(Decoded(decoded)) =
            serde_json::from_str::<WatchEvent<Decoded<PersistentVolumeClaim>>>(json).unwrap()
        else {
            panic!("a MODIFIED event")
        };
        let WatchEvent::Modified(mut whole) = serde_json::from_str::<WatchEvent<PersistentVolumeClaim>>(json).unwrap()
        else {
            panic!("a MODIFIED event")
        };
        assert!(whole.metadata.managed_fields.is_some());
        whole.metadata.managed_fields = None;
        assert_eq!(decoded, whole);
    }

    #[test]
    fn a_list_and_an_event_whose_type_comes_last_decode_too() {
        let list = r#"{"apiVersion":"v1","kind":"PodList","metadata":{"resourceVersion":"9"},"items":[
            {"metadata":{"name":"p","managedFields":[]},"spec":{"containers":[]}}]}"#;
        let list: kube::core::ObjectList<Decoded<Pod>> = serde_json::from_str(list).unwrap();
        assert_eq!(list.items[0].0.metadata.name.as_deref(), Some("p"));
        assert_eq!(list.items[0].0.metadata.managed_fields, None);
        let late = r#"{"object":{"metadata":{"name":"p","managedFields":[{"manager":"m"}]}},"type":"ADDED"}"#;
        let WatchEvent::Added(Decoded(pod)) = serde_json::from_str::<WatchEvent<Decoded<Pod>>>(late).unwrap() else {
            panic!("an ADDED event")
        };
        assert_eq!((pod.metadata.name.as_deref(), pod.metadata.managed_fields), (Some("p"), None));
    }
}
