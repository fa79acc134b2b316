//! A slim form gives back what it keeps: for objects with arbitrary values in the fields the sidecars read,
//! `read(slim(x))` is `x` without `metadata.managedFields` (a Pod: its name, namespace, phase and claims; a Node:
//! without its status), and the key is the object's namespace and name.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, EmptyDirVolumeSource, HostPathVolumeSource, Node, NodeSpec, NodeStatus, ObjectReference,
    PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimCondition, PersistentVolumeClaimSpec,
    PersistentVolumeClaimStatus, PersistentVolumeClaimVolumeSource, PersistentVolumeSpec, PersistentVolumeStatus, Pod,
    PodSpec, PodStatus, SecretReference, TypedLocalObjectReference, Volume, VolumeResourceRequirements,
};
use k8s_openapi::api::storage::v1::{VolumeAttachment, VolumeAttachmentSource, VolumeAttachmentSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use proptest::prelude::*;
use snapshot_api::{
    DeletionPolicy, SnapshotError, VolumeSnapshotContent, VolumeSnapshotContentSource, VolumeSnapshotContentSpec,
    VolumeSnapshotContentStatus,
};

use super::{Cached, Key};

/// Short words that repeat across objects (so the interners share them), canonical and near-canonical uids and
/// versions, and now and then any string at all.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => "[a-z0-9./-]{0,12}",
        1 => "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        1 => "[0-9A-Fa-f-]{36}",
        1 => "0|[1-9][0-9]{0,20}|0[0-9]{1,3}",
        2 => any::<String>(),
    ]
}

fn opt_text() -> impl Strategy<Value = Option<String>> {
    prop::option::of(text())
}

fn map() -> impl Strategy<Value = BTreeMap<String, String>> {
    prop::collection::btree_map(text(), text(), 0..6)
}

fn opt_map() -> impl Strategy<Value = Option<BTreeMap<String, String>>> {
    prop::option::of(map())
}

fn opt_list() -> impl Strategy<Value = Option<Vec<String>>> {
    prop::option::of(prop::collection::vec(text(), 0..4))
}

fn quantities() -> impl Strategy<Value = Option<BTreeMap<String, Quantity>>> {
    prop::option::of(prop::collection::btree_map(text(), text().prop_map(Quantity), 0..3))
}

fn time() -> impl Strategy<Value = Option<Time>> {
    prop::option::of((0i64..4_000_000_000, 0i32..1_000_000_000).prop_map(|(s, n)| Time(Timestamp::new(s, n).unwrap())))
}

fn owner() -> impl Strategy<Value = OwnerReference> {
    (text(), text(), text(), text(), prop::option::of(any::<bool>()), prop::option::of(any::<bool>())).prop_map(
        |(api_version, kind, name, uid, controller, block_owner_deletion)| OwnerReference {
            api_version,
            kind,
            name,
            uid,
            controller,
            block_owner_deletion,
        },
    )
}

fn metadata() -> impl Strategy<Value = ObjectMeta> {
    (
        (opt_text(), opt_text(), opt_text(), opt_text(), opt_text(), opt_text()),
        (opt_map(), opt_map(), opt_list(), time(), time()),
        (
            prop::option::of(prop::collection::vec(owner(), 0..3)),
            prop::option::of(any::<i64>()),
            prop::option::of(any::<i64>()),
            any::<bool>(),
        ),
    )
        .prop_map(
            |(
                (name, namespace, uid, resource_version, generate_name, self_link),
                (labels, annotations, finalizers, creation_timestamp, deletion_timestamp),
                (owner_references, generation, deletion_grace_period_seconds, managed),
            )| ObjectMeta {
                annotations,
                creation_timestamp,
                deletion_grace_period_seconds,
                deletion_timestamp,
                finalizers,
                generate_name,
                generation,
                labels,
                managed_fields: managed
                    .then(|| vec![ManagedFieldsEntry { manager: Some("m".into()), ..Default::default() }]),
                name,
                namespace,
                owner_references,
                resource_version,
                self_link,
                uid,
            },
        )
}

fn reference() -> impl Strategy<Value = ObjectReference> {
    (opt_text(), opt_text(), opt_text(), opt_text(), opt_text(), opt_text(), opt_text()).prop_map(
        |(api_version, field_path, kind, name, namespace, resource_version, uid)| ObjectReference {
            api_version,
            field_path,
            kind,
            name,
            namespace,
            resource_version,
            uid,
        },
    )
}

fn claim_spec() -> impl Strategy<Value = PersistentVolumeClaimSpec> {
    (
        (opt_list(), prop::option::of((quantities(), quantities())), opt_text(), opt_text(), opt_text()),
        (opt_text(), prop::option::of((opt_text(), text(), text()))),
    )
        .prop_map(|((access_modes, resources, storage_class_name, volume_mode, volume_name), (vac, source))| {
            PersistentVolumeClaimSpec {
                access_modes,
                resources: resources.map(|(requests, limits)| VolumeResourceRequirements { limits, requests }),
                storage_class_name,
                volume_mode,
                volume_name,
                volume_attributes_class_name: vac,
                data_source: source.map(|(api_group, kind, name)| TypedLocalObjectReference { api_group, kind, name }),
                ..Default::default()
            }
        })
}

