//! What happens to a PersistentVolume: the reclaim-policy finalizer and deletion (the upstream library's
//! `handleProtectionFinalizer`, `shouldDelete` and `deleteVolumeOperation`, sig-storage-lib-external-provisioner
//! controller/controller.go; external-provisioner `Delete`).

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::{StorageClass, VolumeAttachment};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::json;

use super::names::{
    ANN_MIGRATED_TO, ANN_PROVISIONED_BY, ANN_PROVISIONER_DELETION_SECRET_NAME,
    ANN_PROVISIONER_DELETION_SECRET_NAMESPACE, EVENT_VOLUME_DELETE, FINALIZER_PV,
};
use super::provisioner::Provisioner;
use super::refusal::{EventType, PlannedEvent};
use super::secrets::{SecretKind, SecretRef, secret_reference};

/// The work a PV needs from this provisioner now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VolumeAction {
    /// Not this driver's volume ([`is_our_volume`]), or nothing to do.
    Nothing,
    /// Reclaim policy Delete, Bound and not being deleted: add `external-provisioner.volume.kubernetes.io/finalizer`.
    AddFinalizer,
    /// Reclaim policy Retain or Recycle: the finalizer must go.
    RemoveFinalizer,
    /// Released with policy Delete (being deleted too, while the finalizer is there): DeleteVolume, delete the PV,
    /// remove the finalizer.
    Delete { volume_handle: String },
}

const PHASE_BOUND: &str = "Bound";
const PHASE_RELEASED: &str = "Released";
const POLICY_DELETE: &str = "Delete";

/// Whether the volume is this driver's: its `provisioned-by` or `migrated-to` annotation names the driver, or it
/// has no `provisioned-by` annotation and `spec.csi.driver` is the driver (statically provisioned).
pub fn is_our_volume(volume: &PersistentVolume, provisioner: &Provisioner) -> bool {
    let annotation = |key: &str| volume.metadata.annotations.as_ref().and_then(|a| a.get(key)).map(String::as_str);
    if annotation(ANN_MIGRATED_TO) == Some(provisioner.driver_name.as_str()) {
        return true;
    }
    match annotation(ANN_PROVISIONED_BY) {
        Some(by) => provisioner.is_known_provisioner(by),
        None => csi_driver(volume) == Some(provisioner.driver_name.as_str()),
    }
}

fn csi_driver(volume: &PersistentVolume) -> Option<&str> {
    volume.spec.as_ref()?.csi.as_ref().map(|csi| csi.driver.as_str())
}

fn has_finalizer(meta: &ObjectMeta, finalizer: &str) -> bool {
    meta.finalizers.iter().flatten().any(|f| f == finalizer)
}

/// The action for `volume`.
pub fn volume_action(volume: &PersistentVolume, provisioner: &Provisioner) -> VolumeAction {
    if !is_our_volume(volume, provisioner) {
        return VolumeAction::Nothing;
    }
    let Some(spec) = volume.spec.as_ref() else { return VolumeAction::Nothing };
    let phase = volume.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or_default();
    let policy = spec.persistent_volume_reclaim_policy.as_deref().unwrap_or_default();
    let deleting = volume.metadata.deletion_timestamp.is_some();
    let finalizer = has_finalizer(&volume.metadata, FINALIZER_PV);

    if policy != POLICY_DELETE {
        return if finalizer { VolumeAction::RemoveFinalizer } else { VolumeAction::Nothing };
    }
    if phase == PHASE_RELEASED && (!deleting || finalizer) {
        let volume_handle = spec.csi.as_ref().map(|c| c.volume_handle.clone()).unwrap_or_default();
        if volume_handle.is_empty() {
            return VolumeAction::Nothing;
        }
        return VolumeAction::Delete { volume_handle };
    }
    if phase == PHASE_BOUND && !deleting && !finalizer {
        return VolumeAction::AddFinalizer;
    }
    VolumeAction::Nothing
}

/// Where DeleteVolume's secrets come from: the PV's deletion-secret annotations, else (older PVs) its StorageClass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeletionSecret {
    /// The PV's annotations say there is none (empty values).
    None,
    /// The PV's annotations name it.
    Named(SecretRef),
    /// A PV from before those annotations: resolve the provisioner secret from its StorageClass.
    FromClass,
}

