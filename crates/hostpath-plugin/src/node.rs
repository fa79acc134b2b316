//! The Node service: books always, and with `--node-mounts` real mounts too.
//!
//! NodeStageVolume records the staging path (creating the directory if the CO has not). NodePublishVolume
//! records the target path and creates it, a directory for a mount volume or an empty file for a block
//! volume, as a real plugin's mount point or device node would be; NodeUnpublishVolume removes it again,
//! as the spec requires. Repeated calls follow the spec's idempotency tables: the same arguments are OK,
//! different arguments at the same path are ALREADY_EXISTS, and a second target path needs an access mode that
//! allows several.
//!
//! By default that is all (bookkeeping): nothing is mounted, the volume's data stays under the state directory and
//! the plugin needs no privileges. With `--node-mounts` each call also does on the host what a real driver does
//! ([`crate::node_mounts`]): bind mounts for filesystem volumes, loop devices for block volumes, `statvfs` numbers
//! for NodeGetVolumeStats, and a loop device that takes the grown size at NodeExpandVolume.

use std::fs::{self, OpenOptions};
use std::path::Path;

use csi_client::proto::node_server::Node;
use csi_client::proto::node_service_capability::{self, rpc};
use csi_client::proto::volume_usage::Unit;
use csi_client::proto::{
    NodeExpandVolumeRequest, NodeExpandVolumeResponse, NodeGetCapabilitiesRequest, NodeGetCapabilitiesResponse,
    NodeGetInfoRequest, NodeGetInfoResponse, NodeGetStorageHealthRequest, NodeGetStorageHealthResponse,
    NodeGetVolumeHealthRequest, NodeGetVolumeHealthResponse, NodeGetVolumeStatsRequest, NodeGetVolumeStatsResponse,
    NodePublishVolumeRequest, NodePublishVolumeResponse, NodeServiceCapability, NodeStageVolumeRequest,
    NodeStageVolumeResponse, NodeUnpublishVolumeRequest, NodeUnpublishVolumeResponse, NodeUnstageVolumeRequest,
    NodeUnstageVolumeResponse, VolumeUsage,
};
use tonic::{Request, Response, Status};

use crate::capability::{access_type, allows_several_targets, attachment};
use crate::plugin::{Plugin, Shared};
use crate::publish::check_publish_context;
use crate::state::{AccessType, Volume};
use crate::storage;
use crate::topology::node_topology;
use crate::{health, node_mounts};

#[tonic::async_trait]
impl Node for Plugin {
    async fn node_stage_volume(
        &self,
        request: Request<NodeStageVolumeRequest>,
    ) -> Result<Response<NodeStageVolumeResponse>, Status> {
        self.call("NodeStageVolume", request, stage).await
    }

    async fn node_unstage_volume(
        &self,
        request: Request<NodeUnstageVolumeRequest>,
    ) -> Result<Response<NodeUnstageVolumeResponse>, Status> {
        self.call("NodeUnstageVolume", request, unstage).await
    }

    async fn node_publish_volume(
        &self,
        request: Request<NodePublishVolumeRequest>,
    ) -> Result<Response<NodePublishVolumeResponse>, Status> {
        self.call("NodePublishVolume", request, publish).await
    }

    async fn node_unpublish_volume(
        &self,
        request: Request<NodeUnpublishVolumeRequest>,
    ) -> Result<Response<NodeUnpublishVolumeResponse>, Status> {
        self.call("NodeUnpublishVolume", request, unpublish).await
    }

    async fn node_get_volume_stats(
        &self,
        request: Request<NodeGetVolumeStatsRequest>,
    ) -> Result<Response<NodeGetVolumeStatsResponse>, Status> {
        self.call("NodeGetVolumeStats", request, volume_stats).await
    }

    async fn node_get_volume_health(
        &self,
        request: Request<NodeGetVolumeHealthRequest>,
    ) -> Result<Response<NodeGetVolumeHealthResponse>, Status> {
        self.call("NodeGetVolumeHealth", request, health::node_volume).await
    }

