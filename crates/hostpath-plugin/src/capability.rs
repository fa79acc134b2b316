//! Volume capabilities as requests carry them: which access type (block or mount) and access mode a
//! caller wants, checked the way the CSI spec asks (a missing access type or mode is INVALID_ARGUMENT).

use csi_client::proto::VolumeCapability;
use csi_client::proto::volume_capability::AccessType as RequestedType;
use csi_client::proto::volume_capability::access_mode::Mode;
use tonic::Status;

use crate::state::{AccessType, Attachment};

/// The access type one capability asks for, after checking that it also names a known access mode.
pub fn access_type(capability: &VolumeCapability) -> Result<AccessType, Status> {
    access_mode(capability)?;
    match capability.access_type {
        Some(RequestedType::Block(_)) => Ok(AccessType::Block),
        Some(RequestedType::Mount(_)) => Ok(AccessType::Mount),
        None => Err(Status::invalid_argument("volume capability has no access type (block or mount)")),
    }
}

/// The access mode one capability asks for; UNKNOWN or an unknown number is INVALID_ARGUMENT.
pub fn access_mode(capability: &VolumeCapability) -> Result<Mode, Status> {
    let raw =
        capability.access_mode.ok_or_else(|| Status::invalid_argument("volume capability has no access mode"))?.mode;
    match Mode::try_from(raw) {
        Ok(Mode::Unknown) => Err(Status::invalid_argument("volume capability has access mode UNKNOWN")),
        Ok(mode) => Ok(mode),
        Err(_) => Err(Status::invalid_argument(format!("volume capability has unknown access mode {raw}"))),
    }
}

/// What the plugin serves beyond single-node writers, from its flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Support {
    /// SINGLE_NODE_MULTI_WRITER is advertised, with the two single-node modes it brings.
    pub single_node_multi_writer: bool,
    /// Block volumes are served (`--no-block` turns them off, as in a driver without raw block support).
    pub block: bool,
}

/// Why the plugin cannot serve one capability, or `None` when it can. A reference plugin refuses what it does not
/// advertise, so that a CO's handling of an unsupported access mode or type can be tested against it. Its volumes
/// live on one node: no MULTI_NODE_* mode is ever served.
pub fn unsupported(capability: &VolumeCapability, support: Support) -> Result<Option<String>, Status> {
    let mode = access_mode(capability)?;
    let access_type = access_type(capability)?;
    let name = mode.as_str_name();
    let reason = if name.starts_with("MULTI_NODE_") {
        Some(format!("access mode {name} is not supported: the plugin's volumes live on one node"))
    } else if matches!(mode, Mode::SingleNodeSingleWriter | Mode::SingleNodeMultiWriter)
        && !support.single_node_multi_writer
    {
        Some(format!("access mode {name} is not supported: the plugin does not advertise SINGLE_NODE_MULTI_WRITER"))
    } else if access_type == AccessType::Block && !support.block {
        Some("block volumes are not supported: the plugin runs with --no-block".to_string())
    } else {
        None
    };
    Ok(reason)
}

/// The access modes (proto names) a list of capabilities asks for, in order; a capability the plugin cannot serve
/// (see [`unsupported`]) is INVALID_ARGUMENT.
pub fn requested_access_modes(capabilities: &[VolumeCapability], support: Support) -> Result<Vec<String>, Status> {
    let mut modes = Vec::new();
    for capability in capabilities {
        if let Some(reason) = unsupported(capability, support)? {
            return Err(Status::invalid_argument(reason));
        }
        modes.push(access_mode(capability)?.as_str_name().to_string());
    }
    Ok(modes)
}

/// The one access type a list of capabilities asks for. The list must not be empty, and a volume is
/// either block or mount, never both.
pub fn requested_access_type(capabilities: &[VolumeCapability]) -> Result<AccessType, Status> {
    let mut wanted = None;
    for capability in capabilities {
        let this = access_type(capability)?;
        if wanted.is_some_and(|w| w != this) {
            return Err(Status::invalid_argument("volume capabilities ask for both block and mount access"));
        }
        wanted = Some(this);
    }
    wanted.ok_or_else(|| Status::invalid_argument("volume capabilities are missing"))
}

/// How a node request attaches a volume at a path, for comparing repeated requests.
pub fn attachment(
    capability: &VolumeCapability,
    readonly: bool,
    staging_target_path: &str,
) -> Result<Attachment, Status> {
    let access_type = access_type(capability)?;
    let (fs_type, mount_flags) = match &capability.access_type {
        Some(RequestedType::Mount(mount)) => (mount.fs_type.clone(), mount.mount_flags.clone()),
        _ => (String::new(), Vec::new()),
    };
    Ok(Attachment {
        access_type,
        access_mode: access_mode(capability)?.as_str_name().to_string(),
        fs_type,
        mount_flags,
        readonly,
        staging_target_path: staging_target_path.to_string(),
    })
}

