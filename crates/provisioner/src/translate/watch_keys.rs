//! Which keys a watch change queues: the rules the controller's watch handlers follow, so that a handler only
//! routes. Claims are queued by UID, as upstream's claim queue is (sig-storage-lib-external-provisioner
//! controller.go, `enqueueClaim`); volumes by name.

use std::fmt;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::VolumeAttachment;
use sidecar_runtime::watch::Change;

use super::claim_filter::claim_class_name;
use super::clone_source::has_clone_protection;
use super::data_source::{DataSource, claim_data_source};
use super::names::{
    ANN_BETA_STORAGE_PROVISIONER, ANN_STORAGE_PROVISIONER, KIND_PERSISTENT_VOLUME_CLAIM, KIND_VOLUME_SNAPSHOT,
    SNAPSHOT_API_GROUP,
};

/// A claim in the queue. The name travels with the UID for the cache lookup (a claim's namespace and name never
/// change, so equality by all three is equality by UID).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ClaimKey {
    pub uid: String,
    pub namespace: String,
    pub name: String,
}

/// `namespace/name`, as logs name a claim.
impl fmt::Display for ClaimKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// The queue key of a claim (none without a UID, namespace and name).
pub fn claim_key(claim: &PersistentVolumeClaim) -> Option<ClaimKey> {
    Some(ClaimKey {
        uid: claim.metadata.uid.clone()?,
        namespace: claim.metadata.namespace.clone()?,
        name: claim.metadata.name.clone()?,
    })
}

/// The claim a PV is bound to: a change of the PV may let that claim drop its provisioning finalizer.
pub fn bound_claim_key(volume: &PersistentVolume) -> Option<ClaimKey> {
    let reference = volume.spec.as_ref()?.claim_ref.as_ref()?;
    Some(ClaimKey {
        uid: reference.uid.clone()?,
        namespace: reference.namespace.clone()?,
        name: reference.name.clone()?,
    })
}

/// Whether a claim's change is worth a sync: it names a provisioner at all (the worker decides whether it is this
/// one), or it is a clone source carrying the clone protection.
pub fn claim_concerns_us(claim: &PersistentVolumeClaim) -> bool {
    let annotations = claim.metadata.annotations.as_ref();
    annotations.is_some_and(|a| a.contains_key(ANN_STORAGE_PROVISIONER) || a.contains_key(ANN_BETA_STORAGE_PROVISIONER))
        || has_clone_protection(claim)
}

/// The claim `claim` clones, as `(namespace, name)`: its clone protection may depend on `claim`'s phase. A
/// cross-namespace source is named whatever the CrossNamespaceVolumeDataSource gate says (with the gate off the
/// claim is refused anyway).
pub fn cloned_claim(claim: &PersistentVolumeClaim) -> Option<(String, String)> {
    let source = claim_data_source(claim, true).ok()??;
    (source.kind == KIND_PERSISTENT_VOLUME_CLAIM && source.api_group.is_empty())
        .then_some((source.namespace, source.name))
}

/// The VolumeSnapshot `claim` restores from: once the claim is deleted, the snapshot's source protection may go
/// (rather than at the next orphan sweep).
pub fn restored_snapshot(claim: &PersistentVolumeClaim) -> Option<DataSource> {
    let source = claim_data_source(claim, true).ok()??;
    (source.kind == KIND_VOLUME_SNAPSHOT && source.api_group == SNAPSHOT_API_GROUP).then_some(source)
}

/// Whether a StorageClass `class` that appears or changes may unblock `claim`: a claim of ours not bound yet that
/// names it.
pub fn waits_for_class(claim: &PersistentVolumeClaim, class: &str) -> bool {
    let pending = claim.spec.as_ref().and_then(|s| s.volume_name.as_deref()).is_none_or(str::is_empty);
    pending && claim_class_name(claim) == class && claim_concerns_us(claim)
}

/// The PV whose VolumeAttachment went away: a detached volume may be deleted now.
pub fn detached_volume(attachment: &VolumeAttachment) -> Option<String> {
    attachment.spec.source.persistent_volume_name.clone()
}