    async fn node_get_storage_health(
        &self,
        request: Request<NodeGetStorageHealthRequest>,
    ) -> Result<Response<NodeGetStorageHealthResponse>, Status> {
        self.call("NodeGetStorageHealth", request, health::node_storage).await
    }

    async fn node_expand_volume(
        &self,
        request: Request<NodeExpandVolumeRequest>,
    ) -> Result<Response<NodeExpandVolumeResponse>, Status> {
        self.call("NodeExpandVolume", request, expand).await
    }

    async fn node_get_capabilities(
        &self,
        request: Request<NodeGetCapabilitiesRequest>,
    ) -> Result<Response<NodeGetCapabilitiesResponse>, Status> {
        self.call("NodeGetCapabilities", request, capabilities).await
    }

    async fn node_get_info(
        &self,
        request: Request<NodeGetInfoRequest>,
    ) -> Result<Response<NodeGetInfoResponse>, Status> {
        self.call("NodeGetInfo", request, info).await
    }
}

fn capabilities(shared: &Shared, _: NodeGetCapabilitiesRequest) -> Result<NodeGetCapabilitiesResponse, Status> {
    let mut kinds = vec![rpc::Type::StageUnstageVolume, rpc::Type::GetVolumeStats, rpc::Type::ExpandVolume];
    if shared.config.single_node_multi_writer {
        kinds.push(rpc::Type::SingleNodeMultiWriter);
    }
    let capabilities = kinds
        .into_iter()
        .map(|kind| NodeServiceCapability {
            r#type: Some(node_service_capability::Type::Rpc(node_service_capability::Rpc { r#type: kind as i32 })),
        })
        .collect();
    Ok(NodeGetCapabilitiesResponse { capabilities })
}

fn info(shared: &Shared, _: NodeGetInfoRequest) -> Result<NodeGetInfoResponse, Status> {
    Ok(NodeGetInfoResponse {
        node_id: shared.config.node_id.clone(),
        max_volumes_per_node: shared.config.max_volumes_per_node,
        accessible_topology: Some(node_topology(&shared.config.node_id)),
    })
}

fn stage(shared: &Shared, request: NodeStageVolumeRequest) -> Result<NodeStageVolumeResponse, Status> {
    let id = require(&request.volume_id, "volume_id")?;
    let staging_path = require(&request.staging_target_path, "staging_target_path")?;
    let capability =
        request.volume_capability.as_ref().ok_or_else(|| Status::invalid_argument("volume_capability is required"))?;
    let wanted = attachment(capability, false, "")?;
    shared.store().update(|change| {
        let volume = volume_mut(&mut change.state.volumes, id)?;
        check_type(volume, wanted.access_type)?;
        check_publish_context(&shared.config, volume, &request.publish_context)?;
        match volume.staged.get(staging_path) {
            Some(existing) if *existing != wanted => {
                return Err(Status::already_exists(format!(
                    "volume {id} is already staged at {staging_path} with another capability"
                )));
            }
            // Books only: nothing on the host to check. With mounts, the stage is made again if a crash undid it.
            Some(_) if !shared.config.node_mounts => return Ok(NodeStageVolumeResponse {}),
            _ => {}
        }
        fs::create_dir_all(staging_path).map_err(|e| internal("creating staging path", staging_path, e))?;
        if shared.config.node_mounts {
            node_mounts::stage(&change.layout.volume(id), wanted.access_type, Path::new(staging_path))?;
        }
        volume.staged.insert(staging_path.to_string(), wanted);
        Ok(NodeStageVolumeResponse {})
    })
}

fn unstage(shared: &Shared, request: NodeUnstageVolumeRequest) -> Result<NodeUnstageVolumeResponse, Status> {
    let id = require(&request.volume_id, "volume_id")?;
    let staging_path = require(&request.staging_target_path, "staging_target_path")?;
    shared.store().update(|change| {
        let backing = change.layout.volume(id);
        let volume = volume_mut(&mut change.state.volumes, id)?;
        if shared.config.node_mounts {
            if let Some(target) = volume.published.iter().find(|(_, p)| p.staging_target_path == staging_path) {
                return Err(Status::failed_precondition(format!(
                    "volume {id} is still published at {} from {staging_path}",
                    target.0
                )));
            }
            // A block volume's loop device serves every staging path: it goes with the last one.
            let last = volume.staged.keys().all(|path| path == staging_path);
            if volume.access_type == AccessType::Mount || last {
                node_mounts::unstage(&backing, volume.access_type, Path::new(staging_path))?;
            }
        }
        // The staging directory belongs to the CO, which created it; only the record (and a mount) goes.
        volume.staged.remove(staging_path);
        Ok(NodeUnstageVolumeResponse {})
    })
}

