//! ControllerPublishVolume and ControllerUnpublishVolume requests from a volume in its CSI form (external-attacher
//! pkg/controller/util.go, GetVolumeCapabilities; pkg/attacher/attacher.go).

use std::collections::HashMap;

use csi_client::access_modes::csi_access_mode;
use csi_client::proto::volume_capability::{AccessMode, AccessType, BlockVolume, MountVolume};
use csi_client::proto::{ControllerPublishVolumeRequest, ControllerUnpublishVolumeRequest, VolumeCapability};
use k8s_openapi::api::core::v1::PersistentVolumeSpec;

use crate::translate::volume::CsiVolume;

/// What the driver and the flags decide about every publish request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PublishConfig {
    /// PUBLISH_READONLY: without it `readonly` is always false ("CO MUST set this field to false if SP does not have
    /// the PUBLISH_READONLY controller capability").
    pub publish_readonly: bool,
    /// SINGLE_NODE_MULTI_WRITER: which CSI access mode ReadWriteOnce and ReadWriteOncePod become.
    pub single_node_multi_writer: bool,
    /// `--default-fstype`: the filesystem of a mounted volume whose PV names none.
    pub default_fs_type: String,
}

/// The capability a volume is published with: a block device for `volumeMode: Block`, else a mount with the PV's
/// filesystem (or `--default-fstype`) and mount options; the access mode from the PV's access modes.
pub fn volume_capability(spec: &PersistentVolumeSpec, config: &PublishConfig) -> Result<VolumeCapability, String> {
    let csi = spec.csi.as_ref().ok_or("CSI volume source was nil")?;
    let access_type = if spec.volume_mode.as_deref() == Some("Block") {
        AccessType::Block(BlockVolume {})
    } else {
        let fs_type = csi.fs_type.clone().filter(|f| !f.is_empty()).unwrap_or_else(|| config.default_fs_type.clone());
        AccessType::Mount(MountVolume {
            fs_type,
            mount_flags: spec.mount_options.clone().unwrap_or_default(),
            ..Default::default()
        })
    };
    let modes = spec.access_modes.clone().unwrap_or_default();
    let mode = csi_access_mode(&modes, config.single_node_multi_writer).map_err(|e| e.to_string())?;
    Ok(VolumeCapability { access_type: Some(access_type), access_mode: Some(AccessMode { mode: mode as i32 }) })
}

pub fn publish_request(
    volume: &CsiVolume,
    node_id: &str,
    capability: VolumeCapability,
    config: &PublishConfig,
    secrets: HashMap<String, String>,
) -> ControllerPublishVolumeRequest {
    ControllerPublishVolumeRequest {
        volume_id: volume.csi.volume_handle.clone(),
        node_id: node_id.to_string(),
        volume_capability: Some(capability),
        readonly: config.publish_readonly && volume.csi.read_only.unwrap_or(false),
        secrets,
        volume_context: volume.csi.volume_attributes.clone().unwrap_or_default().into_iter().collect(),
    }
}

pub fn unpublish_request(
    volume: &CsiVolume,
    node_id: &str,
    secrets: HashMap<String, String>,
) -> ControllerUnpublishVolumeRequest {
    ControllerUnpublishVolumeRequest {
        volume_id: volume.csi.volume_handle.clone(),
        node_id: node_id.to_string(),
        secrets,
    }
}

/// `controllerPublishSecretRef` of the volume: the Secret both calls get (read live, never logged).
pub fn publish_secret(volume: &CsiVolume) -> Option<(String, String)> {
    let reference = volume.csi.controller_publish_secret_ref.as_ref()?;
    Some((reference.namespace.clone().unwrap_or_default(), reference.name.clone().unwrap_or_default()))
}

