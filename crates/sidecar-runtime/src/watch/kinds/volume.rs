//! A PersistentVolume as a cache holds it: every field but `metadata.managedFields`.
//!
//! k8s-openapi's `PersistentVolumeSpec` holds each in-tree volume source inline (3 KB before any string); here they
//! are kept together, only on the volumes that have one.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, ObjectReference, PersistentVolume, PersistentVolumeSpec, PersistentVolumeStatus,
    VolumeNodeAffinity,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::meta::SlimMeta;
use super::{Cached, Key, Part, SlimObject, held_slim};
use crate::watch::strings::{
    List, Pairs, Uid, Version, list, quantity_map, shared, shared_opt, string, string_map, text, to_list,
    to_quantity_map, to_string_map, uid as uid_of, uid_text, version, version_text,
};

#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    access_modes: Option<List>,
    capacity: Option<Pairs>,
    claim_ref: Option<Reference>,
    csi: Option<Csi>,
    mount_options: Option<List>,
    node_affinity: Option<Box<VolumeNodeAffinity>>,
    persistent_volume_reclaim_policy: Option<Arc<str>>,
    storage_class_name: Option<Arc<str>>,
    volume_attributes_class_name: Option<Arc<str>>,
    volume_mode: Option<Arc<str>>,
    /// The in-tree volume sources.
    rest: Option<Box<PersistentVolumeSpec>>,
}

#[derive(Debug, Clone, PartialEq)]
struct Csi {
    driver: Arc<str>,
    volume_handle: Box<str>,
    fs_type: Option<Arc<str>>,
    read_only: Option<bool>,
    volume_attributes: Option<Pairs>,
    /// The secret references.
    rest: Option<Box<CSIPersistentVolumeSource>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Status {
    phase: Option<Arc<str>>,
    last_phase_transition_time: Option<Time>,
    /// The message and reason.
    rest: Option<Box<PersistentVolumeStatus>>,
}

held_slim!(PersistentVolume, Spec, Status);

impl Part<PersistentVolumeSpec> for Spec {
    fn of(spec: &PersistentVolumeSpec) -> Spec {
        let PersistentVolumeSpec {
            access_modes,
            aws_elastic_block_store,
            azure_disk,
            azure_file,
            capacity,
            cephfs,
            cinder,
            claim_ref,
            csi,
            fc,
            flex_volume,
            flocker,
            gce_persistent_disk,
            glusterfs,
            host_path,
            iscsi,
            local,
            mount_options,
            nfs,
            node_affinity,
            persistent_volume_reclaim_policy,
            photon_persistent_disk,
            portworx_volume,
            quobyte,
            rbd,
            scale_io,
            storage_class_name,
            storageos,
            volume_attributes_class_name,
            volume_mode,
            vsphere_volume,
        } = spec;
        let rest = PersistentVolumeSpec {
            aws_elastic_block_store: aws_elastic_block_store.clone(),
            azure_disk: azure_disk.clone(),
            azure_file: azure_file.clone(),
            cephfs: cephfs.clone(),
            cinder: cinder.clone(),
            fc: fc.clone(),
            flex_volume: flex_volume.clone(),
            flocker: flocker.clone(),
            gce_persistent_disk: gce_persistent_disk.clone(),
            glusterfs: glusterfs.clone(),
            host_path: host_path.clone(),
            iscsi: iscsi.clone(),
            local: local.clone(),
            nfs: nfs.clone(),
            photon_persistent_disk: photon_persistent_disk.clone(),
            portworx_volume: portworx_volume.clone(),
            quobyte: quobyte.clone(),
            rbd: rbd.clone(),
            scale_io: scale_io.clone(),
            storageos: storageos.clone(),
            vsphere_volume: vsphere_volume.clone(),
            ..Default::default()
        };
        Spec {
            access_modes: list(access_modes),
            capacity: quantity_map(capacity),
            claim_ref: claim_ref.as_ref().map(Reference::of),
            csi: csi.as_ref().map(Csi::of),
            mount_options: list(mount_options),
            node_affinity: node_affinity.clone().map(Box::new),
            persistent_volume_reclaim_policy: shared_opt(persistent_volume_reclaim_policy),
            storage_class_name: shared_opt(storage_class_name),
            volume_attributes_class_name: shared_opt(volume_attributes_class_name),
            volume_mode: shared_opt(volume_mode),
            rest: (rest != PersistentVolumeSpec::default()).then(|| Box::new(rest)),
        }
    }