fn claim_status() -> impl Strategy<Value = PersistentVolumeClaimStatus> {
    (opt_list(), quantities(), opt_text(), quantities(), opt_map(), prop::option::of((text(), text(), opt_text())))
        .prop_map(|(access_modes, capacity, phase, allocated_resources, statuses, condition)| {
            PersistentVolumeClaimStatus {
                access_modes,
                capacity,
                phase,
                allocated_resources,
                allocated_resource_statuses: statuses,
                conditions: condition.map(|(type_, status, message)| {
                    vec![PersistentVolumeClaimCondition { type_, status, message, ..Default::default() }]
                }),
                ..Default::default()
            }
        })
}

fn claim() -> impl Strategy<Value = PersistentVolumeClaim> {
    (metadata(), prop::option::of(claim_spec()), prop::option::of(claim_status()))
        .prop_map(|(metadata, spec, status)| PersistentVolumeClaim { metadata, spec, status })
}

fn csi() -> impl Strategy<Value = CSIPersistentVolumeSource> {
    (text(), text(), opt_text(), prop::option::of(any::<bool>()), opt_map(), prop::option::of((opt_text(), opt_text())))
        .prop_map(|(driver, volume_handle, fs_type, read_only, volume_attributes, secret)| CSIPersistentVolumeSource {
            driver,
            volume_handle,
            fs_type,
            read_only,
            volume_attributes,
            controller_expand_secret_ref: secret.map(|(name, namespace)| SecretReference { name, namespace }),
            ..Default::default()
        })
}

/// Boxed: a PersistentVolumeSpec is kilobytes, and the strategies' value trees hold several.
fn volume() -> impl Strategy<Value = Box<PersistentVolume>> {
    let spec = (
        (opt_list(), quantities(), prop::option::of(reference()), prop::option::of(csi()), opt_list()),
        (opt_text(), opt_text(), opt_text(), opt_text(), prop::option::of(text())),
    )
        .prop_map(
            |((access_modes, capacity, claim_ref, csi, mount_options), (reclaim, class, vac, mode, host))| {
                Box::new(PersistentVolumeSpec {
                    access_modes,
                    capacity,
                    claim_ref,
                    csi,
                    mount_options,
                    persistent_volume_reclaim_policy: reclaim,
                    storage_class_name: class,
                    volume_attributes_class_name: vac,
                    volume_mode: mode,
                    host_path: host.map(|path| HostPathVolumeSource { path, type_: None }),
                    ..Default::default()
                })
            },
        );
    let status = (opt_text(), opt_text(), opt_text(), time()).prop_map(
        |(phase, message, reason, last_phase_transition_time)| PersistentVolumeStatus {
            phase,
            message,
            reason,
            last_phase_transition_time,
        },
    );
    (metadata(), prop::option::of(spec), prop::option::of(status))
        .prop_map(|(metadata, spec, status)| Box::new(PersistentVolume { metadata, spec: spec.map(|s| *s), status }))
}

fn content() -> impl Strategy<Value = VolumeSnapshotContent> {
    let spec = (reference(), any::<bool>(), text(), opt_text(), opt_text(), opt_text(), opt_text()).prop_map(
        |(volume_snapshot_ref, retain, driver, class, volume_handle, snapshot_handle, source_volume_mode)| {
            VolumeSnapshotContentSpec {
                volume_snapshot_ref,
                deletion_policy: if retain { DeletionPolicy::Retain } else { DeletionPolicy::Delete },
                driver,
                volume_snapshot_class_name: class,
                source: VolumeSnapshotContentSource { volume_handle, snapshot_handle },
                source_volume_mode,
            }
        },
    );
    let status = (
        opt_text(),
        prop::option::of(any::<i64>()),
        prop::option::of(any::<i64>()),
        prop::option::of(any::<bool>()),
        prop::option::of((time(), opt_text())),
        opt_text(),
    )
        .prop_map(|(snapshot_handle, creation_time, restore_size, ready_to_use, error, group)| {
            VolumeSnapshotContentStatus {
                snapshot_handle,
                creation_time,
                restore_size,
                ready_to_use,
                error: error.map(|(time, message)| SnapshotError { time, message }),
                volume_group_snapshot_handle: group,
            }
        });
    (metadata(), spec, prop::option::of(status)).prop_map(|(metadata, spec, status)| VolumeSnapshotContent {
        metadata,
        spec,
        status,
    })
}

/// A pod volume: a claim (maybe read-only), or something that is not a claim.
fn pod_volume() -> impl Strategy<Value = Volume> {
    (text(), text(), prop::option::of(any::<bool>()), any::<bool>()).prop_map(|(name, claim, read_only, is_claim)| {
        if is_claim {
            Volume {
                name,
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource { claim_name: claim, read_only }),
                ..Default::default()
            }
        } else {
            Volume { name, empty_dir: Some(EmptyDirVolumeSource::default()), ..Default::default() }
        }
    })
}

