//! The CreateVolume request for a claim (external-provisioner pkg/controller/controller.go, `prepareProvision`).
//!
//! Built in two steps, in upstream's order of checks, so that the controller can do its reads in between:
//! [`create_volume_plan`] (capabilities, selector, name, fsType, size, capabilities per access mode), then — after
//! the content source, topology, secrets and VolumeAttributesClass have been read — [`create_volume_request`].

use std::collections::BTreeMap;

use csi_client::capabilities::{ControllerCapability, PluginService};
use csi_client::proto::{
    CapacityRange, CreateVolumeRequest, TopologyRequirement, VolumeCapability, VolumeContentSource,
};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::{StorageClass, VolumeAttributesClass};

use super::access_modes::volume_capabilities;
use super::data_source::{ContentKind, DataSource, content_kind};
use super::names::RESOURCE_STORAGE;
use super::parameters::{add_extra_create_metadata, create_volume_parameters, fs_type};
use super::provisioner::Provisioner;
use super::refusal::Refusal;
use super::secrets::Credentials;
use sidecar_runtime::quantity::quantity_bytes;

/// The CreateVolume `name` (and PV name): `<prefix>-<uid>`, or with a UUID length N ≥ 0 the UID without dashes cut to N
/// characters (external-provisioner `makeVolumeName`). This name makes retries idempotent.
pub fn volume_name(prefix: &str, claim_uid: &str, uuid_length: i64) -> Result<String, String> {
    if prefix.is_empty() {
        return Err("volume name prefix cannot be of length 0".to_string());
    }
    if claim_uid.is_empty() {
        return Err("corrupted PVC object, it is missing UID".to_string());
    }
    if uuid_length == -1 {
        return Ok(format!("{prefix}-{claim_uid}"));
    }
    let compact: String = claim_uid.chars().filter(|c| *c != '-').collect();
    // Upstream crashes on an out-of-range length; refuse instead.
    let cut = usize::try_from(uuid_length)
        .ok()
        .and_then(|n| compact.get(..n))
        .ok_or_else(|| format!("volume name UUID length {uuid_length} does not fit the claim UID {claim_uid}"))?;
    Ok(format!("{prefix}-{cut}"))
}

/// Everything about the request that needs no API read.
#[derive(Clone, Debug, PartialEq)]
pub struct CreateVolumePlan {
    /// CreateVolume `name` and PV name.
    pub volume_name: String,
    /// The fsType for Mount capabilities and `spec.csi.fsType` (possibly empty).
    pub fs_type: String,
    /// The claim's storage request in bytes.
    pub required_bytes: i64,
    pub volume_capabilities: Vec<VolumeCapability>,
    /// A snapshot or clone source the controller must check and turn into a content source.
    pub content: Option<(ContentKind, DataSource)>,
    /// The claim's VolumeAttributesClass (gate on, name non-empty); the controller reads it.
    pub volume_attributes_class: Option<String>,
}

