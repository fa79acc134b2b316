//! The PersistentVolume written for a created volume (external-provisioner pkg/controller/controller.go, `Provision`).

use std::collections::BTreeMap;

use csi_client::proto::Volume;
use csi_client::proto::volume_capability::access_mode::Mode;
use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, ObjectReference, PersistentVolume, PersistentVolumeClaim, PersistentVolumeSpec,
    SecretReference,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::access_modes::is_block;
use super::claim_filter::claim_class_name;
use super::create_volume::CreateVolumePlan;
use super::names::{
    ANN_CONTROLLER_MODIFY_SECRET_NAME, ANN_CONTROLLER_MODIFY_SECRET_NAMESPACE, ANN_PROVISIONED_BY,
    ANN_PROVISIONER_DELETION_SECRET_NAME, ANN_PROVISIONER_DELETION_SECRET_NAMESPACE, FINALIZER_PV,
    KIND_PERSISTENT_VOLUME_CLAIM, RESOURCE_STORAGE, VOLUME_ATTRIBUTE_PROVISIONER_IDENTITY,
};
use super::provisioner::Provisioner;
use super::refusal::{ProvisioningState, Refusal};
use super::secrets::{SecretRef, SecretReferences};
use super::topology::volume_node_affinity;
use sidecar_runtime::quantity::binary_si_quantity;

/// A created volume that cannot be used: the controller deletes it (DeleteVolume with the provisioner secret, up to
/// five tries within one `--timeout`) and CreateVolume is tried again: a volume smaller than asked for, or without the
/// content source asked for. An answer without a volume id names nothing to delete or record: CreateVolume is
/// only tried again, under the same name, until the driver names the volume it made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VolumeRejection {
    EmptyVolumeId,
    CapacityTooSmall { created: i64, requested: i64 },
    ContentSourceMissing,
}

impl VolumeRejection {
    /// Whether the volume goes (DeleteVolume) before CreateVolume is tried again: not when it has no id.
    pub fn needs_cleanup(&self) -> bool {
        !matches!(self, VolumeRejection::EmptyVolumeId)
    }

    /// The refusal (`InBackground`), naming the orphan when the cleanup failed with `cleanup_error`.
    pub fn refusal(&self, volume_name: &str, cleanup_error: Option<&str>) -> Refusal {
        let (mut message, cleanup) = match self {
            // The driver may hold a volume under the CreateVolume name; the claim stays in flight until it says.
            VolumeRejection::EmptyVolumeId => ("the driver returned an empty volume id".to_string(), "cleanup"),
            VolumeRejection::CapacityTooSmall { created, requested } => {
                (format!("created volume capacity {created} less than requested capacity {requested}"), "Cleanup")
            }
            VolumeRejection::ContentSourceMissing => ("volume content source missing".to_string(), "cleanup"),
        };
        if let Some(error) = cleanup_error {
            message.push_str(&format!(". {cleanup} of volume {volume_name} failed, volume is orphaned: {error}"));
        }
        Refusal::failed(ProvisioningState::InBackground, message)
    }
}

