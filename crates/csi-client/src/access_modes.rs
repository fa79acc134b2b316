//! A PersistentVolume's access modes → the one CSI access mode, as csi-lib-utils'
//! `accessmodes` maps them. Every sidecar that builds a VolumeCapability (the
//! provisioner, the resizer) uses this one mapping.

use crate::proto::volume_capability::access_mode::Mode;

pub const ACCESS_READ_WRITE_ONCE: &str = "ReadWriteOnce";
pub const ACCESS_READ_ONLY_MANY: &str = "ReadOnlyMany";
pub const ACCESS_READ_WRITE_MANY: &str = "ReadWriteMany";
pub const ACCESS_READ_WRITE_ONCE_POD: &str = "ReadWriteOncePod";

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

#[cfg(test)]
mod tests {
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
}