    fn full(&self) -> PersistentVolumeSpec {
        let rest = self.rest.as_deref().cloned().unwrap_or_default();
        PersistentVolumeSpec {
            access_modes: to_list(&self.access_modes),
            capacity: to_quantity_map(&self.capacity),
            claim_ref: self.claim_ref.as_ref().map(Reference::full),
            csi: self.csi.as_ref().map(Csi::full),
            mount_options: to_list(&self.mount_options),
            node_affinity: self.node_affinity.as_deref().cloned(),
            persistent_volume_reclaim_policy: string(&self.persistent_volume_reclaim_policy),
            storage_class_name: string(&self.storage_class_name),
            volume_attributes_class_name: string(&self.volume_attributes_class_name),
            volume_mode: string(&self.volume_mode),
            ..rest
        }
    }
}

impl Csi {
    fn of(csi: &CSIPersistentVolumeSource) -> Csi {
        let CSIPersistentVolumeSource {
            controller_expand_secret_ref,
            controller_publish_secret_ref,
            driver,
            fs_type,
            node_expand_secret_ref,
            node_publish_secret_ref,
            node_stage_secret_ref,
            read_only,
            volume_attributes,
            volume_handle,
        } = csi;
        let rest = CSIPersistentVolumeSource {
            controller_expand_secret_ref: controller_expand_secret_ref.clone(),
            controller_publish_secret_ref: controller_publish_secret_ref.clone(),
            node_expand_secret_ref: node_expand_secret_ref.clone(),
            node_publish_secret_ref: node_publish_secret_ref.clone(),
            node_stage_secret_ref: node_stage_secret_ref.clone(),
            ..Default::default()
        };
        Csi {
            driver: shared(driver),
            volume_handle: volume_handle.as_str().into(),
            fs_type: shared_opt(fs_type),
            read_only: *read_only,
            volume_attributes: string_map(volume_attributes),
            rest: (rest != CSIPersistentVolumeSource::default()).then(|| Box::new(rest)),
        }
    }

    fn full(&self) -> CSIPersistentVolumeSource {
        let rest = self.rest.as_deref().cloned().unwrap_or_default();
        CSIPersistentVolumeSource {
            driver: self.driver.to_string(),
            volume_handle: self.volume_handle.to_string(),
            fs_type: string(&self.fs_type),
            read_only: self.read_only,
            volume_attributes: to_string_map(&self.volume_attributes),
            ..rest
        }
    }
}

impl Part<PersistentVolumeStatus> for Status {
    fn of(status: &PersistentVolumeStatus) -> Status {
        let PersistentVolumeStatus { last_phase_transition_time, message, phase, reason } = status;
        let rest = PersistentVolumeStatus { message: message.clone(), reason: reason.clone(), ..Default::default() };
        Status {
            phase: shared_opt(phase),
            last_phase_transition_time: last_phase_transition_time.clone(),
            rest: (rest != PersistentVolumeStatus::default()).then(|| Box::new(rest)),
        }
    }

    fn full(&self) -> PersistentVolumeStatus {
        let rest = self.rest.as_deref().cloned().unwrap_or_default();
        PersistentVolumeStatus {
            phase: string(&self.phase),
            last_phase_transition_time: self.last_phase_transition_time.clone(),
            ..rest
        }
    }
}

/// An object reference (a volume's claim, a content's snapshot): kind, API version and namespace shared.
#[derive(Debug, Clone, PartialEq)]
pub struct Reference {
    api_version: Option<Arc<str>>,
    kind: Option<Arc<str>>,
    namespace: Option<Arc<str>>,
    name: Option<Box<str>>,
    uid: Option<Uid>,
    resource_version: Option<Version>,
    field_path: Option<Box<str>>,
}

impl Reference {
    pub fn of(reference: &ObjectReference) -> Reference {
        let ObjectReference { api_version, field_path, kind, name, namespace, resource_version, uid } = reference;
        Reference {
            api_version: shared_opt(api_version),
            kind: shared_opt(kind),
            namespace: shared_opt(namespace),
            name: text(name),
            uid: uid_of(uid),
            resource_version: version(resource_version),
            field_path: text(field_path),
        }
    }

    pub fn full(&self) -> ObjectReference {
        ObjectReference {
            api_version: string(&self.api_version),
            field_path: string(&self.field_path),
            kind: string(&self.kind),
            name: string(&self.name),
            namespace: string(&self.namespace),
            resource_version: version_text(&self.resource_version),
            uid: uid_text(&self.uid),
        }
    }
}