/// The deletion secret the PV's annotations name.
pub fn deletion_secret(volume: &PersistentVolume) -> DeletionSecret {
    let annotations = volume.metadata.annotations.as_ref();
    let name = annotations.and_then(|a| a.get(ANN_PROVISIONER_DELETION_SECRET_NAME));
    let namespace = annotations.and_then(|a| a.get(ANN_PROVISIONER_DELETION_SECRET_NAMESPACE));
    match (name, namespace) {
        (None, None) => DeletionSecret::FromClass,
        (Some(name), Some(namespace)) if !name.is_empty() && !namespace.is_empty() => {
            DeletionSecret::Named(SecretRef { name: name.clone(), namespace: namespace.clone() })
        }
        _ => DeletionSecret::None,
    }
}

/// The claim as far as the PV's `claimRef` tells (name, namespace, uid), for resolving secret templates of old PVs.
pub fn claim_from_reference(volume: &PersistentVolume) -> Option<PersistentVolumeClaim> {
    let reference = volume.spec.as_ref()?.claim_ref.as_ref()?;
    Some(PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: reference.name.clone(),
            namespace: reference.namespace.clone(),
            uid: reference.uid.clone(),
            ..Default::default()
        },
        ..Default::default()
    })
}

/// The provisioner secret a PV from before the deletion-secret annotations names through its StorageClass (`class`
/// in its CSI form), resolved against the claim its `claimRef` names. A template that cannot be resolved means no
/// secret (the refusal's text is for the log).
pub fn class_deletion_secret(volume: &PersistentVolume, class: &StorageClass) -> Result<Option<SecretRef>, String> {
    let Some(claim) = claim_from_reference(volume) else { return Ok(None) };
    let name = volume.metadata.name.as_deref().unwrap_or_default();
    let parameters = class.parameters.clone().unwrap_or_default();
    secret_reference(SecretKind::Provisioner, &parameters, name, Some(&claim)).map_err(|refusal| refusal.to_string())
}

/// The write that adds (`wanted`) or removes the PV finalizer: a strategic merge patch, since upstream's role grants
/// `patch` on PersistentVolumes but not `update`.
pub fn volume_finalizer_patch(wanted: bool) -> serde_json::Value {
    if wanted {
        json!({"metadata": {"finalizers": [FINALIZER_PV]}})
    } else {
        json!({"metadata": {"$deleteFromPrimitiveList/finalizers": [FINALIZER_PV]}})
    }
}

/// The node a VolumeAttachment of `volume_name` still attaches it to; deletion waits for it (external-provisioner
/// `canDeleteVolume`).
pub fn attached_node<'a>(
    attachments: impl IntoIterator<Item = &'a VolumeAttachment>,
    volume_name: &str,
) -> Option<&'a str> {
    attachments
        .into_iter()
        .find(|a| a.spec.source.persistent_volume_name.as_deref() == Some(volume_name))
        .map(|a| a.spec.node_name.as_str())
}

