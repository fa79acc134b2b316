//! The ControllerModifyVolume request (external-resizer pkg/modifier/csi_modifier.go, Modify, and
//! pkg/modifycontroller/modify_volume.go, callModifyVolumeOnPlugin).

use std::collections::HashMap;

use csi_client::proto::ControllerModifyVolumeRequest;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::VolumeAttributesClass;

use crate::translate::claim::{claim_name, volume_annotation, volume_name};
use crate::translate::names::{
    ANN_CONTROLLER_MODIFY_SECRET_NAME, ANN_CONTROLLER_MODIFY_SECRET_NAMESPACE, PARAM_PV_NAME, PARAM_PVC_NAME,
    PARAM_PVC_NAMESPACE,
};
use crate::translate::secret_ref::SecretRef;

/// A request that cannot be built; the driver is not called.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("volume {0} is not a CSI volumes, modify volume feature only supports CSI volumes")]
    NotCsi(String),
    #[error("empty volume handle")]
    EmptyVolumeHandle,
}

/// The Secret for ControllerModifyVolume, read live: the PV's controller-modify secret annotations when both are
/// non-empty, else `spec.csi.controllerExpandSecretRef`, else none.
pub fn modify_secret_reference(volume: &PersistentVolume) -> Option<SecretRef> {
    let name = volume_annotation(volume, ANN_CONTROLLER_MODIFY_SECRET_NAME).unwrap_or_default();
    let namespace = volume_annotation(volume, ANN_CONTROLLER_MODIFY_SECRET_NAMESPACE).unwrap_or_default();
    if !name.is_empty() && !namespace.is_empty() {
        return Some(SecretRef { name: name.to_string(), namespace: namespace.to_string() });
    }
    let reference = volume.spec.as_ref()?.csi.as_ref()?.controller_expand_secret_ref.as_ref()?;
    Some(SecretRef {
        name: reference.name.clone().unwrap_or_default(),
        namespace: reference.namespace.clone().unwrap_or_default(),
    })
}