/// The PV for `volume`, pre-bound to the claim so that the cluster's binder completes the bind.
///
/// Capacity is the driver's, or the request when the driver says 0 (CSI: unknown); an empty volume id, a smaller
/// capacity, or no content source when the claim has a data source, rejects the volume.
pub fn persistent_volume(
    volume: &Volume,
    plan: &CreateVolumePlan,
    secrets: &SecretReferences,
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    provisioner: &Provisioner,
) -> Result<PersistentVolume, VolumeRejection> {
    if volume.volume_id.is_empty() {
        return Err(VolumeRejection::EmptyVolumeId);
    }
    let capacity = match volume.capacity_bytes {
        0 => plan.required_bytes,
        created if created < plan.required_bytes => {
            return Err(VolumeRejection::CapacityTooSmall { created, requested: plan.required_bytes });
        }
        created => created,
    };
    let spec = claim.spec.clone().unwrap_or_default();
    let cross_namespace_source = provisioner.features.cross_namespace_volume_data_source
        && spec.data_source_ref.as_ref().and_then(|r| r.namespace.as_deref()).is_some_and(|n| !n.is_empty());
    if (spec.data_source.is_some() || cross_namespace_source) && volume.content_source.is_none() {
        return Err(VolumeRejection::ContentSourceMissing);
    }

    let mut volume_attributes =
        BTreeMap::from([(VOLUME_ATTRIBUTE_PROVISIONER_IDENTITY.to_string(), provisioner.identity.clone())]);
    volume_attributes.extend(volume.volume_context.iter().map(|(k, v)| (k.clone(), v.clone())));

    // Read-only only when the single capability is MULTI_NODE_READER_ONLY and the flag asks for it.
    let read_only = provisioner.controller_publish_readonly
        && matches!(plan.volume_capabilities.as_slice(), [only]
            if only.access_mode.is_some_and(|m| m.mode == Mode::MultiNodeReaderOnly as i32));

    let reference = |r: &Option<SecretRef>| r.as_ref().map(SecretReference::from);
    let csi = CSIPersistentVolumeSource {
        driver: provisioner.driver_name.clone(),
        volume_handle: volume.volume_id.clone(),
        volume_attributes: Some(volume_attributes),
        fs_type: Some(plan.fs_type.clone()).filter(|f| !f.is_empty() && !is_block(claim)),
        read_only: read_only.then_some(true),
        controller_publish_secret_ref: reference(&secrets.controller_publish),
        node_stage_secret_ref: reference(&secrets.node_stage),
        node_publish_secret_ref: reference(&secrets.node_publish),
        controller_expand_secret_ref: reference(&secrets.controller_expand),
        node_expand_secret_ref: reference(&secrets.node_expand),
    };

    let deletion = secrets.provisioner.clone().unwrap_or(SecretRef { namespace: String::new(), name: String::new() });
    let mut annotations = BTreeMap::from([
        (ANN_PROVISIONER_DELETION_SECRET_NAME.to_string(), deletion.name),
        (ANN_PROVISIONER_DELETION_SECRET_NAMESPACE.to_string(), deletion.namespace),
        (ANN_PROVISIONED_BY.to_string(), class.provisioner.clone()),
    ]);
    if let Some(modify) = &secrets.controller_modify {
        annotations.insert(ANN_CONTROLLER_MODIFY_SECRET_NAME.to_string(), modify.name.clone());
        annotations.insert(ANN_CONTROLLER_MODIFY_SECRET_NAMESPACE.to_string(), modify.namespace.clone());
    }

    let volume_attributes_class_name = spec
        .volume_attributes_class_name
        .clone()
        .filter(|n| provisioner.features.volume_attributes_class && !n.is_empty());

    Ok(PersistentVolume {
        metadata: ObjectMeta {
            name: Some(plan.volume_name.clone()),
            annotations: Some(annotations),
            finalizers: Some(vec![FINALIZER_PV.to_string()]),
            ..Default::default()
        },
        spec: Some(PersistentVolumeSpec {
            access_modes: spec.access_modes.clone(),
            capacity: Some(BTreeMap::from([(RESOURCE_STORAGE.to_string(), binary_si_quantity(capacity))])),
            claim_ref: Some(claim_reference(claim)),
            csi: Some(csi),
            mount_options: class.mount_options.clone(),
            node_affinity: if provisioner.supports_topology() {
                volume_node_affinity(&volume.accessible_topology)
            } else {
                None
            },
            persistent_volume_reclaim_policy: class.reclaim_policy.clone(),
            storage_class_name: Some(claim_class_name(claim)).filter(|c| !c.is_empty()),
            volume_attributes_class_name,
            volume_mode: spec.volume_mode.clone(),
            ..Default::default()
        }),
        status: None,
    })
}

