//! How a cache holds each kind it can hold: the one place that says it, and that a new sidecar extends when it
//! caches a kind nobody cached before.
//!
//! The kinds a cluster has many of (claims, volumes, pods, snapshot contents) are held slim ([`claim`], [`volume`],
//! [`pod`], [`snapshot_content`]): every string that repeats across objects (namespaces, classes, drivers, access
//! modes, annotation and label keys and values, whole annotation maps, finalizer lists) is one shared copy, the
//! fields every object has are held apart, compact, and the rest together, only when an object has any. A reader
//! gets the k8s-openapi object rebuilt from that ([`Cached::read`]), equal to what the watch delivered but for
//! `metadata.managedFields` (Pods: what [`pod`] keeps). The other kinds, few per cluster (classes, CSINodes,
//! Nodes, group snapshots), are held whole ([`held_whole`]), without their managedFields (a Node without its
//! status, which no sidecar reads and which is most of a Node: its image list).
//!
//! A new sidecar caching a kind listed here declares nothing. A new kind gets a line in [`held_whole`]'s list, or a
//! slim form of its own when a cluster has thousands of them: a module like [`claim`] whose `slim` names every
//! field of the k8s-openapi type (so that a field a newer k8s-openapi adds fails to compile until it is placed),
//! and a round-trip test.

pub mod claim;
pub mod meta;
pub mod pod;
pub mod snapshot_content;
pub mod volume;

#[cfg(test)]
mod tests;

#[cfg(test)]
#[path = "kinds_prop.rs"]
mod prop_tests;

use std::fmt::Debug;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Node, Secret};
use k8s_openapi::api::storage::v1::{
    CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment, VolumeAttributesClass,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use snapshot_api::{
    VolumeGroupSnapshot, VolumeGroupSnapshotClass, VolumeGroupSnapshotContent, VolumeSnapshot, VolumeSnapshotClass,
};

/// A kind a watch cache can hold, and how it holds it.
pub trait Cached:
    kube::Resource<DynamicType = ()> + Clone + Debug + serde::de::DeserializeOwned + Send + Sync + 'static
{
    /// What the cache holds of one object.
    type Slim: Debug + Send + Sync + 'static;
    /// The held form of an object as the watch delivered it.
    fn slim(&self) -> Self::Slim;
    /// The object a reader gets.
    fn read(held: &Arc<Self::Slim>) -> Arc<Self>;
    /// The held object's namespace and name.
    fn key(held: &Self::Slim) -> Key<'_>;
}

/// Who a cached object is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key<'a> {
    pub namespace: Option<&'a str>,
    pub name: &'a str,
}

impl<'a> Key<'a> {
    pub fn of(meta: &'a ObjectMeta) -> Key<'a> {
        Key { namespace: meta.namespace.as_deref(), name: meta.name.as_deref().unwrap_or_default() }
    }
}

/// A part of a slim object (a spec, a status) and the k8s-openapi part it stands for.
trait Part<F>: Sized {
    fn of(full: &F) -> Self;
    fn full(&self) -> F;
}

/// An object of metadata, optional spec and optional status, each part held slim.
#[derive(Debug, Clone, PartialEq)]
pub struct SlimObject<S, T> {
    meta: meta::SlimMeta,
    spec: Option<S>,
    status: Option<T>,
}

/// The [`Cached`] of a kind made of metadata, optional spec and optional status, each held by its [`Part`].
macro_rules! held_slim {
    ($kind:ty, $spec:ty, $status:ty) => {
        impl Cached for $kind {
            type Slim = SlimObject<$spec, $status>;
            fn slim(&self) -> Self::Slim {
                SlimObject {
                    meta: SlimMeta::of(&self.metadata),
                    spec: self.spec.as_ref().map(Part::of),
                    status: self.status.as_ref().map(Part::of),
                }
            }
            fn read(held: &Arc<Self::Slim>) -> Arc<$kind> {
                Arc::new(Self {
                    metadata: held.meta.full(),
                    spec: held.spec.as_ref().map(Part::full),
                    status: held.status.as_ref().map(Part::full),
                })
            }
            fn key(held: &Self::Slim) -> Key<'_> {
                held.meta.key()
            }
        }
    };
}
use held_slim;

/// Kinds held as the watch delivered them, without their managedFields (the watch drops those first); a read
/// shares the held object.
macro_rules! held_whole {
    ($($kind:ty),* $(,)?) => {$(
        impl Cached for $kind {
            type Slim = $kind;
            fn slim(&self) -> $kind {
                self.clone()
            }
            fn read(held: &Arc<$kind>) -> Arc<$kind> {
                held.clone()
            }
            fn key(held: &$kind) -> Key<'_> {
                Key::of(&held.metadata)
            }
        }
    )*};
}

held_whole!(
    StorageClass,
    CSINode,
    CSIStorageCapacity,
    VolumeAttachment,
    VolumeAttributesClass,
    VolumeSnapshot,
    VolumeSnapshotClass,
    VolumeGroupSnapshot,
    VolumeGroupSnapshotContent,
    VolumeGroupSnapshotClass,
    ConfigMap,
    Secret,
);

/// A Node without its status: the sidecars read a Node's labels (topology) and annotations only, and its status
/// (images, conditions, addresses) is most of it.
impl Cached for Node {
    type Slim = Node;
    fn slim(&self) -> Node {
        Node { metadata: self.metadata.clone(), spec: self.spec.clone(), status: None }
    }
    fn read(held: &Arc<Node>) -> Arc<Node> {
        held.clone()
    }
    fn key(held: &Node) -> Key<'_> {
        Key::of(&held.metadata)
    }
}
