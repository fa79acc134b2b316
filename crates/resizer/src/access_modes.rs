//! A PersistentVolume's access modes → the one CSI access mode (csi-lib-utils `accessmodes`, reference §3 item 23).
//!
//! The provisioner has the same mapping (see the crate docs on what should move down).

use csi_client::proto::volume_capability::access_mode::Mode;

use crate::names::{ACCESS_READ_ONLY_MANY, ACCESS_READ_WRITE_MANY, ACCESS_READ_WRITE_ONCE, ACCESS_READ_WRITE_ONCE_POD};

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

/// The CSI access mode for a volume's access modes. RWOP admits no other mode; RWX wins over RWO and ROX; ROX and RWO
/// cannot be combined. With SINGLE_NODE_MULTI_WRITER, RWO → SINGLE_NODE_MULTI_WRITER and RWOP →
/// SINGLE_NODE_SINGLE_WRITER; without it both → SINGLE_NODE_WRITER.
pub fn csi_access_mode(modes: &[String], single_node_multi_writer: bool) -> Result<Mode, AccessModeError> {
    let has = |mode: &str| modes.iter().any(|m| m == mode);
    if has(ACCESS_READ_WRITE_ONCE_POD) {
        if modes.iter().any(|m| m != ACCESS_READ_WRITE_ONCE_POD) {
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
