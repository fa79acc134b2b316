//! The ControllerExpandVolume request for a volume (external-resizer pkg/resizer/csi_resizer.go, Resize and
//! GetVolumeCapabilities).

use std::collections::HashMap;

use csi_client::proto::volume_capability::{AccessMode, AccessType, BlockVolume, MountVolume};
use csi_client::proto::{CapacityRange, ControllerExpandVolumeRequest, VolumeCapability};
use k8s_openapi::api::core::v1::PersistentVolume;

use crate::translate::claim::volume_name;
use crate::translate::names::VOLUME_MODE_BLOCK;
use crate::translate::quantity::Size;
use crate::translate::secret_ref::SecretRef;
use csi_client::access_modes::{AccessModeError, csi_access_mode};

/// A request that cannot be built; the driver is not called (upstream's non-gRPC errors).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// Not a CSI volume, nor one served through CSI migration ([`super::migration::csi_form`] translates those).
    #[error("volume {0} is not migrated to CSI")]
    NotCsi(String),
    /// An in-tree PV handed over through CSI migration whose source does not translate.
    #[error("failed to translate persistent volume {volume}: {error}")]
    Translation { volume: String, error: csi_translation::TranslationError },
    #[error("empty volume handle")]
    EmptyVolumeHandle,
    #[error("failed to get capabilities of volume {volume} with {error}")]
    Capability { volume: String, error: AccessModeError },
}

/// The Secret for ControllerExpandVolume: the PV's `spec.csi.controllerExpandSecretRef`, read live on every call.
pub fn expand_secret_reference(volume: &PersistentVolume) -> Option<SecretRef> {
    let reference = volume.spec.as_ref()?.csi.as_ref()?.controller_expand_secret_ref.as_ref()?;
    Some(SecretRef {
        name: reference.name.clone().unwrap_or_default(),
        namespace: reference.namespace.clone().unwrap_or_default(),
    })
}

/// The volume's capability: Block for `volumeMode: Block`, else Mount with the PV's fsType and mount options; the
/// access mode maps the PV's whole set of access modes.
pub fn volume_capability(
    volume: &PersistentVolume,
    single_node_multi_writer: bool,
) -> Result<VolumeCapability, AccessModeError> {
    let spec = volume.spec.clone().unwrap_or_default();
    let access_type = if spec.volume_mode.as_deref() == Some(VOLUME_MODE_BLOCK) {
        AccessType::Block(BlockVolume {})
    } else {
        AccessType::Mount(MountVolume {
            fs_type: spec.csi.as_ref().and_then(|c| c.fs_type.clone()).unwrap_or_default(),
            mount_flags: spec.mount_options.unwrap_or_default(),
            volume_mount_group: String::new(),
        })
    };
    let mode = csi_access_mode(&spec.access_modes.unwrap_or_default(), single_node_multi_writer)?;
    Ok(VolumeCapability { access_mode: Some(AccessMode { mode: mode as i32 }), access_type: Some(access_type) })
}

/// ControllerExpandVolume for `target`: the PV's volume handle, `required_bytes` only, never `limit_bytes`. `volume` is
/// the PV in its CSI form ([`super::migration::csi_form`]); `secrets` is the data of [`expand_secret_reference`]'s
/// Secret, empty without one.
pub fn controller_expand_volume_request(
    volume: &PersistentVolume,
    target: &Size,
    single_node_multi_writer: bool,
    secrets: HashMap<String, String>,
) -> Result<ControllerExpandVolumeRequest, RequestError> {
    let Some(csi) = volume.spec.as_ref().and_then(|s| s.csi.as_ref()) else {
        return Err(RequestError::NotCsi(volume_name(volume).to_string()));
    };
    if csi.volume_handle.is_empty() {
        return Err(RequestError::EmptyVolumeHandle);
    }
    let capability = volume_capability(volume, single_node_multi_writer)
        .map_err(|error| RequestError::Capability { volume: volume_name(volume).to_string(), error })?;
    Ok(ControllerExpandVolumeRequest {
        volume_id: csi.volume_handle.clone(),
        capacity_range: Some(CapacityRange { required_bytes: target.bytes, limit_bytes: 0 }),
        secrets,
        volume_capability: Some(capability),
    })
}