/// The event while a VolumeAttachment exists: a postponed deletion, not a failure, so a Normal `VolumeDelete`
/// (external-provisioner v6.4.0, #1588: `canDeleteVolume` answers a `VolumeInUseError`, which the library records so
/// and leaves out of the failed-deletion metric). The deletion is retried with backoff.
pub fn waiting_for_detach_event(volume_name: &str, node: &str) -> PlannedEvent {
    PlannedEvent {
        event_type: EventType::Normal,
        reason: EVENT_VOLUME_DELETE,
        message: format!("persistentvolume {volume_name} is still attached to node {node}, waiting for detach"),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::{
        CSIPersistentVolumeSource, ObjectReference, PersistentVolumeSpec, PersistentVolumeStatus,
    };
    use k8s_openapi::api::storage::v1::{VolumeAttachmentSource, VolumeAttachmentSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    const DRIVER: &str = "hostpath.csi.k8s.io";

    struct Pv {
        provisioned_by: Option<&'static str>,
        driver: &'static str,
        policy: &'static str,
        phase: &'static str,
        finalizer: bool,
        deleting: bool,
    }

    const BASE: Pv = Pv {
        provisioned_by: Some(DRIVER),
        driver: DRIVER,
        policy: "Delete",
        phase: "Bound",
        finalizer: true,
        deleting: false,
    };

    fn pv(p: Pv) -> PersistentVolume {
        let mut annotations = BTreeMap::new();
        if let Some(by) = p.provisioned_by {
            annotations.insert(ANN_PROVISIONED_BY.to_string(), by.to_string());
        }
        PersistentVolume {
            metadata: ObjectMeta {
                name: Some("pvc-1".into()),
                annotations: Some(annotations),
                finalizers: p.finalizer.then(|| vec![FINALIZER_PV.to_string()]),
                deletion_timestamp: p.deleting.then_some(Time(Timestamp::UNIX_EPOCH)),
                ..Default::default()
            },
            spec: Some(PersistentVolumeSpec {
                persistent_volume_reclaim_policy: Some(p.policy.into()),
                csi: Some(CSIPersistentVolumeSource {
                    driver: p.driver.into(),
                    volume_handle: "vol-1".into(),
                    ..Default::default()
                }),
                claim_ref: Some(ObjectReference {
                    name: Some("data".into()),
                    namespace: Some("apps".into()),
                    uid: Some("u1".into()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            status: Some(PersistentVolumeStatus { phase: Some(p.phase.into()), ..Default::default() }),
        }
    }

    #[test]
    fn volume_actions() {
        let delete = VolumeAction::Delete { volume_handle: "vol-1".into() };
        use VolumeAction::*;
        // (rule, volume, action)
        let table = [
            ("59: Bound, Delete, no finalizer: add it", Pv { finalizer: false, ..BASE }, AddFinalizer),
            ("59: Bound, Delete, finalizer: nothing", BASE, Nothing),
            ("59: Retain with finalizer: remove it", Pv { policy: "Retain", ..BASE }, RemoveFinalizer),
            ("59: Recycle with finalizer: remove it", Pv { policy: "Recycle", ..BASE }, RemoveFinalizer),
            ("59: Retain without finalizer: nothing", Pv { policy: "Retain", finalizer: false, ..BASE }, Nothing),
            (
                "59: Retain, Released: never deleted",
                Pv { policy: "Retain", phase: "Released", finalizer: false, ..BASE },
                Nothing,
            ),
            ("59: being deleted: no finalizer added", Pv { finalizer: false, deleting: true, ..BASE }, Nothing),
            ("60: Released, Delete: delete", Pv { phase: "Released", ..BASE }, delete.clone()),
            (
                "60: Released, Delete, without finalizer: delete",
                Pv { phase: "Released", finalizer: false, ..BASE },
                delete.clone(),
            ),
            (
                "60: PV deleted first, finalizer still there: delete",
                Pv { phase: "Released", deleting: true, ..BASE },
                delete.clone(),
            ),
            (
                "60: PV being deleted without finalizer: not ours to finish",
                Pv { phase: "Released", deleting: true, finalizer: false, ..BASE },
                Nothing,
            ),
            ("60: Available: nothing", Pv { phase: "Available", ..BASE }, Nothing),
            ("60: Failed: nothing", Pv { phase: "Failed", ..BASE }, Nothing),
            (
                "58: another provisioner's PV",
                Pv { provisioned_by: Some("other.csi"), phase: "Released", ..BASE },
                Nothing,
            ),
            ("58: static PV of this driver", Pv { provisioned_by: None, phase: "Released", ..BASE }, delete.clone()),
            (
                "58: static PV of another driver",
                Pv { provisioned_by: None, driver: "other.csi", phase: "Released", ..BASE },
                Nothing,
            ),
        ];
        let provisioner = Provisioner::new(DRIVER);
        for (rule, volume, want) in table {
            assert_eq!(volume_action(&pv(volume), &provisioner), want, "{rule}");
        }
    }

    #[test]
    fn migrated_volumes_are_ours() {
        let mut volume = pv(Pv { provisioned_by: Some("kubernetes.io/gce-pd"), ..BASE });
        let provisioner = Provisioner::new(DRIVER);
        assert!(!is_our_volume(&volume, &provisioner), "58: an in-tree name we do not migrate");
        volume.metadata.annotations.as_mut().unwrap().insert(ANN_MIGRATED_TO.into(), DRIVER.into());
        assert!(is_our_volume(&volume, &provisioner), "58: migrated-to names the driver");
    }

    #[test]
    fn deletion_secrets() {
        let with = |pairs: &[(&str, &str)]| {
            let mut volume = pv(BASE);
            let annotations = volume.metadata.annotations.as_mut().unwrap();
            annotations.extend(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())));
            volume
        };
        let name = ANN_PROVISIONER_DELETION_SECRET_NAME;
        let namespace = ANN_PROVISIONER_DELETION_SECRET_NAMESPACE;
        // (rule, annotations, secret)
        let table = [
            ("61: no annotations: from the class", with(&[]), DeletionSecret::FromClass),
            ("61: empty values: no secret", with(&[(name, ""), (namespace, "")]), DeletionSecret::None),
            (
                "61: named",
                with(&[(name, "creds"), (namespace, "apps")]),
                DeletionSecret::Named(SecretRef { name: "creds".into(), namespace: "apps".into() }),
            ),
            ("61: half a reference: no secret", with(&[(name, "creds")]), DeletionSecret::None),
        ];
        for (rule, volume, want) in table {
            assert_eq!(deletion_secret(&volume), want, "{rule}");
        }
        let claim = claim_from_reference(&pv(BASE)).unwrap();
        assert_eq!(claim.metadata.name.as_deref(), Some("data"));
        assert_eq!(claim.metadata.namespace.as_deref(), Some("apps"));
    }

    #[test]
    fn attachments_block_deletion() {
        let attachment = |pv: &str, node: &str| VolumeAttachment {
            metadata: ObjectMeta::default(),
            spec: VolumeAttachmentSpec {
                attacher: DRIVER.into(),
                node_name: node.into(),
                source: VolumeAttachmentSource { persistent_volume_name: Some(pv.into()), ..Default::default() },
            },
            status: None,
        };
        let attachments = [attachment("pvc-2", "n2"), attachment("pvc-1", "n1")];
        assert_eq!(attached_node(&attachments, "pvc-1"), Some("n1"), "62");
        assert_eq!(attached_node(&attachments, "pvc-3"), None, "62");
        assert_eq!(
            waiting_for_detach_event("pvc-1", "n1"),
            PlannedEvent {
                event_type: EventType::Normal,
                reason: "VolumeDelete",
                message: "persistentvolume pvc-1 is still attached to node n1, waiting for detach".into(),
            },
            "a postponed deletion is Normal, not a VolumeFailedDelete Warning"
        );
    }

    #[test]
    fn old_volumes_take_their_deletion_secret_from_the_class() {
        let claim_ref = ObjectReference {
            name: Some("data".into()),
            namespace: Some("apps".into()),
            uid: Some("u-1".into()),
            ..Default::default()
        };
        let volume = |claim_ref: Option<ObjectReference>| PersistentVolume {
            metadata: ObjectMeta { name: Some("pvc-1".into()), ..Default::default() },
            spec: Some(PersistentVolumeSpec { claim_ref, ..Default::default() }),
            ..Default::default()
        };
        let class = |parameters: &[(&str, &str)]| StorageClass {
            parameters: Some(parameters.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            ..Default::default()
        };
        let secret = |name: &str, namespace: &str| SecretRef { name: name.into(), namespace: namespace.into() };
        let name_key = "csi.storage.k8s.io/provisioner-secret-name";
        let namespace_key = "csi.storage.k8s.io/provisioner-secret-namespace";
        // (rule, volume, class, result)
        let table = [
            ("61: no secret in the class", volume(Some(claim_ref.clone())), class(&[]), Ok(None)),
            (
                "61: templates resolved against the claimRef",
                volume(Some(claim_ref.clone())),
                class(&[(name_key, "${pvc.name}-key"), (namespace_key, "${pvc.namespace}")]),
                Ok(Some(secret("data-key", "apps"))),
            ),
            (
                "61: the PV name template",
                volume(Some(claim_ref.clone())),
                class(&[(name_key, "${pv.name}"), (namespace_key, "kube-system")]),
                Ok(Some(secret("pvc-1", "kube-system"))),
            ),
            ("61: no claimRef, no claim to resolve against", volume(None), class(&[(name_key, "s")]), Ok(None)),
        ];
        for (rule, volume, class, want) in table {
            assert_eq!(class_deletion_secret(&volume, &class), want, "{rule}");
        }
        let half = class(&[(name_key, "only-a-name")]);
        assert!(class_deletion_secret(&volume(Some(claim_ref)), &half).is_err(), "61: a name without a namespace");
    }

    #[test]
    fn the_volume_finalizer_is_written_with_a_strategic_merge_patch() {
        assert_eq!(volume_finalizer_patch(true), json!({"metadata": {"finalizers": [FINALIZER_PV]}}));
        assert_eq!(
            volume_finalizer_patch(false),
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": [FINALIZER_PV]}})
        );
    }
}