/// The first step: checks that need no API reads, in upstream's order. `data_source` comes from
/// [`claim_data_source`](super::data_source::claim_data_source).
pub fn create_volume_plan(
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    provisioner: &Provisioner,
    data_source: Option<&DataSource>,
) -> Result<CreateVolumePlan, Refusal> {
    let claim_name = claim.metadata.name.as_deref().unwrap_or_default();
    let content = match data_source {
        Some(source) => Some((content_kind(source, claim_name)?, source.clone())),
        None => None,
    };
    let spec = claim.spec.clone().unwrap_or_default();
    let volume_attributes_class = spec
        .volume_attributes_class_name
        .clone()
        .filter(|name| provisioner.features.volume_attributes_class && !name.is_empty());

    check_capabilities(provisioner, content.as_ref().map(|(kind, _)| *kind), volume_attributes_class.is_some())?;

    if spec.selector.is_some() {
        return Err(Refusal::finished("claim Selector is not supported"));
    }
    let volume_name = volume_name(
        &provisioner.volume_name_prefix,
        claim.metadata.uid.as_deref().unwrap_or_default(),
        provisioner.volume_name_uuid_length,
    )
    .map_err(Refusal::finished)?;

    let empty = BTreeMap::new();
    let parameters = class.parameters.as_ref().unwrap_or(&empty);
    let fs_type = fs_type(parameters, &provisioner.default_fs_type).map_err(|e| Refusal::finished(e.to_string()))?;

    let required_bytes = match spec.resources.as_ref().and_then(|r| r.requests.as_ref()?.get(RESOURCE_STORAGE)) {
        Some(quantity) => quantity_bytes(quantity).map_err(|e| Refusal::finished(e.to_string()))?,
        None => 0,
    };

    let mount_options = class.mount_options.as_deref().unwrap_or_default();
    let single_node_multi_writer = provisioner.has(ControllerCapability::SingleNodeMultiWriter);
    let volume_capabilities = volume_capabilities(claim, mount_options, &fs_type, single_node_multi_writer)
        .map_err(|e| Refusal::finished(e.to_string()))?;

    Ok(CreateVolumePlan { volume_name, fs_type, required_bytes, volume_capabilities, content, volume_attributes_class })
}

/// The driver must offer provisioning (CONTROLLER_SERVICE, CREATE_DELETE_VOLUME), and whatever the claim asks for
/// beyond it: snapshots, clones, a VolumeAttributesClass (external-provisioner `checkDriverCapabilities`).
fn check_capabilities(
    provisioner: &Provisioner,
    content: Option<ContentKind>,
    modify_volume: bool,
) -> Result<(), Refusal> {
    let refuse = |text: &str| Err(Refusal::finished(text));
    if !provisioner.plugin_capabilities.has(PluginService::ControllerService) {
        return refuse(
            "CSI driver does not support dynamic provisioning: plugin CONTROLLER_SERVICE capability is not reported",
        );
    }
    if !provisioner.has(ControllerCapability::CreateDeleteVolume) {
        return refuse(
            "CSI driver does not support dynamic provisioning: controller CREATE_DELETE_VOLUME capability is not reported",
        );
    }
    if content == Some(ContentKind::Snapshot) && !provisioner.has(ControllerCapability::CreateDeleteSnapshot) {
        return refuse(
            "CSI driver does not support snapshot restore: controller CREATE_DELETE_SNAPSHOT capability is not reported",
        );
    }
    if content == Some(ContentKind::Clone) && !provisioner.has(ControllerCapability::CloneVolume) {
        return refuse(
            "CSI driver does not support clone operations: controller CLONE_VOLUME capability is not reported",
        );
    }
    if modify_volume && !provisioner.has(ControllerCapability::ModifyVolume) {
        return refuse(
            "CSI driver does not support VolumeAttributesClass: controller MODIFY_VOLUME capability is not reported",
        );
    }
    Ok(())
}

/// What the controller read between the two steps.
#[derive(Debug, Default)]
pub struct ResolvedInputs<'a> {
    /// The provisioner secret's data (see [`credentials`](super::secrets::credentials)).
    pub credentials: Credentials,
    /// For a snapshot or clone in the plan.
    pub volume_content_source: Option<VolumeContentSource>,
    /// From [`accessibility_requirements`](super::topology::accessibility_requirements); ignored unless the driver
    /// supports topology.
    pub accessibility_requirements: Option<TopologyRequirement>,
    /// The class named in the plan, if it could be read.
    pub volume_attributes_class: Option<&'a VolumeAttributesClass>,
}

