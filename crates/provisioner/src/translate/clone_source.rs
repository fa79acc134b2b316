//! Cloning a claim: the checks on the source claim and its volume, and when the source's clone-protection finalizer may
//! go (external-provisioner `getPVCSource`, and pkg/controller/clone_controller.go).

use csi_client::proto::VolumeContentSource;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};

use super::claim_filter::claim_class_name;
use super::data_source::{DataSource, refers_to, volume_content_source};
use super::names::{FINALIZER_CLONE_PROTECTION, KIND_PERSISTENT_VOLUME_CLAIM, RESOURCE_STORAGE};
use super::refusal::Refusal;
use sidecar_runtime::quantity::quantity_bytes;

const PHASE_BOUND: &str = "Bound";
const PHASE_PENDING: &str = "Pending";

fn volume_mode(mode: Option<&String>) -> &str {
    mode.map(String::as_str).unwrap_or("Filesystem")
}

fn request_bytes(claim: &PersistentVolumeClaim) -> i64 {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.resources.as_ref()?.requests.as_ref()?.get(RESOURCE_STORAGE))
        .and_then(|q| quantity_bytes(q).ok())
        .unwrap_or(0)
}

/// The content source for cloning `source` into `claim`, after upstream's checks. `source_claim` and
/// `source_volume` are what the API holds (None: not found); `provisioner_name` is the class's provisioner. A check
/// that fails leaves the claim waiting (`NoChange`): the source may still get ready.
pub fn clone_content_source(
    claim: &PersistentVolumeClaim,
    source: &DataSource,
    source_claim: Option<&PersistentVolumeClaim>,
    source_volume: Option<&PersistentVolume>,
    provisioner_name: &str,
) -> Result<VolumeContentSource, Refusal> {
    let refuse = |message: String| Err(Refusal::no_change(message));
    let Some(source_claim) = source_claim else {
        return refuse(format!(
            "error getting PVC {} (namespace \"{}\"): persistentvolumeclaims \"{}\" not found",
            source.name, source.namespace, source.name
        ));
    };
    if source_claim.metadata.deletion_timestamp.is_some() {
        return refuse(format!("the PVC {} is being deleted", source.name));
    }
    let phase = source_claim.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or_default();
    let volume_name = source_claim.spec.as_ref().and_then(|s| s.volume_name.as_deref()).filter(|v| !v.is_empty());
    let Some(volume_name) = volume_name.filter(|_| phase == PHASE_BOUND) else {
        return refuse(format!("the PVC {} not bound", source.name));
    };
    if claim_class_name(claim).is_empty() || claim_class_name(source_claim).is_empty() {
        return refuse("the source PVC and destination PVCs must have a storage class".to_string());
    }
    let (requested, source_size) = (request_bytes(claim), request_bytes(source_claim));
    if requested < source_size {
        return refuse(format!(
            "error, new PVC request must be greater than or equal in size to the specified PVC data source, requested {requested} but source is {source_size}"
        ));
    }
    let Some(volume) = source_volume else {
        return refuse(format!("error getting volume {volume_name} for PVC {}", source.name));
    };
    let spec = volume.spec.clone().unwrap_or_default();
    let Some(csi) = spec.csi.as_ref() else {
        return refuse(format!("the source volume {volume_name} is not a CSI volume"));
    };
    if csi.driver != provisioner_name {
        return refuse(format!(
            "the source volume {volume_name} is of driver {}, the clone would be of {provisioner_name}",
            csi.driver
        ));
    }
    let claim_ref = spec.claim_ref.as_ref();
    if claim_ref.and_then(|r| r.uid.as_deref()) != source_claim.metadata.uid.as_deref() {
        return refuse(format!("the source volume {volume_name} is not bound to PVC {}", source.name));
    }
    if volume.status.as_ref().and_then(|s| s.phase.as_deref()) != Some(PHASE_BOUND) {
        return refuse(format!("the source volume {volume_name} is not Bound"));
    }
    let claim_mode = volume_mode(claim.spec.as_ref().and_then(|s| s.volume_mode.as_ref()));
    let source_mode = volume_mode(source_claim.spec.as_ref().and_then(|s| s.volume_mode.as_ref()));
    if claim_mode != source_mode {
        return refuse(format!(
            "the source PVC and destination PVCs must have the same volume mode for cloning. Source is {source_mode}. Requested is {claim_mode}"
        ));
    }
    Ok(volume_content_source(&csi.volume_handle))
}