fn pod() -> impl Strategy<Value = Pod> {
    let spec = (prop::option::of(prop::collection::vec(pod_volume(), 0..5)), opt_text())
        .prop_map(|(volumes, node_name)| PodSpec { volumes, node_name, ..Default::default() });
    let status =
        (opt_text(), opt_text()).prop_map(|(phase, message)| PodStatus { phase, message, ..Default::default() });
    (metadata(), prop::option::of(spec), prop::option::of(status)).prop_map(|(metadata, spec, status)| Pod {
        metadata,
        spec,
        status,
    })
}

/// What a reader gets back, and the held object's key as (namespace, name).
fn round_trip<K: Cached>(object: &K) -> (Arc<K>, (Option<String>, String)) {
    let held = Arc::new(object.slim());
    let Key { namespace, name } = K::key(&held);
    let key = (namespace.map(str::to_string), name.to_string());
    (K::read(&held), key)
}

fn object_key(meta: &ObjectMeta) -> (Option<String>, String) {
    (meta.namespace.clone(), meta.name.clone().unwrap_or_default())
}

fn without_managed_fields(mut meta: ObjectMeta) -> ObjectMeta {
    meta.managed_fields = None;
    meta
}

proptest! {
    #[test]
    fn a_claim_comes_back_but_for_its_managed_fields(claim in claim()) {
        let (read, key) = round_trip(&claim);
        prop_assert_eq!(key, object_key(&claim.metadata));
        let want = PersistentVolumeClaim { metadata: without_managed_fields(claim.metadata.clone()), ..claim };
        prop_assert_eq!(&*read, &want);
    }

    #[test]
    fn a_snapshot_content_comes_back_but_for_its_managed_fields(content in content()) {
        let (read, key) = round_trip(&content);
        prop_assert_eq!(key, object_key(&content.metadata));
        let want = VolumeSnapshotContent { metadata: without_managed_fields(content.metadata.clone()), ..content };
        prop_assert_eq!(&*read, &want);
    }

    /// The in-use check reads a pod's namespace, phase and claim names; the slim pod keeps those and no more.
    #[test]
    fn a_pod_comes_back_as_its_name_namespace_phase_and_claims(pod in pod()) {
        let (read, key) = round_trip(&pod);
        prop_assert_eq!(key, object_key(&pod.metadata));
        let claims = pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()).filter_map(|v| {
            let claim = v.persistent_volume_claim.as_ref()?;
            Some(Volume {
                name: claim.claim_name.clone(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: claim.claim_name.clone(),
                    read_only: None,
                }),
                ..Default::default()
            })
        });
        let want = Pod {
            metadata: ObjectMeta {
                name: pod.metadata.name.clone(),
                namespace: pod.metadata.namespace.clone(),
                ..Default::default()
            },
            spec: Some(PodSpec { volumes: Some(claims.collect()), ..Default::default() }),
            status: Some(PodStatus { phase: pod.status.and_then(|s| s.phase), ..Default::default() }),
        };
        prop_assert_eq!(&*read, &want);
    }

    /// A node keeps its name, labels and annotations (topology, node affinity) and its spec; its status goes.
    #[test]
    fn a_node_comes_back_without_its_status(metadata in metadata(), provider in opt_text(), addresses in opt_text()) {
        let node = Node {
            metadata,
            spec: Some(NodeSpec { provider_id: provider, ..Default::default() }),
            status: Some(NodeStatus {
                addresses: addresses.map(|address| vec![k8s_openapi::api::core::v1::NodeAddress { address, type_: "InternalIP".into() }]),
                ..Default::default()
            }),
        };
        let (read, key) = round_trip(&node);
        prop_assert_eq!(key, object_key(&node.metadata));
        prop_assert_eq!(&*read, &Node { status: None, ..node });
    }

    /// A kind held whole comes back as it was held.
    #[test]
    fn an_attachment_comes_back_whole(metadata in metadata(), attacher in text(), node in text(), pv in opt_text()) {
        let attachment = VolumeAttachment {
            metadata,
            spec: VolumeAttachmentSpec {
                attacher,
                node_name: node,
                source: VolumeAttachmentSource { persistent_volume_name: pv, inline_volume_spec: None },
            },
            status: None,
        };
        let (read, key) = round_trip(&attachment);
        prop_assert_eq!(key, object_key(&attachment.metadata));
        prop_assert_eq!(&*read, &attachment);
    }
}

/// On a thread of its own: a PersistentVolume's strategies and slim form take more stack than a test thread has.
#[test]
fn a_volume_comes_back_but_for_its_managed_fields() {
    let test = || {
        proptest!(|(volume in volume())| {
            let (read, key) = round_trip(&*volume);
            prop_assert_eq!(key, object_key(&volume.metadata));
            let want = PersistentVolume { metadata: without_managed_fields(volume.metadata.clone()), ..*volume };
            prop_assert_eq!(&*read, &want);
        });
    };
    std::thread::Builder::new().stack_size(64 << 20).spawn(test).unwrap().join().unwrap();
}
