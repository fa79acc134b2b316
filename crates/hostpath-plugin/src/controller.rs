//! The Controller service: each RPC hands its request to the volume or snapshot logic.
//! A hostpath volume needs no attaching: ControllerPublishVolume and ControllerUnpublishVolume are served (and
//! PUBLISH_UNPUBLISH_VOLUME and LIST_VOLUMES_PUBLISHED_NODES advertised) only with `--attach-required`, for testing
//! sidecars against such drivers.

use csi_client::proto::controller_server::Controller;
use csi_client::proto::controller_service_capability::{self, rpc};
use csi_client::proto::{
    ControllerExpandVolumeRequest, ControllerExpandVolumeResponse, ControllerGetCapabilitiesRequest,
    ControllerGetCapabilitiesResponse, ControllerGetVolumeHealthRequest, ControllerGetVolumeHealthResponse,
    ControllerGetVolumeRequest, ControllerGetVolumeResponse, ControllerListVolumeHealthRequest,
    ControllerListVolumeHealthResponse, ControllerModifyVolumeRequest, ControllerModifyVolumeResponse,
    ControllerPublishVolumeRequest, ControllerPublishVolumeResponse, ControllerServiceCapability,
    ControllerUnpublishVolumeRequest, ControllerUnpublishVolumeResponse, CreateSnapshotRequest, CreateSnapshotResponse,
    CreateVolumeRequest, CreateVolumeResponse, DeleteSnapshotRequest, DeleteSnapshotResponse, DeleteVolumeRequest,
    DeleteVolumeResponse, GetCapacityRequest, GetCapacityResponse, GetSnapshotRequest, GetSnapshotResponse,
    ListSnapshotsRequest, ListSnapshotsResponse, ListVolumesRequest, ListVolumesResponse,
    ValidateVolumeCapabilitiesRequest, ValidateVolumeCapabilitiesResponse,
};
use tonic::{Request, Response, Status};

use crate::plugin::{Plugin, Shared, VolumeHealth};
use crate::{health, publish, snapshots, volumes};

#[tonic::async_trait]
impl Controller for Plugin {
    async fn create_volume(
        &self,
        request: Request<CreateVolumeRequest>,
    ) -> Result<Response<CreateVolumeResponse>, Status> {
        self.call("CreateVolume", request, volumes::create).await
    }

    async fn delete_volume(
        &self,
        request: Request<DeleteVolumeRequest>,
    ) -> Result<Response<DeleteVolumeResponse>, Status> {
        self.call("DeleteVolume", request, volumes::delete).await
    }

    async fn validate_volume_capabilities(
        &self,
        request: Request<ValidateVolumeCapabilitiesRequest>,
    ) -> Result<Response<ValidateVolumeCapabilitiesResponse>, Status> {
        self.call("ValidateVolumeCapabilities", request, volumes::validate_capabilities).await
    }

    async fn list_volumes(
        &self,
        request: Request<ListVolumesRequest>,
    ) -> Result<Response<ListVolumesResponse>, Status> {
        self.call("ListVolumes", request, volumes::list).await
    }

    async fn controller_list_volume_health(
        &self,
        request: Request<ControllerListVolumeHealthRequest>,
    ) -> Result<Response<ControllerListVolumeHealthResponse>, Status> {
        self.call("ControllerListVolumeHealth", request, health::controller_list).await
    }

    async fn controller_get_volume_health(
        &self,
        request: Request<ControllerGetVolumeHealthRequest>,
    ) -> Result<Response<ControllerGetVolumeHealthResponse>, Status> {
        self.call("ControllerGetVolumeHealth", request, health::controller_volume).await
    }

    async fn get_capacity(
        &self,
        request: Request<GetCapacityRequest>,
    ) -> Result<Response<GetCapacityResponse>, Status> {
        self.call("GetCapacity", request, volumes::capacity).await
    }

    async fn controller_get_capabilities(
        &self,
        request: Request<ControllerGetCapabilitiesRequest>,
    ) -> Result<Response<ControllerGetCapabilitiesResponse>, Status> {
        self.call("ControllerGetCapabilities", request, capabilities).await
    }