fn publish(shared: &Shared, request: NodePublishVolumeRequest) -> Result<NodePublishVolumeResponse, Status> {
    let id = require(&request.volume_id, "volume_id")?;
    let target = require(&request.target_path, "target_path")?;
    let capability =
        request.volume_capability.as_ref().ok_or_else(|| Status::invalid_argument("volume_capability is required"))?;
    let wanted = attachment(capability, request.readonly, &request.staging_target_path)?;
    if request.staging_target_path.is_empty() {
        // The plugin advertises STAGE_UNSTAGE_VOLUME, so publishing must follow staging.
        return Err(Status::failed_precondition("staging_target_path is required: the volume must be staged first"));
    }
    shared.store().update(|change| {
        let volume = volume_mut(&mut change.state.volumes, id)?;
        check_type(volume, wanted.access_type)?;
        check_publish_context(&shared.config, volume, &request.publish_context)?;
        if !volume.staged.contains_key(&request.staging_target_path) {
            return Err(Status::failed_precondition(format!(
                "volume {id} is not staged at {}",
                request.staging_target_path
            )));
        }
        match volume.published.get(target) {
            Some(existing) if *existing != wanted => {
                return Err(Status::already_exists(format!(
                    "volume {id} is already published at {target} with other arguments"
                )));
            }
            // Books only: nothing on the host to check. With mounts, the mount is made again if a crash undid it.
            Some(_) if !shared.config.node_mounts => return Ok(NodePublishVolumeResponse {}),
            Some(_) => {}
            None => {
                let shareable = allows_several_targets(&wanted.access_mode)
                    && volume.published.values().all(|p| allows_several_targets(&p.access_mode));
                if let Some(other) = volume.published.keys().next().filter(|_| !shareable) {
                    return Err(Status::failed_precondition(format!(
                        "volume {id} is already published at {other} and its access mode allows one target path"
                    )));
                }
            }
        }
        create_target(wanted.access_type, Path::new(target))?;
        if shared.config.node_mounts {
            node_mounts::publish(&change.layout.volume(id), &wanted, Path::new(target))?;
        }
        volume.published.insert(target.to_string(), wanted);
        Ok(NodePublishVolumeResponse {})
    })
}

fn unpublish(shared: &Shared, request: NodeUnpublishVolumeRequest) -> Result<NodeUnpublishVolumeResponse, Status> {
    let id = require(&request.volume_id, "volume_id")?;
    let target = require(&request.target_path, "target_path")?;
    shared.store().update(|change| {
        let volume = volume_mut(&mut change.state.volumes, id)?;
        if shared.config.node_mounts {
            // The target path is this volume's, recorded or not: a crash after mounting and before writing the
            // state leaves a mount the books do not know.
            node_mounts::unpublish(Path::new(target))?;
            volume.published.remove(target);
        } else if volume.published.contains_key(target) {
            // Only a path this plugin created is removed; an unknown one is not ours to touch.
            storage::remove(Path::new(target))?;
            volume.published.remove(target);
        }
        Ok(NodeUnpublishVolumeResponse {})
    })
}