/// Whether `claim` carries the clone-protection finalizer.
pub fn has_clone_protection(claim: &PersistentVolumeClaim) -> bool {
    claim.metadata.finalizers.iter().flatten().any(|f| f == FINALIZER_CLONE_PROTECTION)
}

/// Whether a source claim's clone protection may go: it is being deleted and no Pending claim in its namespace clones
/// it.
pub fn clone_protection_releasable<'a>(
    source: &PersistentVolumeClaim,
    claims: impl IntoIterator<Item = &'a PersistentVolumeClaim>,
) -> bool {
    if !has_clone_protection(source) || source.metadata.deletion_timestamp.is_none() {
        return false;
    }
    let namespace = source.metadata.namespace.as_deref().unwrap_or_default();
    let name = source.metadata.name.as_deref().unwrap_or_default();
    !claims.into_iter().any(|claim| {
        let pending = claim.status.as_ref().and_then(|s| s.phase.as_deref()).is_none_or(|p| p == PHASE_PENDING);
        pending && clones_from(claim, namespace, name)
    })
}

/// Whether `claim` clones the claim `namespace/name`.
pub fn clones_from(claim: &PersistentVolumeClaim, namespace: &str, name: &str) -> bool {
    refers_to(claim, KIND_PERSISTENT_VOLUME_CLAIM, "", namespace, name)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use csi_client::proto::volume_content_source::{Type, VolumeSource};
    use k8s_openapi::api::core::v1::{
        CSIPersistentVolumeSource, ObjectReference, PersistentVolumeClaimSpec, PersistentVolumeClaimStatus,
        PersistentVolumeSpec, PersistentVolumeStatus, TypedLocalObjectReference, VolumeResourceRequirements,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    const DRIVER: &str = "hostpath.csi.k8s.io";

    fn pvc(name: &str, size: &str, phase: &str, volume: Option<&str>) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("apps".into()),
                uid: Some(format!("uid-{name}")),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                storage_class_name: Some("fast".into()),
                volume_name: volume.map(String::from),
                resources: Some(VolumeResourceRequirements {
                    requests: Some(BTreeMap::from([("storage".to_string(), Quantity(size.into()))])),
                    limits: None,
                }),
                ..Default::default()
            }),
            status: Some(PersistentVolumeClaimStatus { phase: Some(phase.into()), ..Default::default() }),
        }
    }

    fn pv(driver: &str, claim_uid: &str, phase: &str) -> PersistentVolume {
        PersistentVolume {
            metadata: ObjectMeta { name: Some("pv-src".into()), ..Default::default() },
            spec: Some(PersistentVolumeSpec {
                csi: Some(CSIPersistentVolumeSource {
                    driver: driver.into(),
                    volume_handle: "vol-src".into(),
                    ..Default::default()
                }),
                claim_ref: Some(ObjectReference { uid: Some(claim_uid.into()), ..Default::default() }),
                ..Default::default()
            }),
            status: Some(PersistentVolumeStatus { phase: Some(phase.into()), ..Default::default() }),
        }
    }

    fn source() -> DataSource {
        DataSource {
            kind: "PersistentVolumeClaim".into(),
            name: "src".into(),
            api_group: "".into(),
            namespace: "apps".into(),
        }
    }

    #[test]
    fn clone_checks() {
        let bound_source = || pvc("src", "1Gi", "Bound", Some("pv-src"));
        let good_volume = || pv(DRIVER, "uid-src", "Bound");
        let mut deleting = bound_source();
        deleting.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        let mut block = pvc("new", "1Gi", "Pending", None);
        block.spec.as_mut().unwrap().volume_mode = Some("Block".into());
        let mut classless = bound_source();
        classless.spec.as_mut().unwrap().storage_class_name = None;
        // (rule, claim, source claim, source volume, error text or Ok)
        type Row = (
            &'static str,
            PersistentVolumeClaim,
            Option<PersistentVolumeClaim>,
            Option<PersistentVolume>,
            Result<(), &'static str>,
        );
        let table: Vec<Row> = vec![
            ("55: all good", pvc("new", "1Gi", "Pending", None), Some(bound_source()), Some(good_volume()), Ok(())),
            ("55: larger clone", pvc("new", "2Gi", "Pending", None), Some(bound_source()), Some(good_volume()), Ok(())),
            ("55: source missing", pvc("new", "1Gi", "Pending", None), None, None, Err("not found")),
            (
                "55: source being deleted",
                pvc("new", "1Gi", "Pending", None),
                Some(deleting),
                Some(good_volume()),
                Err("being deleted"),
            ),
            (
                "55: source not bound",
                pvc("new", "1Gi", "Pending", None),
                Some(pvc("src", "1Gi", "Pending", None)),
                None,
                Err("not bound"),
            ),
            (
                "55: no class on the source",
                pvc("new", "1Gi", "Pending", None),
                Some(classless),
                Some(good_volume()),
                Err("storage class"),
            ),
            (
                "55: smaller clone",
                pvc("new", "512Mi", "Pending", None),
                Some(bound_source()),
                Some(good_volume()),
                Err("greater than or equal"),
            ),
            (
                "55: source volume missing",
                pvc("new", "1Gi", "Pending", None),
                Some(bound_source()),
                None,
                Err("error getting volume"),
            ),
            (
                "55: other driver",
                pvc("new", "1Gi", "Pending", None),
                Some(bound_source()),
                Some(pv("other", "uid-src", "Bound")),
                Err("of driver other"),
            ),
            (
                "55: claimRef mismatch",
                pvc("new", "1Gi", "Pending", None),
                Some(bound_source()),
                Some(pv(DRIVER, "uid-x", "Bound")),
                Err("not bound to PVC"),
            ),
            (
                "55: volume Released",
                pvc("new", "1Gi", "Pending", None),
                Some(bound_source()),
                Some(pv(DRIVER, "uid-src", "Released")),
                Err("is not Bound"),
            ),
            ("55: volume modes differ", block, Some(bound_source()), Some(good_volume()), Err("same volume mode")),
        ];
        for (rule, claim, source_claim, source_volume, want) in table {
            let got = clone_content_source(&claim, &source(), source_claim.as_ref(), source_volume.as_ref(), DRIVER);
            match (got, want) {
                (Ok(content), Ok(())) => assert_eq!(
                    content.r#type,
                    Some(Type::Volume(VolumeSource { volume_id: "vol-src".into() })),
                    "{rule}"
                ),
                (Err(refusal), Err(text)) => assert!(refusal.message.contains(text), "{rule}: {}", refusal.message),
                (got, want) => panic!("{rule}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn clone_protection_goes_when_no_pending_clone_needs_it() {
        let mut source = pvc("src", "1Gi", "Bound", Some("pv-src"));
        source.metadata.finalizers = Some(vec![FINALIZER_CLONE_PROTECTION.into()]);
        let cloning = |phase: &str| {
            let mut claim = pvc("new", "1Gi", phase, None);
            claim.spec.as_mut().unwrap().data_source = Some(TypedLocalObjectReference {
                kind: "PersistentVolumeClaim".into(),
                name: "src".into(),
                api_group: None,
            });
            claim
        };
        assert!(!clone_protection_releasable(&source, []), "56: not being deleted");
        source.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        assert!(clone_protection_releasable(&source, []), "56: deleted, no clone");
        assert!(!clone_protection_releasable(&source, [&cloning("Pending")]), "56: a pending clone");
        assert!(clone_protection_releasable(&source, [&cloning("Bound")]), "56: the clone is done");
        let mut elsewhere = cloning("Pending");
        elsewhere.metadata.namespace = Some("other".into());
        assert!(clone_protection_releasable(&source, [&elsewhere]), "56: a clone in another namespace");
        source.metadata.finalizers = None;
        assert!(!clone_protection_releasable(&source, []), "56: no finalizer");
    }
}