/// A reference to the claim as client-go's `GetReference` writes it: kind, apiVersion, namespace, name, uid and
/// resourceVersion.
pub fn claim_reference(claim: &PersistentVolumeClaim) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".to_string()),
        kind: Some(KIND_PERSISTENT_VOLUME_CLAIM.to_string()),
        name: claim.metadata.name.clone(),
        namespace: claim.metadata.namespace.clone(),
        uid: claim.metadata.uid.clone(),
        resource_version: claim.metadata.resource_version.clone(),
        field_path: None,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeSet, HashMap};

    use csi_client::capabilities::{ControllerCapabilities, ControllerCapability, PluginCapabilities, PluginService};
    use csi_client::proto::Topology;
    use k8s_openapi::api::core::v1::{
        NodeSelectorRequirement, PersistentVolumeClaimSpec, TypedLocalObjectReference, TypedObjectReference,
        VolumeResourceRequirements,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    use super::*;
    use crate::translate::create_volume::create_volume_plan;
    use crate::translate::data_source::snapshot_content_source;
    use crate::translate::names::ANN_BETA_STORAGE_CLASS;

    const DRIVER: &str = "hostpath.csi.k8s.io";
    const UID: &str = "2a3f9c1e-7d4b-4e8a-9f01-23456789abcd";
    const GI: i64 = 1 << 30;

    fn provisioner() -> Provisioner {
        let mut p = Provisioner::new(DRIVER);
        p.identity = "1700000000000-42-hostpath.csi.k8s.io".into();
        p.plugin_capabilities = PluginCapabilities {
            services: BTreeSet::from([PluginService::ControllerService, PluginService::VolumeAccessibilityConstraints]),
            ..Default::default()
        };
        p.controller_capabilities = ControllerCapabilities(BTreeSet::from([
            ControllerCapability::CreateDeleteVolume,
            ControllerCapability::ModifyVolume,
        ]));
        p
    }

    fn claim(edit: impl FnOnce(&mut PersistentVolumeClaimSpec)) -> PersistentVolumeClaim {
        let mut spec = PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([("storage".to_string(), Quantity("1Gi".into()))])),
                limits: None,
            }),
            storage_class_name: Some("fast".into()),
            volume_mode: Some("Filesystem".into()),
            ..Default::default()
        };
        edit(&mut spec);
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("data".into()),
                namespace: Some("apps".into()),
                uid: Some(UID.into()),
                resource_version: Some("4711".into()),
                ..Default::default()
            },
            spec: Some(spec),
            ..Default::default()
        }
    }

    fn class(parameters: &[(&str, &str)], reclaim: Option<&str>) -> StorageClass {
        StorageClass {
            metadata: ObjectMeta { name: Some("fast".into()), ..Default::default() },
            provisioner: DRIVER.into(),
            parameters: Some(parameters.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            mount_options: Some(vec!["noatime".into()]),
            reclaim_policy: reclaim.map(str::to_string),
            ..Default::default()
        }
    }

    fn volume(capacity: i64) -> Volume {
        Volume {
            capacity_bytes: capacity,
            volume_id: "vol-123".into(),
            volume_context: HashMap::from([("pool".to_string(), "a".to_string())]),
            content_source: None,
            accessible_topology: vec![Topology { segments: HashMap::from([("zone".to_string(), "z1".to_string())]) }],
        }
    }

    fn secret(namespace: &str, name: &str) -> Option<SecretRef> {
        Some(SecretRef { namespace: namespace.into(), name: name.into() })
    }

    fn build(
        volume: &Volume,
        claim: &PersistentVolumeClaim,
        class: &StorageClass,
        provisioner: &Provisioner,
        secrets: &SecretReferences,
    ) -> Result<PersistentVolume, VolumeRejection> {
        let plan = create_volume_plan(claim, class, provisioner, None).unwrap();
        persistent_volume(volume, &plan, secrets, claim, class, provisioner)
    }

    #[test]
    fn the_volume_as_upstream_writes_it() {
        let claim = claim(|_| {});
        let class = class(&[("csi.storage.k8s.io/fstype", "xfs")], Some("Delete"));
        let secrets = SecretReferences {
            provisioner: secret("ns", "prov"),
            controller_publish: secret("ns", "cp"),
            node_stage: secret("ns", "ns-s"),
            node_publish: secret("ns", "np"),
            controller_expand: secret("ns", "ce"),
            node_expand: secret("ns", "ne"),
            controller_modify: secret("ns", "cm"),
        };
        let pv = build(&volume(2 * GI), &claim, &class, &provisioner(), &secrets).unwrap();
        let sref = |name: &str| Some(SecretReference { name: Some(name.into()), namespace: Some("ns".into()) });
        let want = PersistentVolume {
            metadata: ObjectMeta {
                name: Some(format!("pvc-{UID}")),
                annotations: Some(BTreeMap::from([
                    ("pv.kubernetes.io/provisioned-by".to_string(), DRIVER.to_string()),
                    ("volume.kubernetes.io/provisioner-deletion-secret-name".to_string(), "prov".to_string()),
                    ("volume.kubernetes.io/provisioner-deletion-secret-namespace".to_string(), "ns".to_string()),
                    ("volume.kubernetes.io/controller-modify-secret-name".to_string(), "cm".to_string()),
                    ("volume.kubernetes.io/controller-modify-secret-namespace".to_string(), "ns".to_string()),
                ])),
                finalizers: Some(vec!["external-provisioner.volume.kubernetes.io/finalizer".to_string()]),
                ..Default::default()
            },
            spec: Some(PersistentVolumeSpec {
                access_modes: Some(vec!["ReadWriteOnce".into()]),
                capacity: Some(BTreeMap::from([("storage".to_string(), Quantity("2Gi".into()))])),
                claim_ref: Some(ObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("PersistentVolumeClaim".into()),
                    name: Some("data".into()),
                    namespace: Some("apps".into()),
                    uid: Some(UID.into()),
                    resource_version: Some("4711".into()),
                    field_path: None,
                }),
                csi: Some(CSIPersistentVolumeSource {
                    driver: DRIVER.into(),
                    volume_handle: "vol-123".into(),
                    volume_attributes: Some(BTreeMap::from([
                        (
                            "storage.kubernetes.io/csiProvisionerIdentity".to_string(),
                            "1700000000000-42-hostpath.csi.k8s.io".to_string(),
                        ),
                        ("pool".to_string(), "a".to_string()),
                    ])),
                    fs_type: Some("xfs".into()),
                    read_only: None,
                    controller_publish_secret_ref: sref("cp"),
                    node_stage_secret_ref: sref("ns-s"),
                    node_publish_secret_ref: sref("np"),
                    controller_expand_secret_ref: sref("ce"),
                    node_expand_secret_ref: sref("ne"),
                }),
                mount_options: Some(vec!["noatime".into()]),
                node_affinity: volume_node_affinity(&volume(0).accessible_topology),
                persistent_volume_reclaim_policy: Some("Delete".into()),
                storage_class_name: Some("fast".into()),
                volume_mode: Some("Filesystem".into()),
                ..Default::default()
            }),
            status: None,
        };
        assert_eq!(pv, want, "27, 30, 31, 32");
        let affinity = pv.spec.unwrap().node_affinity.unwrap().required.unwrap().node_selector_terms;
        assert_eq!(
            affinity[0].match_expressions,
            Some(vec![NodeSelectorRequirement {
                key: "zone".into(),
                operator: "In".into(),
                values: Some(vec!["z1".into()])
            }]),
            "30: nodeAffinity from accessible topology"
        );
    }

    type Check = fn(&PersistentVolume) -> bool;

    fn spec(pv: &PersistentVolume) -> &PersistentVolumeSpec {
        pv.spec.as_ref().unwrap()
    }

    fn csi(pv: &PersistentVolume) -> &CSIPersistentVolumeSource {
        spec(pv).csi.as_ref().unwrap()
    }

    fn annotation<'a>(pv: &'a PersistentVolume, key: &str) -> Option<&'a str> {
        pv.metadata.annotations.as_ref().unwrap().get(key).map(String::as_str)
    }

    #[test]
    fn volume_rules() {
        let mut readonly = provisioner();
        readonly.controller_publish_readonly = true;
        let mut flat = provisioner();
        flat.plugin_capabilities.services.remove(&PluginService::VolumeAccessibilityConstraints);
        let mut vac_gate_off = provisioner();
        vac_gate_off.features.volume_attributes_class = false;
        let mut in_tree = class(&[], None);
        in_tree.provisioner = "kubernetes.io/gce-pd".into();
        let rox = claim(|s| s.access_modes = Some(vec!["ReadOnlyMany".into()]));
        let mut driver_context = volume(GI);
        driver_context.volume_context.insert("storage.kubernetes.io/csiProvisionerIdentity".into(), "driver".into());
        let mut beta_class = claim(|s| s.storage_class_name = None);
        beta_class.metadata.annotations =
            Some(BTreeMap::from([(ANN_BETA_STORAGE_CLASS.to_string(), "legacy".to_string())]));

        let p = provisioner();
        let none = SecretReferences::default();
        // (rule, volume, claim, class, provisioner, check)
        let table: Vec<(&str, Volume, PersistentVolumeClaim, StorageClass, &Provisioner, Check)> = vec![
            ("27: capacity 0 → the requested size", volume(0), claim(|_| {}), class(&[], None), &p, |pv| {
                spec(pv).capacity.as_ref().unwrap()["storage"].0 == "1Gi"
            }),
            ("27: capacity in binary SI", volume(GI + 512 * 1024 * 1024), claim(|_| {}), class(&[], None), &p, |pv| {
                spec(pv).capacity.as_ref().unwrap()["storage"].0 == "1536Mi"
            }),
            (
                "9: the driver's volume_context wins on a key collision",
                driver_context,
                claim(|_| {}),
                class(&[], None),
                &p,
                |pv| {
                    csi(pv).volume_attributes.as_ref().unwrap()["storage.kubernetes.io/csiProvisionerIdentity"]
                        == "driver"
                },
            ),
            (
                "30: block volumes have no fsType",
                volume(GI),
                claim(|s| s.volume_mode = Some("Block".into())),
                class(&[("csi.storage.k8s.io/fstype", "ext4")], None),
                &p,
                |pv| csi(pv).fs_type.is_none() && spec(pv).volume_mode.as_deref() == Some("Block"),
            ),
            ("30: empty fsType is omitted", volume(GI), claim(|_| {}), class(&[], None), &p, |pv| {
                csi(pv).fs_type.is_none()
            }),
            (
                "30: --controller-publish-readonly with exactly ROX",
                volume(GI),
                rox.clone(),
                class(&[], None),
                &readonly,
                |pv| csi(pv).read_only == Some(true),
            ),
            ("30: ROX without the flag is not read-only", volume(GI), rox, class(&[], None), &p, |pv| {
                csi(pv).read_only.is_none()
            }),
            (
                "30: ROX plus another mode is not read-only",
                volume(GI),
                claim(|s| s.access_modes = Some(vec!["ReadOnlyMany".into(), "ReadWriteMany".into()])),
                class(&[], None),
                &readonly,
                |pv| csi(pv).read_only.is_none(),
            ),
            ("30: no topology support, no nodeAffinity", volume(GI), claim(|_| {}), class(&[], None), &flat, |pv| {
                spec(pv).node_affinity.is_none()
            }),
            (
                "30: reclaim policy copied from the class",
                volume(GI),
                claim(|_| {}),
                class(&[], Some("Retain")),
                &p,
                |pv| spec(pv).persistent_volume_reclaim_policy.as_deref() == Some("Retain"),
            ),
            (
                "30: class without reclaim policy leaves it to API defaulting",
                volume(GI),
                claim(|_| {}),
                class(&[], None),
                &p,
                |pv| spec(pv).persistent_volume_reclaim_policy.is_none(),
            ),
            (
                "30: volumeAttributesClassName copied",
                volume(GI),
                claim(|s| s.volume_attributes_class_name = Some("gold".into())),
                class(&[], None),
                &p,
                |pv| spec(pv).volume_attributes_class_name.as_deref() == Some("gold"),
            ),
            (
                "30: volumeAttributesClassName not copied with the gate off",
                volume(GI),
                claim(|s| s.volume_attributes_class_name = Some("gold".into())),
                class(&[], None),
                &vac_gate_off,
                |pv| spec(pv).volume_attributes_class_name.is_none(),
            ),
            ("30: storageClassName from the legacy annotation", volume(GI), beta_class, class(&[], None), &p, |pv| {
                spec(pv).storage_class_name.as_deref() == Some("legacy")
            }),
            (
                "31: deletion-secret annotations always written, empty without a secret",
                volume(GI),
                claim(|_| {}),
                class(&[], None),
                &p,
                |pv| {
                    annotation(pv, ANN_PROVISIONER_DELETION_SECRET_NAME) == Some("")
                        && annotation(pv, ANN_PROVISIONER_DELETION_SECRET_NAMESPACE) == Some("")
                },
            ),
            (
                "31: controller-modify annotations only when configured",
                volume(GI),
                claim(|_| {}),
                class(&[], None),
                &p,
                |pv| annotation(pv, ANN_CONTROLLER_MODIFY_SECRET_NAME).is_none(),
            ),
            ("31: provisioned-by is the class's provisioner", volume(GI), claim(|_| {}), in_tree, &p, |pv| {
                annotation(pv, ANN_PROVISIONED_BY) == Some("kubernetes.io/gce-pd")
            }),
            ("30: no secret refs without secrets", volume(GI), claim(|_| {}), class(&[], None), &p, |pv| {
                csi(pv).node_stage_secret_ref.is_none() && csi(pv).controller_publish_secret_ref.is_none()
            }),
        ];
        for (rule, volume, claim, class, provisioner, check) in table {
            let pv = build(&volume, &claim, &class, provisioner, &none).unwrap();
            assert!(check(&pv), "{rule}: {pv:?}");
        }
    }

    #[test]
    fn unusable_volumes_are_rejected() {
        let p = provisioner();
        let restore = claim(|s| {
            s.data_source = Some(TypedLocalObjectReference {
                api_group: Some("snapshot.storage.k8s.io".into()),
                kind: "VolumeSnapshot".into(),
                name: "snap".into(),
            })
        });
        let cross = claim(|s| {
            s.data_source_ref = Some(TypedObjectReference {
                api_group: None,
                kind: "PersistentVolumeClaim".into(),
                name: "src".into(),
                namespace: Some("other".into()),
            })
        });
        let mut cross_gate = provisioner();
        cross_gate.features.cross_namespace_volume_data_source = true;
        let mut restored = volume(GI);
        restored.content_source = Some(snapshot_content_source("h"));
        let plan_of = |claim: &PersistentVolumeClaim| {
            let mut plan = create_volume_plan(&claim_without_source(claim), &class(&[], None), &p, None).unwrap();
            plan.required_bytes = GI;
            plan
        };
        // (rule, volume, claim, provisioner, result)
        type Row<'a> = (&'static str, Volume, PersistentVolumeClaim, &'a Provisioner, Result<(), VolumeRejection>);
        let table: Vec<Row> = vec![
            (
                "an empty volume id",
                Volume { volume_id: String::new(), ..volume(GI) },
                claim(|_| {}),
                &p,
                Err(VolumeRejection::EmptyVolumeId),
            ),
            (
                "an empty volume id is named before a small capacity",
                Volume { volume_id: String::new(), ..volume(GI - 1) },
                claim(|_| {}),
                &p,
                Err(VolumeRejection::EmptyVolumeId),
            ),
            (
                "28: smaller than requested",
                volume(GI - 1),
                claim(|_| {}),
                &p,
                Err(VolumeRejection::CapacityTooSmall { created: GI - 1, requested: GI }),
            ),
            ("28: larger is fine", volume(GI + 1), claim(|_| {}), &p, Ok(())),
            (
                "29: data source without content source",
                volume(GI),
                restore.clone(),
                &p,
                Err(VolumeRejection::ContentSourceMissing),
            ),
            ("29: data source with content source", restored, restore, &p, Ok(())),
            (
                "29: cross-namespace ref needs a content source (gate on)",
                volume(GI),
                cross.clone(),
                &cross_gate,
                Err(VolumeRejection::ContentSourceMissing),
            ),
            ("29: cross-namespace ref is not checked with the gate off", volume(GI), cross, &p, Ok(())),
        ];
        for (rule, volume, claim, provisioner, want) in table {
            let got = persistent_volume(
                &volume,
                &plan_of(&claim),
                &SecretReferences::default(),
                &claim,
                &class(&[], None),
                provisioner,
            );
            assert_eq!(got.map(|_| ()), want, "{rule}");
        }

        // (rule, rejection, cleanup error, message)
        let table = [
            (
                "28: message",
                VolumeRejection::CapacityTooSmall { created: 5, requested: 10 },
                None,
                "created volume capacity 5 less than requested capacity 10",
            ),
            (
                "28: cleanup failure names the orphan",
                VolumeRejection::CapacityTooSmall { created: 5, requested: 10 },
                Some("boom"),
                "created volume capacity 5 less than requested capacity 10. Cleanup of volume pvc-1 failed, volume is orphaned: boom",
            ),
            ("29: message", VolumeRejection::ContentSourceMissing, None, "volume content source missing"),
            ("empty id: message", VolumeRejection::EmptyVolumeId, None, "the driver returned an empty volume id"),
            (
                "29: cleanup failure names the orphan",
                VolumeRejection::ContentSourceMissing,
                Some("boom"),
                "volume content source missing. cleanup of volume pvc-1 failed, volume is orphaned: boom",
            ),
        ];
        for (rule, rejection, cleanup, message) in table {
            let refusal = rejection.refusal("pvc-1", cleanup);
            assert_eq!((refusal.state, refusal.message.as_str()), (ProvisioningState::InBackground, message), "{rule}");
        }

        // (rejection, whether the volume is deleted before the retry)
        let table = [
            (VolumeRejection::EmptyVolumeId, false),
            (VolumeRejection::CapacityTooSmall { created: 5, requested: 10 }, true),
            (VolumeRejection::ContentSourceMissing, true),
        ];
        for (rejection, cleanup) in table {
            assert_eq!(rejection.needs_cleanup(), cleanup, "{rejection:?}");
        }
    }

    fn claim_without_source(claim: &PersistentVolumeClaim) -> PersistentVolumeClaim {
        let mut claim = claim.clone();
        let spec = claim.spec.as_mut().unwrap();
        spec.data_source = None;
        spec.data_source_ref = None;
        claim
    }
}

#[cfg(test)]
#[path = "persistent_volume_prop.rs"]
mod prop_tests;