/// The error text of a Secret that could not be read (`error`: client-go's words for the API's answer).
pub fn secret_error(namespace: &str, name: &str, error: &str) -> String {
    format!("failed to load secret \"{namespace}/{name}\": {error}")
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use csi_client::proto::volume_capability::access_mode::Mode;
    use k8s_openapi::api::core::v1::{CSIPersistentVolumeSource, SecretReference};

    use super::*;

    fn spec(mode: Option<&str>, access: &[&str], fs_type: Option<&str>, options: &[&str]) -> PersistentVolumeSpec {
        PersistentVolumeSpec {
            volume_mode: mode.map(str::to_string),
            access_modes: Some(access.iter().map(|m| m.to_string()).collect()),
            mount_options: (!options.is_empty()).then(|| options.iter().map(|o| o.to_string()).collect()),
            csi: Some(CSIPersistentVolumeSource {
                driver: "d".into(),
                volume_handle: "vol-1".into(),
                fs_type: fs_type.map(str::to_string),
                read_only: Some(true),
                volume_attributes: Some(BTreeMap::from([("zone".to_string(), "a".to_string())])),
                controller_publish_secret_ref: Some(SecretReference {
                    name: Some("s".into()),
                    namespace: Some("ns".into()),
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn mount(fs_type: &str, flags: &[&str], mode: Mode) -> VolumeCapability {
        VolumeCapability {
            access_type: Some(AccessType::Mount(MountVolume {
                fs_type: fs_type.into(),
                mount_flags: flags.iter().map(|f| f.to_string()).collect(),
                ..Default::default()
            })),
            access_mode: Some(AccessMode { mode: mode as i32 }),
        }
    }

    #[test]
    fn capabilities_follow_the_volume_mode_and_access_modes() {
        let plain = PublishConfig::default();
        let ext4 = PublishConfig { default_fs_type: "ext4".into(), ..Default::default() };
        let snmw = PublishConfig { single_node_multi_writer: true, ..Default::default() };
        let block = VolumeCapability {
            access_type: Some(AccessType::Block(BlockVolume {})),
            access_mode: Some(AccessMode { mode: Mode::MultiNodeMultiWriter as i32 }),
        };
        // (case, spec, config, capability)
        let table: [(&str, PersistentVolumeSpec, &PublishConfig, Result<VolumeCapability, &str>); 8] = [
            ("block", spec(Some("Block"), &["ReadWriteMany"], Some("xfs"), &[]), &plain, Ok(block)),
            (
                "the PV's filesystem and options",
                spec(None, &["ReadWriteOnce"], Some("xfs"), &["noatime"]),
                &ext4,
                Ok(mount("xfs", &["noatime"], Mode::SingleNodeWriter)),
            ),
            (
                "--default-fstype when the PV names none",
                spec(Some("Filesystem"), &["ReadWriteOnce"], None, &[]),
                &ext4,
                Ok(mount("ext4", &[], Mode::SingleNodeWriter)),
            ),
            (
                "an empty fsType counts as none",
                spec(None, &["ReadOnlyMany"], Some(""), &[]),
                &ext4,
                Ok(mount("ext4", &[], Mode::MultiNodeReaderOnly)),
            ),
            (
                "no filesystem at all",
                spec(None, &["ReadWriteOnce"], None, &[]),
                &plain,
                Ok(mount("", &[], Mode::SingleNodeWriter)),
            ),
            (
                "SINGLE_NODE_MULTI_WRITER",
                spec(None, &["ReadWriteOncePod"], None, &[]),
                &snmw,
                Ok(mount("", &[], Mode::SingleNodeSingleWriter)),
            ),
            (
                "modes CSI cannot express",
                spec(None, &["ReadOnlyMany", "ReadWriteOnce"], None, &[]),
                &plain,
                Err("CSI does not support ReadOnlyMany and ReadWriteOnce on the same PersistentVolume"),
            ),
            ("no CSI source", PersistentVolumeSpec::default(), &plain, Err("CSI volume source was nil")),
        ];
        for (case, spec, config, want) in table {
            assert_eq!(volume_capability(&spec, config), want.map_err(str::to_string), "{case}");
        }
    }

    #[test]
    fn requests_carry_the_handle_node_context_and_read_only_only_when_the_driver_can() {
        let volume = CsiVolume {
            csi: spec(None, &[], None, &[]).csi.unwrap(),
            spec: PersistentVolumeSpec::default(),
            migrated: false,
        };
        let capability = mount("", &[], Mode::SingleNodeWriter);
        let secrets = HashMap::from([("k".to_string(), "v".to_string())]);
        let readonly = PublishConfig { publish_readonly: true, ..Default::default() };
        let request = publish_request(&volume, "node-id", capability.clone(), &readonly, secrets.clone());
        assert_eq!(request.volume_id, "vol-1");
        assert_eq!(request.node_id, "node-id");
        assert!(request.readonly, "PUBLISH_READONLY: the PV's readOnly");
        assert_eq!(request.volume_context.get("zone").map(String::as_str), Some("a"));
        assert_eq!(request.secrets, secrets);
        let request = publish_request(&volume, "node-id", capability, &PublishConfig::default(), HashMap::new());
        assert!(!request.readonly, "without PUBLISH_READONLY, never");

        let unpublish = unpublish_request(&volume, "node-id", secrets.clone());
        assert_eq!((unpublish.volume_id.as_str(), unpublish.node_id.as_str()), ("vol-1", "node-id"));
        assert_eq!(unpublish.secrets, secrets);
        assert_eq!(publish_secret(&volume), Some(("ns".to_string(), "s".to_string())));
        assert_eq!(
            secret_error("ns", "s", r#"secrets "s" not found"#),
            r#"failed to load secret "ns/s": secrets "s" not found"#
        );
    }
}