fn volume_stats(shared: &Shared, request: NodeGetVolumeStatsRequest) -> Result<NodeGetVolumeStatsResponse, Status> {
    let id = require(&request.volume_id, "volume_id")?;
    let path = require(&request.volume_path, "volume_path")?;
    let store = shared.store();
    let volume = store.state().volumes.get(id).ok_or_else(|| not_found(id))?;
    check_available_at(volume, path)?;
    if shared.config.node_mounts {
        let usage = node_mounts::usage(&store.layout().volume(id), volume.access_type, Path::new(path))?;
        return Ok(NodeGetVolumeStatsResponse { usage });
    }
    let total = volume.capacity_bytes;
    let usage = match volume.access_type {
        AccessType::Mount => {
            let used = storage::used_bytes(&store.layout().volume(id))?.min(total);
            VolumeUsage { available: total - used, total, used, unit: Unit::Bytes as i32 }
        }
        // A block device has a size and nothing else a CO could use.
        AccessType::Block => VolumeUsage { available: 0, total, used: 0, unit: Unit::Bytes as i32 },
    };
    Ok(NodeGetVolumeStatsResponse { usage: vec![usage] })
}

/// The controller has already grown the volume; the node side (a filesystem resize in a real plugin)
/// only confirms the size, and refuses more than the controller granted. With `--node-mounts`, a block volume's loop
/// device takes the grown file's size.
fn expand(shared: &Shared, request: NodeExpandVolumeRequest) -> Result<NodeExpandVolumeResponse, Status> {
    let id = require(&request.volume_id, "volume_id")?;
    let path = require(&request.volume_path, "volume_path")?;
    let asked_type = request.volume_capability.as_ref().map(access_type).transpose()?;
    let store = shared.store();
    let volume = store.state().volumes.get(id).ok_or_else(|| not_found(id))?;
    check_available_at(volume, path)?;
    if asked_type.is_some_and(|t| t != volume.access_type) {
        return Err(Status::invalid_argument(format!("volume {id} is a {} volume", volume.access_type.as_str())));
    }
    let required = request.capacity_range.map(|r| r.required_bytes).unwrap_or(0);
    if required > volume.capacity_bytes {
        return Err(Status::out_of_range(format!(
            "volume {id} has {} bytes; expand it with ControllerExpandVolume before asking the node for {required}",
            volume.capacity_bytes
        )));
    }
    if shared.config.node_mounts && volume.access_type == AccessType::Block {
        let capacity_bytes = node_mounts::expand_block(&store.layout().volume(id))?;
        return Ok(NodeExpandVolumeResponse { capacity_bytes });
    }
    Ok(NodeExpandVolumeResponse { capacity_bytes: volume.capacity_bytes })
}

fn require<'a>(value: &'a str, field: &str) -> Result<&'a str, Status> {
    if value.is_empty() {
        return Err(Status::invalid_argument(format!("{field} is required")));
    }
    Ok(value)
}

fn not_found(id: &str) -> Status {
    Status::not_found(format!("volume {id} does not exist"))
}

fn volume_mut<'a>(
    volumes: &'a mut std::collections::BTreeMap<String, Volume>,
    id: &str,
) -> Result<&'a mut Volume, Status> {
    volumes.get_mut(id).ok_or_else(|| not_found(id))
}

/// A block volume cannot be used as a mount volume or the other way round ("exceeds capabilities").
fn check_type(volume: &Volume, wanted: AccessType) -> Result<(), Status> {
    if volume.access_type != wanted {
        return Err(Status::failed_precondition(format!(
            "volume {} is a {} volume, the request asks for {}",
            volume.id,
            volume.access_type.as_str(),
            wanted.as_str()
        )));
    }
    Ok(())
}

/// Stats and node expansion name a path where the volume is published or staged.
fn check_available_at(volume: &Volume, path: &str) -> Result<(), Status> {
    if volume.published.contains_key(path) || volume.staged.contains_key(path) {
        return Ok(());
    }
    Err(Status::not_found(format!("volume {} is not staged or published at {path}", volume.id)))
}

fn create_target(access_type: AccessType, target: &Path) -> Result<(), Status> {
    let created = match access_type {
        AccessType::Mount => fs::create_dir_all(target),
        AccessType::Block => OpenOptions::new().write(true).create(true).truncate(false).open(target).map(drop),
    };
    created.map_err(|e| internal("creating target path", &target.to_string_lossy(), e))
}

fn internal(action: &str, path: &str, error: std::io::Error) -> Status {
    Status::internal(format!("{action} {path}: {error}"))
}