/// ControllerModifyVolume applying `class` to the PV's volume handle (never empty): `mutable_parameters` are the
/// class's parameters, plus the claim's name and namespace and the PV's name with `--extra-modify-metadata`. `secrets`
/// is the data of [`modify_secret_reference`]'s Secret, empty without one.
pub fn controller_modify_volume_request(
    claim: &PersistentVolumeClaim,
    volume: &PersistentVolume,
    class: &VolumeAttributesClass,
    extra_modify_metadata: bool,
    secrets: HashMap<String, String>,
) -> Result<ControllerModifyVolumeRequest, RequestError> {
    let Some(csi) = volume.spec.as_ref().and_then(|s| s.csi.as_ref()) else {
        return Err(RequestError::NotCsi(volume_name(volume).to_string()));
    };
    if csi.volume_handle.is_empty() {
        return Err(RequestError::EmptyVolumeHandle);
    }
    let mut mutable_parameters: HashMap<String, String> =
        class.parameters.clone().unwrap_or_default().into_iter().collect();
    if extra_modify_metadata {
        mutable_parameters.insert(PARAM_PVC_NAME.to_string(), claim_name(claim).to_string());
        let namespace = claim.metadata.namespace.clone().unwrap_or_default();
        mutable_parameters.insert(PARAM_PVC_NAMESPACE.to_string(), namespace);
        mutable_parameters.insert(PARAM_PV_NAME.to_string(), volume_name(volume).to_string());
    }
    Ok(ControllerModifyVolumeRequest { volume_id: csi.volume_handle.clone(), secrets, mutable_parameters })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::{CSIPersistentVolumeSource, PersistentVolumeSpec, SecretReference};

    use super::*;

    fn volume(annotations: &[(&str, &str)], expand_secret: Option<(&str, &str)>) -> PersistentVolume {
        let mut volume = PersistentVolume::default();
        volume.metadata.name = Some("pv-1".into());
        volume.metadata.annotations =
            Some(annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>());
        volume.spec = Some(PersistentVolumeSpec {
            csi: Some(CSIPersistentVolumeSource {
                driver: "hostpath.csi.k8s.io".into(),
                volume_handle: "vol-1".into(),
                controller_expand_secret_ref: expand_secret.map(|(name, namespace)| SecretReference {
                    name: Some(name.into()),
                    namespace: Some(namespace.into()),
                }),
                ..Default::default()
            }),
            ..Default::default()
        });
        volume
    }

    fn reference(name: &str, namespace: &str) -> Option<SecretRef> {
        Some(SecretRef { name: name.into(), namespace: namespace.into() })
    }

    #[test]
    fn modify_secret_selection() {
        const NAME: &str = "volume.kubernetes.io/controller-modify-secret-name";
        const NAMESPACE: &str = "volume.kubernetes.io/controller-modify-secret-namespace";
        // (rule, volume, reference)
        let table = [
            (
                "the modify annotations win",
                volume(&[(NAME, "modify"), (NAMESPACE, "ns")], Some(("expand", "kube-system"))),
                reference("modify", "ns"),
            ),
            (
                "both annotations are needed, else the expand secret",
                volume(&[(NAME, "modify")], Some(("expand", "kube-system"))),
                reference("expand", "kube-system"),
            ),
            (
                "empty annotations fall back too",
                volume(&[(NAME, ""), (NAMESPACE, "ns")], Some(("expand", "kube-system"))),
                reference("expand", "kube-system"),
            ),
            ("neither, no secrets", volume(&[(NAMESPACE, "ns")], None), None),
        ];
        for (rule, volume, want) in table {
            assert_eq!(modify_secret_reference(&volume), want, "{rule}");
        }
    }

    #[test]
    fn modify_requests() {
        let mut claim = PersistentVolumeClaim::default();
        claim.metadata.name = Some("data".into());
        claim.metadata.namespace = Some("apps".into());
        let class = VolumeAttributesClass {
            driver_name: "hostpath.csi.k8s.io".into(),
            parameters: Some(BTreeMap::from([("iops".to_string(), "4567".to_string())])),
            ..Default::default()
        };
        let params = |list: &[(&str, &str)]| -> HashMap<String, String> {
            list.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        // (rule, extra metadata, parameters)
        let table = [
            ("the class parameters", false, params(&[("iops", "4567")])),
            (
                "--extra-modify-metadata adds claim and PV names",
                true,
                params(&[
                    ("iops", "4567"),
                    ("csi.storage.k8s.io/pvc/name", "data"),
                    ("csi.storage.k8s.io/pvc/namespace", "apps"),
                    ("csi.storage.k8s.io/pv/name", "pv-1"),
                ]),
            ),
        ];
        for (rule, extra, want) in table {
            let secrets = params(&[("key", "secret-value")]);
            let request =
                controller_modify_volume_request(&claim, &volume(&[], None), &class, extra, secrets.clone()).unwrap();
            assert_eq!(request.mutable_parameters, want, "{rule}");
            assert_eq!(request.volume_id, "vol-1", "the PV's volume handle");
            assert_eq!(request.secrets, secrets, "the Secret's data");
            assert!(!format!("{request:?}").contains("secret-value"), "secrets never printed");
        }
        let empty_class = VolumeAttributesClass { driver_name: "hostpath.csi.k8s.io".into(), ..Default::default() };
        let request =
            controller_modify_volume_request(&claim, &volume(&[], None), &empty_class, false, HashMap::new()).unwrap();
        assert!(request.mutable_parameters.is_empty(), "a class without parameters");

        let mut no_handle = volume(&[], None);
        no_handle.spec.as_mut().unwrap().csi.as_mut().unwrap().volume_handle.clear();
        let mut not_csi = volume(&[], None);
        not_csi.spec.as_mut().unwrap().csi = None;
        // (rule, volume, error)
        let table = [
            ("an empty handle is an error", no_handle, RequestError::EmptyVolumeHandle),
            ("non-CSI volumes are refused", not_csi, RequestError::NotCsi("pv-1".into())),
        ];
        for (rule, volume, want) in table {
            assert_eq!(
                controller_modify_volume_request(&claim, &volume, &class, false, HashMap::new()),
                Err(want),
                "{rule}"
            );
        }
    }
}
