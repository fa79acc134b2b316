//! ControllerPublishVolume and ControllerUnpublishVolume for `--attach-required`: the checks the CSI spec asks
//! for, and the node IDs a volume is published to recorded for ListVolumes (a hostpath volume is reachable from its
//! node without attaching; nothing else changes).

use csi_client::proto::{
    ControllerPublishVolumeRequest, ControllerPublishVolumeResponse, ControllerUnpublishVolumeRequest,
    ControllerUnpublishVolumeResponse,
};
use tonic::Status;

use crate::capability::access_type;
use crate::plugin::Shared;

pub fn publish(
    shared: &Shared,
    request: ControllerPublishVolumeRequest,
) -> Result<ControllerPublishVolumeResponse, Status> {
    check_served(shared)?;
    if request.volume_id.is_empty() {
        return Err(Status::invalid_argument("volume_id is required"));
    }
    if request.node_id.is_empty() {
        return Err(Status::invalid_argument("node_id is required"));
    }
    let capability =
        request.volume_capability.as_ref().ok_or_else(|| Status::invalid_argument("volume_capability is required"))?;
    access_type(capability)?;
    if request.node_id != shared.config.node_id {
        return Err(Status::not_found(format!("node {} does not exist", request.node_id)));
    }
    shared.store().update(|change| {
        let volume = change.state.volumes.get_mut(&request.volume_id);
        let volume = volume.ok_or_else(|| Status::not_found(format!("volume {} does not exist", request.volume_id)))?;
        volume.published_nodes.insert(request.node_id.clone());
        Ok(ControllerPublishVolumeResponse { publish_context: Default::default() })
    })
}

pub fn unpublish(
    shared: &Shared,
    request: ControllerUnpublishVolumeRequest,
) -> Result<ControllerUnpublishVolumeResponse, Status> {
    check_served(shared)?;
    if request.volume_id.is_empty() {
        return Err(Status::invalid_argument("volume_id is required"));
    }
    // Unpublishing what is not published (or no longer exists) succeeds: the call is idempotent. No node ID: from
    // every node.
    shared.store().update(|change| {
        if let Some(volume) = change.state.volumes.get_mut(&request.volume_id) {
            match request.node_id.is_empty() {
                true => volume.published_nodes.clear(),
                false => _ = volume.published_nodes.remove(&request.node_id),
            }
        }
        Ok(ControllerUnpublishVolumeResponse {})
    })
}

fn check_served(shared: &Shared) -> Result<(), Status> {
    if shared.config.attach_required {
        Ok(())
    } else {
        Err(Status::unimplemented("ControllerPublishVolume is served only with --attach-required"))
    }
}
