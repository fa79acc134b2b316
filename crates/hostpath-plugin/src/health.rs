//! Volume and storage health (CSI v1.13, alpha): ControllerGetVolumeHealth, ControllerListVolumeHealth,
//! NodeGetVolumeHealth and NodeGetStorageHealth. Served; the controller's two are advertised with `--volume-health`
//! (a CO asks only what a plugin advertises; other tests call them directly).
//!
//! Only adverse conditions are reported: a volume whose data has gone from the state directory is INACCESSIBLE
//! (what ControllerGetVolume reported as an abnormal VolumeCondition before v1.13 removed it), and a state directory
//! that cannot be read is STORAGE_UNREACHABLE from the node.

use csi_client::proto::node_get_storage_health_response::StorageBackendHealth;
use csi_client::proto::volume_health::VolumeHealthEntry;
use csi_client::proto::{
    ControllerGetVolumeHealthRequest, ControllerGetVolumeHealthResponse, ControllerListVolumeHealthRequest,
    ControllerListVolumeHealthResponse, NodeGetStorageHealthRequest, NodeGetStorageHealthResponse,
    NodeGetVolumeHealthRequest, NodeGetVolumeHealthResponse, StorageHealthErrorType, VolumeHealth,
    VolumeHealthErrorType,
};
use tonic::Status;

use crate::paging::page;
use crate::plugin::Shared;

/// The reason of an INACCESSIBLE volume.
pub const DATA_MISSING: &str = "VolumeDataMissing";
/// The reason of an unreachable backend.
pub const STATE_DIRECTORY_UNREADABLE: &str = "StateDirectoryUnreadable";

/// The health of volume `id` whose data is `present` or not.
fn volume_health(id: &str, present: bool) -> VolumeHealth {
    let health_statuses = if present {
        Vec::new()
    } else {
        vec![VolumeHealthEntry {
            status: VolumeHealthErrorType::Inaccessible as i32,
            reason: DATA_MISSING.to_string(),
            message: "volume data is missing from the state directory".to_string(),
        }]
    };
    VolumeHealth { volume_id: id.to_string(), health_statuses }
}

/// One known volume's health; InvalidArgument without an id, NotFound for an unknown one.
fn known_volume_health(shared: &Shared, id: &str) -> Result<VolumeHealth, Status> {
    if id.is_empty() {
        return Err(Status::invalid_argument("volume_id is required"));
    }
    let store = shared.store();
    if !store.state().volumes.contains_key(id) {
        return Err(Status::not_found(format!("volume {id} does not exist")));
    }
    Ok(volume_health(id, store.layout().volume(id).exists()))
}

pub fn controller_volume(
    shared: &Shared,
    request: ControllerGetVolumeHealthRequest,
) -> Result<ControllerGetVolumeHealthResponse, Status> {
    Ok(ControllerGetVolumeHealthResponse { volume_health: Some(known_volume_health(shared, &request.volume_id)?) })
}

/// The volumes with an adverse condition, paged as ListVolumes is.
pub fn controller_list(
    shared: &Shared,
    request: ControllerListVolumeHealthRequest,
) -> Result<ControllerListVolumeHealthResponse, Status> {
    let store = shared.store();
    let state = store.state();
    let abnormal = state
        .volumes
        .values()
        .map(|volume| (volume.sequence, volume_health(&volume.id, store.layout().volume(&volume.id).exists())))
        .filter(|(_, health)| !health.health_statuses.is_empty())
        .collect();
    let (entries, next_token) = page(abnormal, request.max_entries, &request.starting_token, state.next_sequence)?;
    Ok(ControllerListVolumeHealthResponse { entries, next_token })
}

pub fn node_volume(
    shared: &Shared,
    request: NodeGetVolumeHealthRequest,
) -> Result<NodeGetVolumeHealthResponse, Status> {
    Ok(NodeGetVolumeHealthResponse { volume_health: Some(known_volume_health(shared, &request.volume_id)?) })
}

pub fn node_storage(shared: &Shared, _: NodeGetStorageHealthRequest) -> Result<NodeGetStorageHealthResponse, Status> {
    let store = shared.store();
    let root = store.layout().root();
    let backend_health = match std::fs::read_dir(root) {
        Ok(_) => Vec::new(),
        Err(err) => vec![StorageBackendHealth {
            status: StorageHealthErrorType::StorageUnreachable as i32,
            reason: STATE_DIRECTORY_UNREADABLE.to_string(),
            message: format!("state directory {}: {err}", root.display()),
            volume_capability: None,
        }],
    };
    Ok(NodeGetStorageHealthResponse { backend_health })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_missing_data_is_reported() {
        assert!(volume_health("v1", true).health_statuses.is_empty(), "present data: no condition");
        let missing = volume_health("v1", false);
        assert_eq!(missing.volume_id, "v1");
        assert_eq!(missing.health_statuses.len(), 1);
        assert_eq!(missing.health_statuses[0].status, VolumeHealthErrorType::Inaccessible as i32);
        assert_eq!(missing.health_statuses[0].reason, DATA_MISSING);
    }
}