/// Whether a class, CSINode or Node change may change which CSIStorageCapacity objects should exist: a change seen
/// once the caches are filled (the first list is the publisher's starting point).
pub fn may_change_capacity_keys<K>(change: &Change<'_, K>) -> bool {
    matches!(change, Change::Applied { listed: false, .. } | Change::Deleted(_))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use k8s_openapi::api::core::v1::{
        ObjectReference, PersistentVolumeClaimSpec, PersistentVolumeSpec, TypedLocalObjectReference,
    };
    use k8s_openapi::api::storage::v1::{VolumeAttachmentSource, VolumeAttachmentSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::translate::names::FINALIZER_CLONE_PROTECTION;

    /// A claim in `ns` of class `gold`, with the given annotations, finalizers, data source and bound volume.
    fn claim(
        annotations: &[&str],
        finalizers: &[&str],
        source: Option<(&str, Option<&str>)>,
        volume: Option<&str>,
    ) -> PersistentVolumeClaim {
        let map = |keys: &[&str]| keys.iter().map(|k| (k.to_string(), "x".to_string())).collect();
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("c".into()),
                namespace: Some("ns".into()),
                uid: Some("u".into()),
                annotations: Some(map(annotations)),
                finalizers: Some(finalizers.iter().map(|f| f.to_string()).collect()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                storage_class_name: Some("gold".into()),
                volume_name: volume.map(str::to_string),
                data_source: source.map(|(kind, group)| TypedLocalObjectReference {
                    kind: kind.into(),
                    name: "src".into(),
                    api_group: group.map(str::to_string),
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn which_claims_concern_us() {
        // (rule, claim, concerns us)
        let table = [
            ("names a provisioner", claim(&[ANN_STORAGE_PROVISIONER], &[], None, None), true),
            ("names one in the beta annotation", claim(&[ANN_BETA_STORAGE_PROVISIONER], &[], None, None), true),
            ("a clone source with the clone protection", claim(&[], &[FINALIZER_CLONE_PROTECTION], None, None), true),
            ("anything else", claim(&["other"], &[], None, None), false),
        ];
        for (rule, claim, want) in table {
            assert_eq!(claim_concerns_us(&claim), want, "{rule}");
        }
    }

    #[test]
    fn data_sources_that_queue_another_object() {
        let pvc = Some(("PersistentVolumeClaim", None));
        let snapshot = Some(("VolumeSnapshot", Some(SNAPSHOT_API_GROUP)));
        let source = |namespace: &str| DataSource {
            kind: KIND_VOLUME_SNAPSHOT.into(),
            name: "src".into(),
            api_group: SNAPSHOT_API_GROUP.into(),
            namespace: namespace.into(),
        };
        // (rule, data source, cloned claim, restored snapshot)
        let table = [
            ("a clone names its source claim", pvc, Some(("ns".to_string(), "src".to_string())), None),
            ("a restore names its snapshot", snapshot, None, Some(source("ns"))),
            ("a claim kind of another group is no clone", Some(("PersistentVolumeClaim", Some("x.io"))), None, None),
            ("a snapshot kind of another group is no restore", Some(("VolumeSnapshot", Some("x.io"))), None, None),
            ("no data source", None, None, None),
        ];
        for (rule, data_source, cloned, restored) in table {
            let claim = claim(&[], &[], data_source, None);
            assert_eq!(cloned_claim(&claim), cloned, "{rule}");
            assert_eq!(restored_snapshot(&claim), restored, "{rule}");
        }
    }

    #[test]
    fn a_class_change_wakes_its_pending_claims() {
        let ours = [ANN_STORAGE_PROVISIONER];
        // (rule, claim, class that changed, queued)
        let table = [
            ("a pending claim of ours naming the class", claim(&ours, &[], None, None), "gold", true),
            ("an empty volume name is pending", claim(&ours, &[], None, Some("")), "gold", true),
            ("a bound claim", claim(&ours, &[], None, Some("pv")), "gold", false),
            ("another class", claim(&ours, &[], None, None), "silver", false),
            ("a claim naming no provisioner", claim(&[], &[], None, None), "gold", false),
        ];
        for (rule, claim, class, want) in table {
            assert_eq!(waits_for_class(&claim, class), want, "{rule}");
        }
    }

    #[test]
    fn keys_of_volumes_and_attachments() {
        let mut volume = PersistentVolume::default();
        assert_eq!(bound_claim_key(&volume), None, "an unbound PV queues no claim");
        volume.spec = Some(PersistentVolumeSpec {
            claim_ref: Some(ObjectReference {
                uid: Some("u".into()),
                namespace: Some("ns".into()),
                name: Some("c".into()),
                ..Default::default()
            }),
            ..Default::default()
        });
        let key = ClaimKey { uid: "u".into(), namespace: "ns".into(), name: "c".into() };
        assert_eq!(bound_claim_key(&volume).as_ref(), Some(&key), "a bound PV queues its claim");
        assert_eq!(claim_key(&claim(&[], &[], None, None)), Some(key.clone()));
        assert_eq!(key.to_string(), "ns/c");

        let attachment = VolumeAttachment {
            spec: VolumeAttachmentSpec {
                source: VolumeAttachmentSource { persistent_volume_name: Some("pv".into()), ..Default::default() },
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(detached_volume(&attachment).as_deref(), Some("pv"));
    }

    #[test]
    fn capacity_keys_change_only_after_the_first_list() {
        let class = k8s_openapi::api::storage::v1::StorageClass::default();
        // (rule, change, may change the keys)
        let table = [
            ("listed when the watch starts", Change::Applied { old: None, object: &class, listed: true }, false),
            (
                "created or updated",
                Change::Applied { old: Some(Arc::new(class.clone())), object: &class, listed: false },
                true,
            ),
            ("deleted", Change::Deleted(&class), true),
            ("a list complete", Change::Listed, false),
        ];
        for (rule, change, want) in table {
            assert_eq!(may_change_capacity_keys(&change), want, "{rule}");
        }
    }
}
