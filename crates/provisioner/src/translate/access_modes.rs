//! PersistentVolume access modes → CSI volume capabilities (items 20–22; csi-lib-utils `accessmodes`).

use csi_client::proto::VolumeCapability;
use csi_client::proto::volume_capability::access_mode::Mode;
use csi_client::proto::volume_capability::{AccessMode, AccessType, BlockVolume, MountVolume};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;

use super::names::{
    ACCESS_READ_ONLY_MANY, ACCESS_READ_WRITE_MANY, ACCESS_READ_WRITE_ONCE, ACCESS_READ_WRITE_ONCE_POD,
    VOLUME_MODE_BLOCK,
};

/// A set of access modes CSI cannot express.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AccessModeError {
    #[error("Kubernetes does not support use of ReadWriteOncePod with other access modes on the same PersistentVolume")]
    ReadWriteOncePodWithOthers,
    #[error("CSI does not support ReadOnlyMany and ReadWriteOnce on the same PersistentVolume")]
    ReadOnlyManyWithReadWriteOnce,
    /// Printed as Go prints a slice of access modes: `[A B]`.
    #[error("unsupported AccessMode combination: [{}]", .0.join(" "))]
    Unsupported(Vec<String>),
}

/// The one CSI access mode for a set of Kubernetes access modes.
///
/// Without SINGLE_NODE_MULTI_WRITER: RWO → SINGLE_NODE_WRITER, RWOP → SINGLE_NODE_WRITER. With it:
/// RWO → SINGLE_NODE_MULTI_WRITER, RWOP → SINGLE_NODE_SINGLE_WRITER. ROX → MULTI_NODE_READER_ONLY and
/// RWX → MULTI_NODE_MULTI_WRITER either way. RWX wins over RWO and ROX; RWOP admits no other mode; ROX and RWO
/// cannot be combined.
pub fn csi_access_mode(modes: &[String], single_node_multi_writer: bool) -> Result<Mode, AccessModeError> {
    let has = |mode: &str| modes.iter().any(|m| m == mode);
    let distinct = {
        let mut seen: Vec<&str> = modes.iter().map(String::as_str).collect();
        seen.sort_unstable();
        seen.dedup();
        seen.len()
    };
    if has(ACCESS_READ_WRITE_ONCE_POD) {
        if distinct > 1 {
            return Err(AccessModeError::ReadWriteOncePodWithOthers);
        }
        return Ok(if single_node_multi_writer { Mode::SingleNodeSingleWriter } else { Mode::SingleNodeWriter });
    }
    if has(ACCESS_READ_WRITE_MANY) {
        return Ok(Mode::MultiNodeMultiWriter);
    }
    match (has(ACCESS_READ_ONLY_MANY), has(ACCESS_READ_WRITE_ONCE)) {
        (true, true) => Err(AccessModeError::ReadOnlyManyWithReadWriteOnce),
        (true, false) => Ok(Mode::MultiNodeReaderOnly),
        (false, true) => {
            Ok(if single_node_multi_writer { Mode::SingleNodeMultiWriter } else { Mode::SingleNodeWriter })
        }
        (false, false) => Err(AccessModeError::Unsupported(modes.to_vec())),
    }
}

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

    fn modes(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn access_mode_sets_map_to_one_csi_mode() {
        use AccessModeError::*;
        use Mode::*;
        // (rule, modes, single_node_multi_writer, result)
        type Row = (&'static str, &'static [&'static str], bool, Result<Mode, AccessModeError>);
        let table: [Row; 16] = [
            ("21: RWO → SINGLE_NODE_WRITER", &["ReadWriteOnce"], false, Ok(SingleNodeWriter)),
            ("21: ROX → MULTI_NODE_READER_ONLY", &["ReadOnlyMany"], false, Ok(MultiNodeReaderOnly)),
            ("21: RWX → MULTI_NODE_MULTI_WRITER", &["ReadWriteMany"], false, Ok(MultiNodeMultiWriter)),
            ("21: RWOP → SINGLE_NODE_WRITER", &["ReadWriteOncePod"], false, Ok(SingleNodeWriter)),
            ("21 SNMW: RWO → SINGLE_NODE_MULTI_WRITER", &["ReadWriteOnce"], true, Ok(SingleNodeMultiWriter)),
            ("21 SNMW: RWOP → SINGLE_NODE_SINGLE_WRITER", &["ReadWriteOncePod"], true, Ok(SingleNodeSingleWriter)),
            ("21 SNMW: ROX unchanged", &["ReadOnlyMany"], true, Ok(MultiNodeReaderOnly)),
            ("21 SNMW: RWX unchanged", &["ReadWriteMany"], true, Ok(MultiNodeMultiWriter)),
            (
                "21: RWX wins over RWO and ROX",
                &["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany"],
                false,
                Ok(MultiNodeMultiWriter),
            ),
            (
                "21: RWOP with another mode is refused",
                &["ReadWriteOncePod", "ReadWriteMany"],
                false,
                Err(ReadWriteOncePodWithOthers),
            ),
            (
                "21 SNMW: RWOP with another mode is refused",
                &["ReadWriteOnce", "ReadWriteOncePod"],
                true,
                Err(ReadWriteOncePodWithOthers),
            ),
            (
                "21: RWOP twice is still alone",
                &["ReadWriteOncePod", "ReadWriteOncePod"],
                true,
                Ok(SingleNodeSingleWriter),
            ),
            (
                "21: ROX with RWO is refused",
                &["ReadOnlyMany", "ReadWriteOnce"],
                false,
                Err(ReadOnlyManyWithReadWriteOnce),
            ),
            (
                "21 SNMW: ROX with RWO is refused",
                &["ReadOnlyMany", "ReadWriteOnce"],
                true,
                Err(ReadOnlyManyWithReadWriteOnce),
            ),
            (
                "21: unknown mode is refused",
                &["ReadWriteSometimes"],
                false,
                Err(Unsupported(modes(&["ReadWriteSometimes"]))),
            ),
            ("21: no mode is refused", &[], false, Err(Unsupported(vec![]))),
        ];
        for (rule, list, snmw, want) in table {
            assert_eq!(csi_access_mode(&modes(list), snmw), want, "{rule}");
        }
        assert_eq!(
            Unsupported(modes(&["A", "B"])).to_string(),
            "unsupported AccessMode combination: [A B]",
            "21: Go slice formatting"
        );
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