#[cfg(test)]
mod tests {
    use csi_client::proto::volume_capability::access_mode::Mode;
    use k8s_openapi::api::core::v1::{CSIPersistentVolumeSource, PersistentVolumeSpec, SecretReference};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    use super::*;

    fn volume(modes: &[&str], block: bool, fs_type: Option<&str>, mount_options: &[&str]) -> PersistentVolume {
        let mut volume = PersistentVolume::default();
        volume.metadata.name = Some("pv-1".into());
        volume.spec = Some(PersistentVolumeSpec {
            access_modes: Some(modes.iter().map(|m| m.to_string()).collect()),
            volume_mode: block.then(|| "Block".to_string()),
            mount_options: (!mount_options.is_empty()).then(|| mount_options.iter().map(|m| m.to_string()).collect()),
            csi: Some(CSIPersistentVolumeSource {
                driver: "hostpath.csi.k8s.io".into(),
                volume_handle: "vol-1".into(),
                fs_type: fs_type.map(str::to_string),
                ..Default::default()
            }),
            ..Default::default()
        });
        volume
    }

    fn mount(mode: Mode, fs_type: &str, flags: &[&str]) -> VolumeCapability {
        VolumeCapability {
            access_mode: Some(AccessMode { mode: mode as i32 }),
            access_type: Some(AccessType::Mount(MountVolume {
                fs_type: fs_type.into(),
                mount_flags: flags.iter().map(|f| f.to_string()).collect(),
                volume_mount_group: String::new(),
            })),
        }
    }

    fn block(mode: Mode) -> VolumeCapability {
        VolumeCapability {
            access_mode: Some(AccessMode { mode: mode as i32 }),
            access_type: Some(AccessType::Block(BlockVolume {})),
        }
    }

    #[test]
    fn volume_capability_from_the_volume() {
        use AccessModeError::*;
        use Mode::*;
        const RWO: &str = "ReadWriteOnce";
        const ROX: &str = "ReadOnlyMany";
        const RWX: &str = "ReadWriteMany";
        const RWOP: &str = "ReadWriteOncePod";
        // (rule, volume, single_node_multi_writer, capability)
        let table = [
            ("RWX", volume(&[RWX], false, None, &[]), false, Ok(mount(MultiNodeMultiWriter, "", &[]))),
            ("Block RWX", volume(&[RWX], true, None, &[]), false, Ok(block(MultiNodeMultiWriter))),
            (
                "RWX + fsType",
                volume(&[RWX], false, Some("ext4"), &[]),
                false,
                Ok(mount(MultiNodeMultiWriter, "ext4", &[])),
            ),
            ("RWO", volume(&[RWO], false, None, &[]), false, Ok(mount(SingleNodeWriter, "", &[]))),
            ("Block RWO", volume(&[RWO], true, Some("ext4"), &["ro"]), false, Ok(block(SingleNodeWriter))),
            ("ROX", volume(&[ROX], false, None, &[]), false, Ok(mount(MultiNodeReaderOnly, "", &[]))),
            (
                "RWX wins over anything",
                volume(&[RWX, RWO, ROX], false, None, &[]),
                false,
                Ok(mount(MultiNodeMultiWriter, "", &[])),
            ),
            (
                "mount options",
                volume(&[RWX], false, None, &["a", "b"]),
                false,
                Ok(mount(MultiNodeMultiWriter, "", &["a", "b"])),
            ),
            ("ROX+RWO fails", volume(&[ROX, RWO], false, None, &[]), false, Err(ReadOnlyManyWithReadWriteOnce)),
            ("nothing fails", volume(&[], false, None, &[]), false, Err(Unsupported(vec![]))),
            ("RWOP", volume(&[RWOP], false, None, &[]), false, Ok(mount(SingleNodeWriter, "", &[]))),
            ("SNMW: RWX", volume(&[RWX], false, None, &[]), true, Ok(mount(MultiNodeMultiWriter, "", &[]))),
            ("SNMW: ROX+RWO fails", volume(&[ROX, RWO], false, None, &[]), true, Err(ReadOnlyManyWithReadWriteOnce)),
            ("SNMW: ROX+RWOP fails", volume(&[ROX, RWOP], false, None, &[]), true, Err(ReadWriteOncePodWithOthers)),
            ("SNMW: RWO+RWOP fails", volume(&[RWO, RWOP], false, None, &[]), true, Err(ReadWriteOncePodWithOthers)),
            ("SNMW: ROX", volume(&[ROX], false, None, &[]), true, Ok(mount(MultiNodeReaderOnly, "", &[]))),
            ("SNMW: RWO", volume(&[RWO], false, None, &[]), true, Ok(mount(SingleNodeMultiWriter, "", &[]))),
            ("SNMW: RWOP", volume(&[RWOP], false, None, &[]), true, Ok(mount(SingleNodeSingleWriter, "", &[]))),
            ("SNMW: nothing fails", volume(&[], false, None, &[]), true, Err(Unsupported(vec![]))),
        ];
        for (rule, volume, snmw, want) in table {
            assert_eq!(volume_capability(&volume, snmw), want, "{rule}");
        }
    }