    async fn create_snapshot(
        &self,
        request: Request<CreateSnapshotRequest>,
    ) -> Result<Response<CreateSnapshotResponse>, Status> {
        self.call("CreateSnapshot", request, snapshots::create).await
    }

    async fn delete_snapshot(
        &self,
        request: Request<DeleteSnapshotRequest>,
    ) -> Result<Response<DeleteSnapshotResponse>, Status> {
        self.call("DeleteSnapshot", request, snapshots::delete).await
    }

    async fn list_snapshots(
        &self,
        request: Request<ListSnapshotsRequest>,
    ) -> Result<Response<ListSnapshotsResponse>, Status> {
        self.call("ListSnapshots", request, snapshots::list).await
    }

    async fn get_snapshot(
        &self,
        request: Request<GetSnapshotRequest>,
    ) -> Result<Response<GetSnapshotResponse>, Status> {
        self.call("GetSnapshot", request, snapshots::get).await
    }

    async fn controller_expand_volume(
        &self,
        request: Request<ControllerExpandVolumeRequest>,
    ) -> Result<Response<ControllerExpandVolumeResponse>, Status> {
        self.call("ControllerExpandVolume", request, volumes::expand).await
    }

    async fn controller_get_volume(
        &self,
        request: Request<ControllerGetVolumeRequest>,
    ) -> Result<Response<ControllerGetVolumeResponse>, Status> {
        self.call("ControllerGetVolume", request, volumes::get).await
    }

    async fn controller_publish_volume(
        &self,
        request: Request<ControllerPublishVolumeRequest>,
    ) -> Result<Response<ControllerPublishVolumeResponse>, Status> {
        self.call("ControllerPublishVolume", request, publish::publish).await
    }

    async fn controller_unpublish_volume(
        &self,
        request: Request<ControllerUnpublishVolumeRequest>,
    ) -> Result<Response<ControllerUnpublishVolumeResponse>, Status> {
        self.call("ControllerUnpublishVolume", request, publish::unpublish).await
    }

    async fn controller_modify_volume(
        &self,
        request: Request<ControllerModifyVolumeRequest>,
    ) -> Result<Response<ControllerModifyVolumeResponse>, Status> {
        self.call("ControllerModifyVolume", request, volumes::modify).await
    }
}

/// The advertised controller capabilities. GET_VOLUME and GET_SNAPSHOT are served but not advertised (their RPCs are
/// still alpha), and so are the two volume health capabilities unless `--volume-health` names them; MODIFY_VOLUME only
/// while some mutable parameter is accepted.
fn capabilities(
    shared: &Shared,
    _: ControllerGetCapabilitiesRequest,
) -> Result<ControllerGetCapabilitiesResponse, Status> {
    let mut kinds = vec![
        rpc::Type::CreateDeleteVolume,
        rpc::Type::CreateDeleteSnapshot,
        rpc::Type::ListVolumes,
        rpc::Type::ListSnapshots,
        rpc::Type::CloneVolume,
        rpc::Type::ExpandVolume,
        rpc::Type::GetCapacity,
    ];
    if shared.config.single_node_multi_writer {
        kinds.push(rpc::Type::SingleNodeMultiWriter);
    }
    if shared.config.mutable_parameters.enabled() {
        kinds.push(rpc::Type::ModifyVolume);
    }
    match shared.config.volume_health {
        VolumeHealth::None => {}
        VolumeHealth::Get => kinds.push(rpc::Type::GetVolumeHealth),
        VolumeHealth::List => kinds.extend([rpc::Type::GetVolumeHealth, rpc::Type::ListVolumeHealth]),
    }
    if shared.config.attach_required {
        kinds.extend([rpc::Type::PublishUnpublishVolume, rpc::Type::ListVolumesPublishedNodes]);
    }
    let capabilities = kinds
        .into_iter()
        .map(|kind| ControllerServiceCapability {
            r#type: Some(controller_service_capability::Type::Rpc(controller_service_capability::Rpc {
                r#type: kind as i32,
            })),
        })
        .collect();
    Ok(ControllerGetCapabilitiesResponse { capabilities })
}
