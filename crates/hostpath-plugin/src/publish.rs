//! ControllerPublishVolume and ControllerUnpublishVolume for `--attach-required`, as a driver whose volumes must be
//! attached to a node before the node can stage them.
//!
//! ControllerPublishVolume records the attachment in the state and answers a publish context naming the node and the
//! attachment; the CO hands that context to NodeStageVolume and NodePublishVolume, which refuse a volume that is not
//! attached to this node or a context that is not the current attachment's (FAILED_PRECONDITION). Repeating a
//! publish with the same arguments answers the same context; ControllerUnpublishVolume forgets the attachment, and
//! DeleteVolume refuses an attached volume.

use std::collections::HashMap;

use csi_client::proto::{
    ControllerPublishVolumeRequest, ControllerPublishVolumeResponse, ControllerUnpublishVolumeRequest,
    ControllerUnpublishVolumeResponse,
};
use tonic::Status;

use crate::capability::access_type;
use crate::plugin::{Config, Shared};
use crate::state::{ControllerPublication, Volume};

/// Publish context key: the node the volume is attached to.
pub const NODE_CONTEXT_KEY: &str = "hostpath.csi.k8s.io/attached-node";
/// Publish context key: the attachment's ID, new for every ControllerPublishVolume that attaches.
pub const ATTACHMENT_CONTEXT_KEY: &str = "hostpath.csi.k8s.io/attachment-id";

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
    let wanted_type = access_type(capability)?;
    let id = &request.volume_id;
    shared.store().update(|change| {
        let volume =
            change.state.volumes.get(id).ok_or_else(|| Status::not_found(format!("volume {id} does not exist")))?;
        if request.node_id != shared.config.node_id {
            return Err(Status::not_found(format!("node {} does not exist", request.node_id)));
        }
        if volume.access_type != wanted_type {
            return Err(Status::invalid_argument(format!(
                "volume {id} is a {} volume, the request asks for {}",
                volume.access_type.as_str(),
                wanted_type.as_str()
            )));
        }
        // One node only: an attachment already there is either this very request again or incompatible with it.
        if let Some(existing) = &volume.controller_publication {
            if existing.readonly != request.readonly {
                return Err(Status::already_exists(format!(
                    "volume {id} is attached to node {} with readonly={}",
                    existing.node_id, existing.readonly
                )));
            }
            return Ok(ControllerPublishVolumeResponse { publish_context: publish_context(existing) });
        }
        let publication =
            ControllerPublication { node_id: request.node_id.clone(), readonly: request.readonly, id: change.new_id() };
        let response = ControllerPublishVolumeResponse { publish_context: publish_context(&publication) };
        let volume = change.state.volumes.get_mut(id).expect("looked up above");
        volume.controller_publication = Some(publication);
        Ok(response)
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
    shared.store().update(|change| {
        // Unpublishing what is not published (or no longer exists) succeeds: the call is idempotent.
        let Some(volume) = change.state.volumes.get_mut(&request.volume_id) else {
            return Ok(ControllerUnpublishVolumeResponse {});
        };
        let on_node = |p: &ControllerPublication| request.node_id.is_empty() || p.node_id == request.node_id;
        if volume.controller_publication.as_ref().is_some_and(on_node) {
            if let Some(path) = volume.staged.keys().next() {
                // A real disk would be pulled from under its filesystem: the CO broke the order, say so.
                tracing::warn!(volume = %volume.id, staging_path = %path, "detached while still staged on the node");
            }
            volume.controller_publication = None;
        }
        Ok(ControllerUnpublishVolumeResponse {})
    })
}

/// With `--attach-required`, a node call's publish context must be the one of the volume's current attachment to
/// this node. Without it, the context is not looked at.
pub fn check_publish_context(
    config: &Config,
    volume: &Volume,
    context: &HashMap<String, String>,
) -> Result<(), Status> {
    if !config.attach_required {
        return Ok(());
    }
    let id = &volume.id;
    let Some(publication) = volume.controller_publication.as_ref().filter(|p| p.node_id == config.node_id) else {
        return Err(Status::failed_precondition(format!(
            "volume {id} is not attached to node {}: ControllerPublishVolume must come first",
            config.node_id
        )));
    };
    if *context != publish_context(publication) {
        return Err(Status::failed_precondition(format!(
            "the publish context {context:?} is not the one of volume {id}'s attachment to node {}",
            config.node_id
        )));
    }
    Ok(())
}

/// The node IDs a volume is attached to, for ListVolumes and ControllerGetVolume.
pub fn published_node_ids(volume: &Volume) -> Vec<String> {
    volume.controller_publication.iter().map(|p| p.node_id.clone()).collect()
}

fn publish_context(publication: &ControllerPublication) -> HashMap<String, String> {
    HashMap::from([
        (NODE_CONTEXT_KEY.to_string(), publication.node_id.clone()),
        (ATTACHMENT_CONTEXT_KEY.to_string(), publication.id.clone()),
    ])
}

fn check_served(shared: &Shared) -> Result<(), Status> {
    if shared.config.attach_required {
        Ok(())
    } else {
        Err(Status::unimplemented("ControllerPublishVolume is served only with --attach-required"))
    }
}