    #[test]
    fn expand_requests() {
        let target = Size::parse(&Quantity("2Gi".into())).unwrap();
        let secrets = HashMap::from([("key".to_string(), "value".to_string())]);
        let request = controller_expand_volume_request(
            &volume(&["ReadWriteOnce"], false, Some("xfs"), &[]),
            &target,
            false,
            secrets.clone(),
        )
        .unwrap();
        assert_eq!(request.volume_id, "vol-1", "the volume handle");
        assert_eq!(
            request.capacity_range,
            Some(CapacityRange { required_bytes: 2 << 30, limit_bytes: 0 }),
            "required bytes only"
        );
        assert_eq!(request.secrets, secrets, "secrets as given");
        assert_eq!(
            request.volume_capability,
            Some(mount(Mode::SingleNodeWriter, "xfs", &[])),
            "RWO maps to SINGLE_NODE_WRITER"
        );
        assert!(!format!("{request:?}").contains("value"), "secrets never printed");

        let mut no_handle = volume(&["ReadWriteOnce"], false, None, &[]);
        no_handle.spec.as_mut().unwrap().csi.as_mut().unwrap().volume_handle.clear();
        let mut not_csi = volume(&["ReadWriteOnce"], false, None, &[]);
        not_csi.spec.as_mut().unwrap().csi = None;
        // (rule, volume, error text)
        let table = [
            ("an empty handle is an error", no_handle, "empty volume handle"),
            ("in-tree volumes are not translated", not_csi, "volume pv-1 is not migrated to CSI"),
            (
                "access modes CSI cannot express",
                volume(&["ReadOnlyMany", "ReadWriteOnce"], false, None, &[]),
                "failed to get capabilities of volume pv-1 with CSI does not support ReadOnlyMany and ReadWriteOnce on the same PersistentVolume",
            ),
        ];
        for (rule, volume, want) in table {
            let error = controller_expand_volume_request(&volume, &target, false, HashMap::new()).unwrap_err();
            assert_eq!(error.to_string(), want, "{rule}");
        }
    }

    #[test]
    fn expand_secret_is_the_volume_reference() {
        let mut with_secret = volume(&["ReadWriteOnce"], false, None, &[]);
        with_secret.spec.as_mut().unwrap().csi.as_mut().unwrap().controller_expand_secret_ref =
            Some(SecretReference { name: Some("expand".into()), namespace: Some("kube-system".into()) });
        // (rule, volume, reference)
        let table = [
            (
                "controllerExpandSecretRef",
                with_secret,
                Some(SecretRef { name: "expand".into(), namespace: "kube-system".into() }),
            ),
            ("no reference, no secrets", volume(&["ReadWriteOnce"], false, None, &[]), None),
        ];
        for (rule, volume, want) in table {
            assert_eq!(expand_secret_reference(&volume), want, "{rule}");
        }
        let reference = SecretRef { name: "expand".into(), namespace: "kube-system".into() };
        assert_eq!(
            reference.read_error("forbidden"),
            "error getting secret expand in namespace kube-system: forbidden",
            "a GET failure is a non-gRPC error"
        );
    }
}
