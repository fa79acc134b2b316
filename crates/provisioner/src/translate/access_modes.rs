//! PersistentVolume access modes → CSI volume capabilities (one capability per access mode; csi-lib-utils
//! `accessmodes`).

use csi_client::proto::VolumeCapability;
use csi_client::proto::volume_capability::{AccessMode, AccessType, BlockVolume, MountVolume};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;

use super::names::VOLUME_MODE_BLOCK;

pub use csi_client::access_modes::{AccessModeError, csi_access_mode};

/// Whether the claim asks for a raw block volume (`spec.volumeMode: Block`).
pub fn is_block(claim: &PersistentVolumeClaim) -> bool {
    claim.spec.as_ref().and_then(|s| s.volume_mode.as_deref()) == Some(VOLUME_MODE_BLOCK)
}

/// One capability per access mode of the claim, each mapped on its own: Block for block claims, else Mount with
/// the fsType (possibly empty) and the StorageClass mount options. Block support is always assumed.
pub fn volume_capabilities(
    claim: &PersistentVolumeClaim,
    mount_options: &[String],
    fs_type: &str,
    single_node_multi_writer: bool,
) -> Result<Vec<VolumeCapability>, AccessModeError> {
    let modes = claim.spec.as_ref().and_then(|s| s.access_modes.as_deref()).unwrap_or_default();
    let block = is_block(claim);
    modes
        .iter()
        .map(|mode| {
            let mode = csi_access_mode(std::slice::from_ref(mode), single_node_multi_writer)?;
            let access_type = if block {
                AccessType::Block(BlockVolume {})
            } else {
                AccessType::Mount(MountVolume {
                    fs_type: fs_type.to_string(),
                    mount_flags: mount_options.to_vec(),
                    volume_mount_group: String::new(),
                })
            };
            Ok(VolumeCapability { access_mode: Some(AccessMode { mode: mode as i32 }), access_type: Some(access_type) })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::PersistentVolumeClaimSpec;

    use super::*;
    use csi_client::proto::volume_capability::access_mode::Mode;

    fn modes(list: &[&str]) -> Vec<String> {
        list.iter().map(|m| m.to_string()).collect()
    }

    fn claim(access: &[&str], volume_mode: Option<&str>) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(modes(access)),
                volume_mode: volume_mode.map(str::to_string),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn mount(mode: Mode, fs_type: &str, flags: &[&str]) -> VolumeCapability {
        VolumeCapability {
            access_mode: Some(AccessMode { mode: mode as i32 }),
            access_type: Some(AccessType::Mount(MountVolume {
                fs_type: fs_type.to_string(),
                mount_flags: modes(flags),
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
    fn one_capability_per_access_mode() {
        // (rule, claim, mount options, fs type, snmw, result)
        let table = [
            (
                "20: each mode mapped on its own (ROX+RWO is fine as two capabilities)",
                claim(&["ReadWriteOnce", "ReadOnlyMany"], None),
                vec![],
                "ext4",
                false,
                Ok(vec![mount(Mode::SingleNodeWriter, "ext4", &[]), mount(Mode::MultiNodeReaderOnly, "ext4", &[])]),
            ),
            (
                "22: Filesystem → Mount with fs_type and the class mount options",
                claim(&["ReadWriteOnce"], Some("Filesystem")),
                modes(&["ro", "noatime"]),
                "xfs",
                false,
                Ok(vec![mount(Mode::SingleNodeWriter, "xfs", &["ro", "noatime"])]),
            ),
            (
                "22: empty fs_type is sent empty",
                claim(&["ReadWriteMany"], None),
                vec![],
                "",
                false,
                Ok(vec![mount(Mode::MultiNodeMultiWriter, "", &[])]),
            ),
            (
                "22: Block → Block access type, no fs_type, no mount flags",
                claim(&["ReadWriteOncePod"], Some("Block")),
                modes(&["ro"]),
                "ext4",
                true,
                Ok(vec![block(Mode::SingleNodeSingleWriter)]),
            ),
            (
                "21: unknown mode fails the whole set",
                claim(&["ReadWriteOnce", "Bogus"], None),
                vec![],
                "",
                false,
                Err(AccessModeError::Unsupported(modes(&["Bogus"]))),
            ),
            ("20: no access modes, no capabilities", claim(&[], None), vec![], "", false, Ok(vec![])),
        ];
        for (rule, claim, options, fs_type, snmw, want) in table {
            assert_eq!(volume_capabilities(&claim, &options, fs_type, snmw), want, "{rule}");
        }
    }
}
