//! Objects for the tables of this module's tests.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, ObjectReference, PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeClaimStatus, PersistentVolumeSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use snapshot_api::names::ANN_IS_DEFAULT_CLASS;
use snapshot_api::{
    DeletionPolicy, VolumeSnapshot, VolumeSnapshotClass, VolumeSnapshotClassFields, VolumeSnapshotContent,
    VolumeSnapshotContentSource, VolumeSnapshotContentSpec, VolumeSnapshotSource, VolumeSnapshotSpec,
};

pub const DRIVER: &str = "hostpath.csi.k8s.io";

pub fn time(second: i64) -> Time {
    Time(Timestamp::from_second(second).unwrap())
}

fn snapshot(namespace: &str, name: &str, uid: &str, source: VolumeSnapshotSource) -> VolumeSnapshot {
    let mut vs = VolumeSnapshot::new(name, VolumeSnapshotSpec { source, volume_snapshot_class_name: None });
    vs.metadata.namespace = Some(namespace.into());
    vs.metadata.uid = Some(uid.into());
    vs.metadata.resource_version = Some("7".into());
    vs
}

/// A dynamic snapshot of `claim`, without class, status or finalizers.
pub fn snapshot_of_claim(namespace: &str, name: &str, uid: &str, claim: &str) -> VolumeSnapshot {
    let source = VolumeSnapshotSource { persistent_volume_claim_name: Some(claim.into()), ..Default::default() };
    snapshot(namespace, name, uid, source)
}

/// A snapshot of a pre-provisioned content.
pub fn snapshot_of_content(namespace: &str, name: &str, uid: &str, content: &str) -> VolumeSnapshot {
    let source = VolumeSnapshotSource { volume_snapshot_content_name: Some(content.into()), ..Default::default() };
    snapshot(namespace, name, uid, source)
}

#[derive(Clone, Copy)]
pub enum ContentSourceKind {
    /// `source.volumeHandle`: dynamic.
    Volume,
    /// `source.snapshotHandle`: pre-provisioned.
    Snapshot,
}

/// A content named `name` pointing at `ref_namespace/ref_name` (UID `ref_uid`, empty = unset), policy Delete.
pub fn content_for(
    name: &str,
    ref_namespace: &str,
    ref_name: &str,
    ref_uid: &str,
    kind: ContentSourceKind,
) -> VolumeSnapshotContent {
    let source = match kind {
        ContentSourceKind::Volume => {
            VolumeSnapshotContentSource { volume_handle: Some("vol-1".into()), ..Default::default() }
        }
        ContentSourceKind::Snapshot => {
            VolumeSnapshotContentSource { snapshot_handle: Some("snap-1".into()), ..Default::default() }
        }
    };
    let mut content = VolumeSnapshotContent::new(
        name,
        VolumeSnapshotContentSpec {
            volume_snapshot_ref: ObjectReference {
                namespace: Some(ref_namespace.into()),
                name: Some(ref_name.into()),
                uid: (!ref_uid.is_empty()).then(|| ref_uid.into()),
                ..Default::default()
            },
            deletion_policy: DeletionPolicy::Delete,
            driver: DRIVER.into(),
            volume_snapshot_class_name: None,
            source,
            source_volume_mode: None,
        },
    );
    content.metadata.resource_version = Some("3".into());
    content
}

/// A class of `driver`; `default` sets the default-class annotation to `"true"`.
pub fn class(name: &str, driver: &str, default: Option<&str>, parameters: &[(&str, &str)]) -> VolumeSnapshotClass {
    let mut class = VolumeSnapshotClass::new(
        name,
        VolumeSnapshotClassFields {
            driver: driver.into(),
            parameters: (!parameters.is_empty())
                .then(|| parameters.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            deletion_policy: DeletionPolicy::Delete,
        },
    );
    if let Some(value) = default {
        class.metadata.annotations = Some(BTreeMap::from([(ANN_IS_DEFAULT_CLASS.to_string(), value.to_string())]));
    }
    class
}

/// A claim in phase `phase` bound (by spec) to `volume`.
pub fn claim(namespace: &str, name: &str, uid: &str, volume: &str, phase: &str) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            namespace: Some(namespace.into()),
            name: Some(name.into()),
            uid: Some(uid.into()),
            resource_version: Some("11".into()),
            ..Default::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            volume_name: (!volume.is_empty()).then(|| volume.into()),
            ..Default::default()
        }),
        status: Some(PersistentVolumeClaimStatus { phase: Some(phase.into()), ..Default::default() }),
    }
}

/// A CSI volume of `DRIVER` with handle `vol-1`, bound to `namespace/claim` (UID `claim_uid`, empty = unset).
pub fn csi_volume(name: &str, namespace: &str, claim: &str, claim_uid: &str) -> PersistentVolume {
    PersistentVolume {
        metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
        spec: Some(PersistentVolumeSpec {
            claim_ref: Some(ObjectReference {
                namespace: Some(namespace.into()),
                name: Some(claim.into()),
                uid: (!claim_uid.is_empty()).then(|| claim_uid.into()),
                ..Default::default()
            }),
            csi: Some(CSIPersistentVolumeSource {
                driver: DRIVER.into(),
                volume_handle: "vol-1".into(),
                ..Default::default()
            }),
            volume_mode: Some("Filesystem".into()),
            ..Default::default()
        }),
        status: None,
    }
}
