//! Building CSI requests from csictl's arguments, and paging through lists.

use std::collections::HashMap;

use csi_client::proto::{self, volume_capability, volume_content_source};
use csi_client::{CallError, CsiClient};

use crate::args::{AccessMode, Command, SecretArg};

pub fn secrets(secrets: Vec<SecretArg>) -> HashMap<String, String> {
    secrets.into_iter().map(|s| (s.key, s.value)).collect()
}

fn access_mode(mode: AccessMode) -> volume_capability::access_mode::Mode {
    use volume_capability::access_mode::Mode;
    match mode {
        AccessMode::SingleNodeWriter => Mode::SingleNodeWriter,
        AccessMode::SingleNodeReaderOnly => Mode::SingleNodeReaderOnly,
        AccessMode::MultiNodeReaderOnly => Mode::MultiNodeReaderOnly,
        AccessMode::MultiNodeSingleWriter => Mode::MultiNodeSingleWriter,
        AccessMode::MultiNodeMultiWriter => Mode::MultiNodeMultiWriter,
        AccessMode::SingleNodeSingleWriter => Mode::SingleNodeSingleWriter,
        AccessMode::SingleNodeMultiWriter => Mode::SingleNodeMultiWriter,
    }
}

fn capability(block: bool, fs_type: String, mode: AccessMode) -> proto::VolumeCapability {
    let access_type = if block {
        volume_capability::AccessType::Block(volume_capability::BlockVolume {})
    } else {
        volume_capability::AccessType::Mount(volume_capability::MountVolume { fs_type, ..Default::default() })
    };
    proto::VolumeCapability {
        access_type: Some(access_type),
        access_mode: Some(volume_capability::AccessMode { mode: access_mode(mode) as i32 }),
    }
}

pub fn publish_volume(
    volume_id: String,
    node_id: String,
    block: bool,
    mode: AccessMode,
    secret_args: Vec<SecretArg>,
) -> proto::ControllerPublishVolumeRequest {
    proto::ControllerPublishVolumeRequest {
        volume_id,
        node_id,
        volume_capability: Some(capability(block, String::new(), mode)),
        secrets: secrets(secret_args),
        ..Default::default()
    }
}

pub fn create_volume(command: Command) -> proto::CreateVolumeRequest {
    let Command::CreateVolume {
        name,
        size,
        block,
        fs_type,
        access_mode,
        params,
        mutable_params,
        secrets: secret_args,
        from_snapshot,
        from_volume,
    } = command
    else {
        unreachable!("create_volume is only called for create-volume");
    };
    let source = match (from_snapshot, from_volume) {
        (Some(snapshot_id), _) => {
            Some(volume_content_source::Type::Snapshot(volume_content_source::SnapshotSource { snapshot_id }))
        }
        (None, Some(volume_id)) => {
            Some(volume_content_source::Type::Volume(volume_content_source::VolumeSource { volume_id }))
        }
        (None, None) => None,
    };
    proto::CreateVolumeRequest {
        name,
        capacity_range: size.map(|required_bytes| proto::CapacityRange { required_bytes, limit_bytes: 0 }),
        volume_capabilities: vec![capability(block, fs_type, access_mode)],
        parameters: params.into_iter().collect(),
        secrets: secrets(secret_args),
        volume_content_source: source.map(|t| proto::VolumeContentSource { r#type: Some(t) }),
        accessibility_requirements: None,
        mutable_parameters: mutable_params.into_iter().collect(),
    }
}

pub fn expand_volume(
    volume_id: String,
    size: i64,
    block: bool,
    secret_args: Vec<SecretArg>,
) -> proto::ControllerExpandVolumeRequest {
    proto::ControllerExpandVolumeRequest {
        volume_id,
        capacity_range: Some(proto::CapacityRange { required_bytes: size, limit_bytes: 0 }),
        secrets: secrets(secret_args),
        volume_capability: Some(capability(block, String::new(), AccessMode::SingleNodeWriter)),
    }
}

/// Every volume, following next_token until the plugin stops giving one.
pub async fn all_volumes(client: &CsiClient) -> Result<Vec<proto::list_volumes_response::Entry>, CallError> {
    let mut entries = Vec::new();
    let mut token = String::new();
    loop {
        let page = client.list_volumes(proto::ListVolumesRequest { max_entries: 0, starting_token: token }).await?;
        entries.extend(page.entries);
        if page.next_token.is_empty() {
            return Ok(entries);
        }
        token = page.next_token;
    }
}

/// Every snapshot matching the filters, following next_token.
pub async fn all_snapshots(
    client: &CsiClient,
    source_volume_id: Option<String>,
    snapshot_id: Option<String>,
) -> Result<Vec<proto::Snapshot>, CallError> {
    let mut snapshots = Vec::new();
    let mut token = String::new();
    loop {
        let page = client
            .list_snapshots(proto::ListSnapshotsRequest {
                max_entries: 0,
                starting_token: token,
                source_volume_id: source_volume_id.clone().unwrap_or_default(),
                snapshot_id: snapshot_id.clone().unwrap_or_default(),
                secrets: HashMap::new(),
            })
            .await?;
        snapshots.extend(page.entries.into_iter().filter_map(|e| e.snapshot));
        if page.next_token.is_empty() {
            return Ok(snapshots);
        }
        token = page.next_token;
    }
}
