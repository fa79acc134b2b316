//! Volume and storage health (CSI v1.13, alpha): ControllerGetVolumeHealth, ControllerListVolumeHealth,
//! NodeGetVolumeHealth and NodeGetStorageHealth. Served; the controller's two are advertised with `--volume-health`
//! (a CO asks only what a plugin advertises; other tests call them directly).
//!
//! Only adverse conditions are reported: a volume whose data has gone from the state directory is INACCESSIBLE
//! (what ControllerGetVolume reported as an abnormal VolumeCondition before v1.13 removed it), one beside whose data
//! a test wrote `<state-dir>/volumes/<id>.degraded` is DEGRADED (the file's text is the message; removing it heals
//! the volume), and a state directory that cannot be read is STORAGE_UNREACHABLE from the node.

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
/// The reason of a volume a test marked degraded.
pub const MARKED_DEGRADED: &str = "VolumeMarkedDegraded";
/// The reason of an unreachable backend.
pub const STATE_DIRECTORY_UNREADABLE: &str = "StateDirectoryUnreadable";

/// The health of volume `id` whose data is `present` or not, and marked `degraded` (with the marker's text) or not.
fn volume_health(id: &str, present: bool, degraded: Option<String>) -> VolumeHealth {
    let mut health_statuses = Vec::new();
    if !present {
        health_statuses.push(VolumeHealthEntry {
            status: VolumeHealthErrorType::Inaccessible as i32,
            reason: DATA_MISSING.to_string(),
            message: "volume data is missing from the state directory".to_string(),
        });
    }
    if let Some(message) = degraded {
        health_statuses.push(VolumeHealthEntry {
            status: VolumeHealthErrorType::Degraded as i32,
            reason: MARKED_DEGRADED.to_string(),
            message,
        });
    }
    VolumeHealth { volume_id: id.to_string(), health_statuses }
}

/// The health of a volume whose data is at `data`: the data's presence and the test's degraded marker beside it.
fn health_at(id: &str, data: &std::path::Path) -> VolumeHealth {
    let marker = std::path::PathBuf::from(format!("{}.degraded", data.display()));
    let degraded = std::fs::read_to_string(marker).ok().map(|text| text.trim().to_string());
    volume_health(id, data.exists(), degraded)
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
    Ok(health_at(id, &store.layout().volume(id)))
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
        .map(|volume| (volume.sequence, health_at(&volume.id, &store.layout().volume(&volume.id))))
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
        assert!(volume_health("v1", true, None).health_statuses.is_empty(), "present data: no condition");
        let missing = volume_health("v1", false, None);
        assert_eq!(missing.volume_id, "v1");
        assert_eq!(missing.health_statuses.len(), 1);
        assert_eq!(missing.health_statuses[0].status, VolumeHealthErrorType::Inaccessible as i32);
        assert_eq!(missing.health_statuses[0].reason, DATA_MISSING);
    }

    #[test]
    fn a_marked_volume_is_degraded_until_the_marker_goes() {
        let dir = std::env::temp_dir().join(format!("hostpath-health-{}", std::process::id()));
        let data = dir.join("v1");
        std::fs::create_dir_all(&data).unwrap();
        assert!(health_at("v1", &data).health_statuses.is_empty(), "no marker: healthy");
        std::fs::write(dir.join("v1.degraded"), "slow disk\n").unwrap();
        let marked = health_at("v1", &data);
        assert_eq!(marked.health_statuses.len(), 1);
        assert_eq!(marked.health_statuses[0].status, VolumeHealthErrorType::Degraded as i32);
        assert_eq!(
            (marked.health_statuses[0].reason.as_str(), marked.health_statuses[0].message.as_str()),
            (MARKED_DEGRADED, "slow disk")
        );
        std::fs::remove_file(dir.join("v1.degraded")).unwrap();
        assert!(health_at("v1", &data).health_statuses.is_empty(), "the marker removed: healthy again");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