/// Whether an access mode lets one node publish the volume at several target paths at once.
pub fn allows_several_targets(access_mode: &str) -> bool {
    access_mode == Mode::SingleNodeMultiWriter.as_str_name() || access_mode.starts_with("MULTI_NODE_")
}

#[cfg(test)]
mod tests {
    use super::*;
    use csi_client::proto::volume_capability::{AccessMode, BlockVolume, MountVolume};

    fn capability(access_type: Option<RequestedType>, mode: Option<i32>) -> VolumeCapability {
        VolumeCapability { access_type, access_mode: mode.map(|mode| AccessMode { mode }) }
    }

    fn block() -> Option<RequestedType> {
        Some(RequestedType::Block(BlockVolume {}))
    }

    fn mount() -> Option<RequestedType> {
        Some(RequestedType::Mount(MountVolume::default()))
    }

    #[test]
    fn checks_capability_lists() {
        let writer = Some(Mode::SingleNodeWriter as i32);
        let cases: Vec<(Vec<VolumeCapability>, Result<AccessType, ()>)> = vec![
            (vec![capability(mount(), writer)], Ok(AccessType::Mount)),
            (vec![capability(block(), writer)], Ok(AccessType::Block)),
            (
                vec![capability(block(), writer), capability(block(), Some(Mode::MultiNodeReaderOnly as i32))],
                Ok(AccessType::Block),
            ),
            (vec![], Err(())),
            (vec![capability(None, writer)], Err(())),
            (vec![capability(mount(), None)], Err(())),
            (vec![capability(mount(), Some(0))], Err(())),
            (vec![capability(mount(), Some(99))], Err(())),
            (vec![capability(mount(), writer), capability(block(), writer)], Err(())),
        ];
        for (capabilities, want) in cases {
            let got = requested_access_type(&capabilities);
            match (&got, want) {
                (Ok(got), Ok(want)) => assert_eq!(*got, want),
                (Err(status), Err(())) => assert_eq!(status.code(), tonic::Code::InvalidArgument),
                _ => panic!("{capabilities:?}: got {got:?}"),
            }
        }
    }

    #[test]
    fn refuses_what_the_plugin_does_not_advertise() {
        let all = Support { single_node_multi_writer: true, block: true };
        let old = Support { single_node_multi_writer: false, block: true };
        let no_block = Support { single_node_multi_writer: true, block: false };
        // (access type, mode, support, refusal text it must contain; None = served)
        let cases = [
            (mount(), Mode::SingleNodeWriter, all, None),
            (block(), Mode::SingleNodeWriter, all, None),
            (mount(), Mode::SingleNodeReaderOnly, old, None),
            (mount(), Mode::SingleNodeMultiWriter, all, None),
            (mount(), Mode::SingleNodeSingleWriter, all, None),
            (mount(), Mode::SingleNodeSingleWriter, old, Some("does not advertise SINGLE_NODE_MULTI_WRITER")),
            (mount(), Mode::SingleNodeMultiWriter, old, Some("does not advertise SINGLE_NODE_MULTI_WRITER")),
            (mount(), Mode::MultiNodeMultiWriter, all, Some("MULTI_NODE_MULTI_WRITER is not supported")),
            (mount(), Mode::MultiNodeReaderOnly, all, Some("MULTI_NODE_READER_ONLY is not supported")),
            (block(), Mode::MultiNodeSingleWriter, all, Some("live on one node")),
            (block(), Mode::SingleNodeWriter, no_block, Some("block volumes are not supported")),
            (mount(), Mode::SingleNodeWriter, no_block, None),
        ];
        for (access_type, mode, support, want) in cases {
            let one = capability(access_type, Some(mode as i32));
            let got = unsupported(&one, support).unwrap();
            match (&got, want) {
                (None, None) => {}
                (Some(reason), Some(part)) => assert!(reason.contains(part), "{mode:?} {support:?}: {reason}"),
                _ => panic!("{mode:?} {support:?}: got {got:?}, want {want:?}"),
            }
            let listed = requested_access_modes(std::slice::from_ref(&one), support);
            assert_eq!(listed.is_ok(), want.is_none(), "{mode:?} {support:?}");
        }
    }

    #[test]
    fn knows_which_modes_allow_several_targets() {
        let cases = [
            (Mode::SingleNodeWriter, false),
            (Mode::SingleNodeReaderOnly, false),
            (Mode::SingleNodeSingleWriter, false),
            (Mode::SingleNodeMultiWriter, true),
            (Mode::MultiNodeReaderOnly, true),
            (Mode::MultiNodeSingleWriter, true),
            (Mode::MultiNodeMultiWriter, true),
        ];
        for (mode, want) in cases {
            assert_eq!(allows_several_targets(mode.as_str_name()), want, "{mode:?}");
        }
    }
}