/// The second step: the request itself. Refuses an unknown reserved parameter and a VolumeAttributesClass of another
/// driver.
pub fn create_volume_request(
    plan: &CreateVolumePlan,
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    provisioner: &Provisioner,
    resolved: ResolvedInputs<'_>,
) -> Result<CreateVolumeRequest, Refusal> {
    let empty = BTreeMap::new();
    let mut parameters = create_volume_parameters(class.parameters.as_ref().unwrap_or(&empty))
        .map_err(|e| Refusal::finished(e.to_string()))?;
    if provisioner.extra_create_metadata {
        add_extra_create_metadata(
            &mut parameters,
            claim.metadata.name.as_deref().unwrap_or_default(),
            claim.metadata.namespace.as_deref().unwrap_or_default(),
            &plan.volume_name,
        );
    }

    let mutable_parameters = match &plan.volume_attributes_class {
        None => Default::default(),
        Some(name) => {
            let Some(vac) = resolved.volume_attributes_class else {
                return Err(Refusal::no_change(format!("volumeattributesclasses.storage.k8s.io \"{name}\" not found")));
            };
            if vac.driver_name != provisioner.driver_name {
                return Err(Refusal::finished(format!(
                    "VAC {name} referenced in PVC is for driver {} which does not match driver name {}",
                    vac.driver_name, provisioner.driver_name
                )));
            }
            vac.parameters.clone().unwrap_or_default().into_iter().collect()
        }
    };

    Ok(CreateVolumeRequest {
        name: plan.volume_name.clone(),
        capacity_range: Some(CapacityRange { required_bytes: plan.required_bytes, limit_bytes: 0 }),
        volume_capabilities: plan.volume_capabilities.clone(),
        parameters,
        secrets: resolved.credentials.into_map(),
        volume_content_source: plan.content.as_ref().and(resolved.volume_content_source),
        accessibility_requirements: resolved.accessibility_requirements.filter(|_| provisioner.supports_topology()),
        mutable_parameters,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeSet, HashMap};

    use csi_client::capabilities::{ControllerCapabilities, PluginCapabilities};
    use csi_client::proto::volume_capability::access_mode::Mode;
    use csi_client::proto::volume_capability::{AccessMode, AccessType, BlockVolume, MountVolume};
    use csi_client::proto::{Topology, volume_content_source};
    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::{PersistentVolumeClaimSpec, Secret, VolumeResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

    use super::*;
    use crate::translate::refusal::{ProvisioningState, RefusalKind};
    use crate::translate::secrets::credentials;

    const DRIVER: &str = "hostpath.csi.k8s.io";
    const UID: &str = "2a3f9c1e-7d4b-4e8a-9f01-23456789abcd";

    fn provisioner(controller: &[ControllerCapability]) -> Provisioner {
        let mut p = Provisioner::new(DRIVER);
        p.plugin_capabilities = PluginCapabilities {
            services: BTreeSet::from([PluginService::ControllerService, PluginService::VolumeAccessibilityConstraints]),
            ..Default::default()
        };
        p.controller_capabilities = ControllerCapabilities(controller.iter().copied().collect());
        p
    }

    fn basic() -> Provisioner {
        provisioner(&[ControllerCapability::CreateDeleteVolume])
    }

    fn claim() -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("data".into()),
                namespace: Some("apps".into()),
                uid: Some(UID.into()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(vec!["ReadWriteOnce".into()]),
                resources: Some(VolumeResourceRequirements {
                    requests: Some(BTreeMap::from([("storage".to_string(), Quantity("1Gi".into()))])),
                    limits: None,
                }),
                storage_class_name: Some("fast".into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn class(parameters: &[(&str, &str)]) -> StorageClass {
        StorageClass {
            metadata: ObjectMeta { name: Some("fast".into()), ..Default::default() },
            provisioner: DRIVER.into(),
            parameters: Some(parameters.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            mount_options: Some(vec!["noatime".into()]),
            ..Default::default()
        }
    }

    fn with(claim: PersistentVolumeClaim, edit: impl FnOnce(&mut PersistentVolumeClaimSpec)) -> PersistentVolumeClaim {
        let mut claim = claim;
        edit(claim.spec.as_mut().unwrap());
        claim
    }

    fn snapshot_source() -> DataSource {
        DataSource {
            kind: "VolumeSnapshot".into(),
            name: "snap".into(),
            api_group: "snapshot.storage.k8s.io".into(),
            namespace: "apps".into(),
        }
    }

    fn clone_source() -> DataSource {
        DataSource {
            kind: "PersistentVolumeClaim".into(),
            name: "src".into(),
            api_group: "".into(),
            namespace: "apps".into(),
        }
    }

    #[test]
    fn volume_names() {
        // (rule, prefix, uid, length, result)
        let table = [
            ("8: default: prefix-uid", "pvc", UID, -1, Ok(format!("pvc-{UID}"))),
            ("8: custom prefix", "vol", UID, -1, Ok(format!("vol-{UID}"))),
            ("8: uuid length cuts the dashless uid", "pvc", UID, 8, Ok("pvc-2a3f9c1e".to_string())),
            (
                "8: uuid length 32 keeps the dashless uid",
                "pvc",
                UID,
                32,
                Ok("pvc-2a3f9c1e7d4b4e8a9f0123456789abcd".to_string()),
            ),
            ("8: uuid length 0", "pvc", UID, 0, Ok("pvc-".to_string())),
            ("8: empty prefix refused", "", UID, -1, Err("volume name prefix cannot be of length 0".to_string())),
            ("8: missing uid refused", "pvc", "", -1, Err("corrupted PVC object, it is missing UID".to_string())),
            (
                "8: too long a length refused (upstream crashes)",
                "pvc",
                UID,
                33,
                Err(format!("volume name UUID length 33 does not fit the claim UID {UID}")),
            ),
            (
                "8: negative length refused (upstream crashes)",
                "pvc",
                UID,
                -2,
                Err(format!("volume name UUID length -2 does not fit the claim UID {UID}")),
            ),
        ];
        for (rule, prefix, uid, length, want) in table {
            assert_eq!(volume_name(prefix, uid, length), want, "{rule}");
        }
    }

    #[test]
    fn plan_refusals_in_upstream_order() {
        use ControllerCapability::*;
        let vac_claim = || with(claim(), |s| s.volume_attributes_class_name = Some("gold".into()));
        let mut no_controller = basic();
        no_controller.plugin_capabilities = PluginCapabilities::default();
        let mut vac_gate_off = basic();
        vac_gate_off.features.volume_attributes_class = false;
        let mut uuid_too_long = basic();
        uuid_too_long.volume_name_uuid_length = 40;
        // (rule, claim, class, provisioner, source, refusal message or Ok)
        type Row = (
            &'static str,
            PersistentVolumeClaim,
            StorageClass,
            Provisioner,
            Option<DataSource>,
            Result<(), &'static str>,
        );
        let table: Vec<Row> = vec![
            (
                "a driver without CONTROLLER_SERVICE",
                claim(),
                class(&[]),
                no_controller,
                None,
                Err(
                    "CSI driver does not support dynamic provisioning: plugin CONTROLLER_SERVICE capability is not reported",
                ),
            ),
            (
                "a driver without CREATE_DELETE_VOLUME",
                claim(),
                class(&[]),
                provisioner(&[]),
                None,
                Err(
                    "CSI driver does not support dynamic provisioning: controller CREATE_DELETE_VOLUME capability is not reported",
                ),
            ),
            (
                "51: snapshot needs CREATE_DELETE_SNAPSHOT",
                claim(),
                class(&[]),
                basic(),
                Some(snapshot_source()),
                Err(
                    "CSI driver does not support snapshot restore: controller CREATE_DELETE_SNAPSHOT capability is not reported",
                ),
            ),
            (
                "51: snapshot with the capability",
                claim(),
                class(&[]),
                provisioner(&[CreateDeleteVolume, CreateDeleteSnapshot]),
                Some(snapshot_source()),
                Ok(()),
            ),
            (
                "51: clone needs CLONE_VOLUME",
                claim(),
                class(&[]),
                basic(),
                Some(clone_source()),
                Err("CSI driver does not support clone operations: controller CLONE_VOLUME capability is not reported"),
            ),
            (
                "51: clone with the capability",
                claim(),
                class(&[]),
                provisioner(&[CreateDeleteVolume, CloneVolume]),
                Some(clone_source()),
                Ok(()),
            ),
            (
                "24: VAC needs MODIFY_VOLUME",
                vac_claim(),
                class(&[]),
                basic(),
                None,
                Err(
                    "CSI driver does not support VolumeAttributesClass: controller MODIFY_VOLUME capability is not reported",
                ),
            ),
            ("24: VAC ignored with the gate off", vac_claim(), class(&[]), vac_gate_off, None, Ok(())),
            (
                "24: empty VAC name is none",
                with(claim(), |s| s.volume_attributes_class_name = Some(String::new())),
                class(&[]),
                basic(),
                None,
                Ok(()),
            ),
            (
                "5: selector refused",
                with(claim(), |s| s.selector = Some(LabelSelector::default())),
                class(&[]),
                basic(),
                None,
                Err("claim Selector is not supported"),
            ),
            (
                "5: capabilities are checked before the selector",
                with(claim(), |s| s.selector = Some(LabelSelector::default())),
                class(&[]),
                provisioner(&[]),
                None,
                Err(
                    "CSI driver does not support dynamic provisioning: controller CREATE_DELETE_VOLUME capability is not reported",
                ),
            ),
            (
                "8: bad uuid length",
                claim(),
                class(&[]),
                uuid_too_long,
                None,
                Err("volume name UUID length 40 does not fit the claim UID 2a3f9c1e-7d4b-4e8a-9f01-23456789abcd"),
            ),
            (
                "14: both fstype keys",
                claim(),
                class(&[("fstype", "ext4"), ("csi.storage.k8s.io/fstype", "xfs")]),
                basic(),
                None,
                Err("fstype specified in parameters with both \"fstype\" and \"csi.storage.k8s.io/fstype\" keys"),
            ),
            (
                "21: unsupported access mode",
                with(claim(), |s| s.access_modes = Some(vec!["Sometimes".into()])),
                class(&[]),
                basic(),
                None,
                Err("unsupported AccessMode combination: [Sometimes]"),
            ),
            (
                "51: wrong snapshot group comes first",
                claim(),
                class(&[]),
                provisioner(&[]),
                Some(DataSource { api_group: "x".into(), ..snapshot_source() }),
                Err("the PVC source does not belong to the right APIGroup. Expected snapshot.storage.k8s.io, Got x"),
            ),
        ];
        for (rule, claim, class, provisioner, source, want) in table {
            let got = create_volume_plan(&claim, &class, &provisioner, source.as_ref());
            match (got, want) {
                (Ok(_), Ok(())) => {}
                (Err(refusal), Err(message)) => {
                    assert_eq!(refusal.message, message, "{rule}");
                    assert_eq!(refusal.state, ProvisioningState::Finished, "{rule}");
                    assert_eq!(refusal.kind, RefusalKind::Failed, "{rule}");
                }
                (got, want) => panic!("{rule}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn external_populator_is_left_alone() {
        let source = DataSource {
            kind: "Populated".into(),
            name: "p".into(),
            api_group: "example.com".into(),
            namespace: "apps".into(),
        };
        let refusal = create_volume_plan(&claim(), &class(&[]), &basic(), Some(&source)).unwrap_err();
        assert!(!refusal.retried(), "51: no retry");
        assert_eq!(refusal.event().unwrap().message, "Assuming an external populator will provision the volume", "51");
    }

    fn mount(mode: Mode, fs_type: &str) -> VolumeCapability {
        VolumeCapability {
            access_mode: Some(AccessMode { mode: mode as i32 }),
            access_type: Some(AccessType::Mount(MountVolume {
                fs_type: fs_type.into(),
                mount_flags: vec!["noatime".into()],
                volume_mount_group: String::new(),
            })),
        }
    }

    #[test]
    fn plan_contents() {
        let mut default_fs = basic();
        default_fs.default_fs_type = "ext4".into();
        let plan = create_volume_plan(&claim(), &class(&[("type", "fast")]), &default_fs, None).unwrap();
        assert_eq!(plan.volume_name, format!("pvc-{UID}"), "8");
        assert_eq!(plan.required_bytes, 1 << 30, "19: required bytes from the request");
        assert_eq!(plan.fs_type, "ext4", "14: --default-fstype");
        assert_eq!(plan.volume_capabilities, vec![mount(Mode::SingleNodeWriter, "ext4")], "20, 22");
        assert_eq!(plan.content, None);

        let snmw =
            provisioner(&[ControllerCapability::CreateDeleteVolume, ControllerCapability::SingleNodeMultiWriter]);
        let plan = create_volume_plan(&claim(), &class(&[("csi.storage.k8s.io/fstype", "xfs")]), &snmw, None).unwrap();
        assert_eq!(plan.volume_capabilities, vec![mount(Mode::SingleNodeMultiWriter, "xfs")], "21: with SNMW");

        let block = with(claim(), |s| {
            s.volume_mode = Some("Block".into());
            s.access_modes = Some(vec!["ReadWriteOncePod".into(), "ReadOnlyMany".into()]);
        });
        let plan = create_volume_plan(&block, &class(&[]), &basic(), None).unwrap();
        let block_cap = |mode: Mode| VolumeCapability {
            access_mode: Some(AccessMode { mode: mode as i32 }),
            access_type: Some(AccessType::Block(BlockVolume {})),
        };
        assert_eq!(
            plan.volume_capabilities,
            vec![block_cap(Mode::SingleNodeWriter), block_cap(Mode::MultiNodeReaderOnly)],
            "20, 22: one Block capability per mode"
        );

        let no_request = with(claim(), |s| s.resources = None);
        assert_eq!(create_volume_plan(&no_request, &class(&[]), &basic(), None).unwrap().required_bytes, 0, "19");

        let plan = create_volume_plan(
            &claim(),
            &class(&[]),
            &provisioner(&[ControllerCapability::CreateDeleteVolume, ControllerCapability::CloneVolume]),
            Some(&clone_source()),
        )
        .unwrap();
        assert_eq!(plan.content, Some((ContentKind::Clone, clone_source())), "26: the controller resolves the clone");
    }

    fn vac(driver: &str) -> VolumeAttributesClass {
        VolumeAttributesClass {
            metadata: ObjectMeta { name: Some("gold".into()), ..Default::default() },
            driver_name: driver.into(),
            parameters: Some(BTreeMap::from([("iops".to_string(), "5000".to_string())])),
        }
    }

    #[test]
    fn request_contents() {
        let mut p = provisioner(&[
            ControllerCapability::CreateDeleteVolume,
            ControllerCapability::ModifyVolume,
            ControllerCapability::CreateDeleteSnapshot,
        ]);
        p.extra_create_metadata = true;
        let claim = with(claim(), |s| s.volume_attributes_class_name = Some("gold".into()));
        let class = class(&[
            ("type", "fast"),
            ("csi.storage.k8s.io/provisioner-secret-name", "s"),
            ("csi.storage.k8s.io/provisioner-secret-namespace", "ns"),
        ]);
        let plan = create_volume_plan(&claim, &class, &p, Some(&snapshot_source())).unwrap();
        let topology = TopologyRequirement {
            requisite: vec![Topology { segments: HashMap::from([("zone".to_string(), "z1".to_string())]) }],
            preferred: vec![],
        };
        let secret = Secret {
            data: Some(BTreeMap::from([("token".to_string(), ByteString(b"t0ken".to_vec()))])),
            ..Default::default()
        };
        let vac = vac(DRIVER);
        let request = create_volume_request(
            &plan,
            &claim,
            &class,
            &p,
            ResolvedInputs {
                credentials: credentials(&secret),
                volume_content_source: Some(super::super::data_source::snapshot_content_source("snap-h")),
                accessibility_requirements: Some(topology.clone()),
                volume_attributes_class: Some(&vac),
            },
        )
        .unwrap();
        assert_eq!(request.name, format!("pvc-{UID}"), "8");
        assert_eq!(
            request.capacity_range,
            Some(CapacityRange { required_bytes: 1 << 30, limit_bytes: 0 }),
            "19: no limit"
        );
        assert_eq!(
            request.parameters.into_iter().collect::<BTreeMap<_, _>>(),
            BTreeMap::from([
                ("type".to_string(), "fast".to_string()),
                ("csi.storage.k8s.io/pvc/name".to_string(), "data".to_string()),
                ("csi.storage.k8s.io/pvc/namespace".to_string(), "apps".to_string()),
                ("csi.storage.k8s.io/pv/name".to_string(), format!("pvc-{UID}")),
            ]),
            "18, 23: reserved keys stripped, extra metadata added"
        );
        assert_eq!(request.secrets, HashMap::from([("token".to_string(), "t0ken".to_string())]), "17");
        assert!(!format!("{:?}", request.secrets.keys()).contains("t0ken"));
        assert_eq!(
            request.volume_content_source.and_then(|s| s.r#type),
            Some(volume_content_source::Type::Snapshot(volume_content_source::SnapshotSource {
                snapshot_id: "snap-h".into()
            })),
            "26"
        );
        assert_eq!(request.accessibility_requirements, Some(topology.clone()), "25");
        assert_eq!(request.mutable_parameters, HashMap::from([("iops".to_string(), "5000".to_string())]), "24");

        // Without the topology capability the requirements are not sent.
        let mut flat = p.clone();
        flat.plugin_capabilities.services.remove(&PluginService::VolumeAccessibilityConstraints);
        let request = create_volume_request(
            &plan,
            &claim,
            &class,
            &flat,
            ResolvedInputs {
                accessibility_requirements: Some(topology),
                volume_attributes_class: Some(&vac),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(request.accessibility_requirements, None, "25: only with VOLUME_ACCESSIBILITY_CONSTRAINTS");
        assert!(!request.parameters.is_empty());
    }

    #[test]
    fn request_refusals() {
        let p = provisioner(&[ControllerCapability::CreateDeleteVolume, ControllerCapability::ModifyVolume]);
        let vac_claim = with(claim(), |s| s.volume_attributes_class_name = Some("gold".into()));
        let other = vac("other.csi");
        let ours = vac(DRIVER);
        // (rule, claim, class, vac, state, message)
        let table = [
            (
                "12: unknown reserved key",
                claim(),
                class(&[("csi.storage.k8s.io/bogus", "1")]),
                None,
                ProvisioningState::Finished,
                "failed to strip CSI Parameters of prefixed keys: found unknown parameter key \"csi.storage.k8s.io/bogus\" with reserved namespace csi.storage.k8s.io/",
            ),
            (
                "24: VAC of another driver",
                vac_claim.clone(),
                class(&[]),
                Some(&other),
                ProvisioningState::Finished,
                "VAC gold referenced in PVC is for driver other.csi which does not match driver name hostpath.csi.k8s.io",
            ),
            (
                "24: VAC could not be read",
                vac_claim.clone(),
                class(&[]),
                None,
                ProvisioningState::NoChange,
                "volumeattributesclasses.storage.k8s.io \"gold\" not found",
            ),
            (
                "12: the reserved key is checked before the VAC",
                vac_claim.clone(),
                class(&[("csi.storage.k8s.io/x", "1")]),
                Some(&ours),
                ProvisioningState::Finished,
                "failed to strip CSI Parameters of prefixed keys: found unknown parameter key \"csi.storage.k8s.io/x\" with reserved namespace csi.storage.k8s.io/",
            ),
        ];
        for (rule, claim, class, vac, state, message) in table {
            let plan = create_volume_plan(&claim, &class, &p, None).unwrap();
            let refusal = create_volume_request(
                &plan,
                &claim,
                &class,
                &p,
                ResolvedInputs { volume_attributes_class: vac, ..Default::default() },
            )
            .unwrap_err();
            assert_eq!((refusal.state, refusal.message.as_str()), (state, message), "{rule}");
        }
    }
}
