//! An object's metadata as a cache holds it.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::Key;
use crate::watch::strings::{
    List, Pairs, Uid, Version, list, shared_opt, string, string_map, text, to_list, to_string_map, uid as uid_of,
    uid_text, version, version_text,
};

/// Every field of [`ObjectMeta`] but `managedFields` (no sidecar reads them, client-go's
/// `TransformStripManagedFields` drops them too, and an update without them keeps the server's). The fields every
/// object has are held apart, compact; the rest (generation, owner references, the deletion timestamp, …) together,
/// only when the object has any.
#[derive(Debug, Clone, PartialEq)]
pub struct SlimMeta {
    name: Option<Box<str>>,
    namespace: Option<Arc<str>>,
    uid: Option<Uid>,
    resource_version: Option<Version>,
    creation_timestamp: Option<Time>,
    labels: Option<Pairs>,
    annotations: Option<Pairs>,
    finalizers: Option<List>,
    rest: Option<Box<ObjectMeta>>,
}

impl SlimMeta {
    pub fn of(meta: &ObjectMeta) -> SlimMeta {
        // Every field named, so that a field a new k8s-openapi adds fails to compile here until it is placed.
        let ObjectMeta {
            annotations,
            creation_timestamp,
            deletion_grace_period_seconds,
            deletion_timestamp,
            finalizers,
            generate_name,
            generation,
            labels,
            managed_fields: _,
            name,
            namespace,
            owner_references,
            resource_version,
            self_link,
            uid,
        } = meta;
        let rest = ObjectMeta {
            deletion_grace_period_seconds: *deletion_grace_period_seconds,
            deletion_timestamp: deletion_timestamp.clone(),
            generate_name: generate_name.clone(),
            generation: *generation,
            owner_references: owner_references.clone(),
            self_link: self_link.clone(),
            ..Default::default()
        };
        SlimMeta {
            name: text(name),
            namespace: shared_opt(namespace),
            uid: uid_of(uid),
            resource_version: version(resource_version),
            creation_timestamp: creation_timestamp.clone(),
            labels: string_map(labels),
            annotations: string_map(annotations),
            finalizers: list(finalizers),
            rest: (rest != ObjectMeta::default()).then(|| Box::new(rest)),
        }
    }

    pub fn full(&self) -> ObjectMeta {
        let rest = self.rest.as_deref().cloned().unwrap_or_default();
        ObjectMeta {
            annotations: to_string_map(&self.annotations),
            creation_timestamp: self.creation_timestamp.clone(),
            finalizers: to_list(&self.finalizers),
            labels: to_string_map(&self.labels),
            managed_fields: None,
            name: string(&self.name),
            namespace: string(&self.namespace),
            resource_version: version_text(&self.resource_version),
            uid: uid_text(&self.uid),
            ..rest
        }
    }

    pub fn key(&self) -> Key<'_> {
        Key { namespace: self.namespace.as_deref(), name: self.name.as_deref().unwrap_or_default() }
    }
}
