//! The GroupController service: group snapshots of several volumes.
//!
//! All member snapshots are copied while the state mutex is held, so no CSI call changes a member volume
//! in between; that is this plugin's write-order consistency. Members carry the group's ID and no name of
//! their own; they are listed by ListSnapshots like any snapshot, and deleted only with their group.

use std::collections::{BTreeMap, BTreeSet};

use csi_client::proto::group_controller_server::GroupController;
use csi_client::proto::group_controller_service_capability::{self, rpc};
use csi_client::proto::{
    CreateVolumeGroupSnapshotRequest, CreateVolumeGroupSnapshotResponse, DeleteVolumeGroupSnapshotRequest,
    DeleteVolumeGroupSnapshotResponse, GetVolumeGroupSnapshotRequest, GetVolumeGroupSnapshotResponse,
    GroupControllerGetCapabilitiesRequest, GroupControllerGetCapabilitiesResponse, GroupControllerServiceCapability,
    VolumeGroupSnapshot,
};
use tonic::{Request, Response, Status};

use crate::creations::{Kind, Outcome};
use crate::instant::Instant;
use crate::plugin::{Plugin, Shared};
use crate::snapshots;
use crate::state::{GroupSnapshot, State};
use crate::storage;

#[tonic::async_trait]
impl GroupController for Plugin {
    async fn group_controller_get_capabilities(
        &self,
        request: Request<GroupControllerGetCapabilitiesRequest>,
    ) -> Result<Response<GroupControllerGetCapabilitiesResponse>, Status> {
        self.call("GroupControllerGetCapabilities", request, capabilities).await
    }

    async fn create_volume_group_snapshot(
        &self,
        request: Request<CreateVolumeGroupSnapshotRequest>,
    ) -> Result<Response<CreateVolumeGroupSnapshotResponse>, Status> {
        self.call("CreateVolumeGroupSnapshot", request, create).await
    }

    async fn delete_volume_group_snapshot(
        &self,
        request: Request<DeleteVolumeGroupSnapshotRequest>,
    ) -> Result<Response<DeleteVolumeGroupSnapshotResponse>, Status> {
        self.call("DeleteVolumeGroupSnapshot", request, delete).await
    }

    async fn get_volume_group_snapshot(
        &self,
        request: Request<GetVolumeGroupSnapshotRequest>,
    ) -> Result<Response<GetVolumeGroupSnapshotResponse>, Status> {
        self.call("GetVolumeGroupSnapshot", request, get).await
    }
}

fn capabilities(
    _: &Shared,
    _: GroupControllerGetCapabilitiesRequest,
) -> Result<GroupControllerGetCapabilitiesResponse, Status> {
    let capability = GroupControllerServiceCapability {
        r#type: Some(group_controller_service_capability::Type::Rpc(group_controller_service_capability::Rpc {
            r#type: rpc::Type::CreateDeleteGetVolumeGroupSnapshot as i32,
        })),
    };
    Ok(GroupControllerGetCapabilitiesResponse { capabilities: vec![capability] })
}

fn create(
    shared: &Shared,
    request: CreateVolumeGroupSnapshotRequest,
) -> Result<CreateVolumeGroupSnapshotResponse, Status> {
    if request.name.is_empty() {
        return Err(Status::invalid_argument("name is required"));
    }
    if request.source_volume_ids.is_empty() {
        return Err(Status::invalid_argument("source_volume_ids are required"));
    }
    let mut sources = BTreeSet::new();
    for id in &request.source_volume_ids {
        if id.is_empty() {
            return Err(Status::invalid_argument("source_volume_ids contains an empty ID"));
        }
        if !sources.insert(id.as_str()) {
            return Err(Status::invalid_argument(format!("source_volume_ids names volume {id} twice")));
        }
    }
    let parameters: BTreeMap<String, String> = request.parameters.into_iter().collect();

    let mut store = shared.store();
    if let Some(existing) = store.state().group_snapshot_by_name(&request.name) {
        let existing_sources: BTreeSet<&str> = existing.source_volume_ids.iter().map(String::as_str).collect();
        if existing_sources != sources {
            return Err(Status::already_exists(format!(
                "group snapshot {:?} ({}) was taken of volumes {:?}",
                existing.name, existing.id, existing.source_volume_ids
            )));
        }
        if existing.parameters != parameters {
            return Err(Status::already_exists(format!(
                "group snapshot {:?} ({}) has different parameters",
                existing.name, existing.id
            )));
        }
        let response = CreateVolumeGroupSnapshotResponse { group_snapshot: Some(message(store.state(), existing)) };
        return store.update(|change| {
            change.count_create(Kind::GroupSnapshot, &request.name, Outcome::Existing);
            Ok(response)
        });
    }
    store.update(|change| {
        if let Some(missing) = request.source_volume_ids.iter().find(|id| !change.state.volumes.contains_key(*id)) {
            return Err(Status::not_found(format!("volume {missing} does not exist")));
        }
        let id = change.new_id();
        let created = Instant::now();
        let mut snapshot_ids = Vec::new();
        for volume_id in &request.source_volume_ids {
            let taken = snapshots::take(
                &shared.config,
                change,
                volume_id,
                String::new(),
                parameters.clone(),
                Some(id.clone()),
                created,
            );
            match taken {
                Ok(snapshot) => snapshot_ids.push(snapshot.id),
                Err(error) => {
                    // The draft state is dropped with the error; the copies already made must go too,
                    // so a failed group leaks no snapshot.
                    for snapshot_id in &snapshot_ids {
                        let _ = storage::remove(&change.layout.snapshot(snapshot_id));
                    }
                    return Err(error);
                }
            }
        }
        let group = GroupSnapshot {
            id: id.clone(),
            name: request.name.clone(),
            sequence: change.state.take_sequence(),
            source_volume_ids: request.source_volume_ids.clone(),
            snapshot_ids,
            parameters,
            created,
        };
        let response = CreateVolumeGroupSnapshotResponse { group_snapshot: Some(message(change.state, &group)) };
        change.state.group_snapshots.insert(id, group);
        change.count_create(Kind::GroupSnapshot, &request.name, Outcome::Created);
        Ok(response)
    })
}

fn get(shared: &Shared, request: GetVolumeGroupSnapshotRequest) -> Result<GetVolumeGroupSnapshotResponse, Status> {
    if request.group_snapshot_id.is_empty() {
        return Err(Status::invalid_argument("group_snapshot_id is required"));
    }
    let store = shared.store();
    let group = store
        .state()
        .group_snapshots
        .get(&request.group_snapshot_id)
        .ok_or_else(|| Status::not_found(format!("group snapshot {} does not exist", request.group_snapshot_id)))?;
    check_snapshot_ids(group, &request.snapshot_ids)?;
    Ok(GetVolumeGroupSnapshotResponse { group_snapshot: Some(message(store.state(), group)) })
}

fn delete(
    shared: &Shared,
    request: DeleteVolumeGroupSnapshotRequest,
) -> Result<DeleteVolumeGroupSnapshotResponse, Status> {
    let id = request.group_snapshot_id;
    if id.is_empty() {
        return Err(Status::invalid_argument("group_snapshot_id is required"));
    }
    shared.store().update(|change| {
        let Some(group) = change.state.group_snapshots.get(&id) else {
            return Ok(DeleteVolumeGroupSnapshotResponse {});
        };
        check_snapshot_ids(group, &request.snapshot_ids)?;
        let members = group.snapshot_ids.clone();
        for snapshot_id in &members {
            storage::remove(&change.layout.snapshot(snapshot_id))?;
            change.state.snapshots.remove(snapshot_id);
        }
        change.state.group_snapshots.remove(&id);
        Ok(DeleteVolumeGroupSnapshotResponse {})
    })
}

/// The caller's list of member snapshot IDs, when it gives one, must be exactly the group's.
fn check_snapshot_ids(group: &GroupSnapshot, snapshot_ids: &[String]) -> Result<(), Status> {
    if snapshot_ids.is_empty() {
        return Ok(());
    }
    let given: BTreeSet<&String> = snapshot_ids.iter().collect();
    let actual: BTreeSet<&String> = group.snapshot_ids.iter().collect();
    if given != actual {
        return Err(Status::invalid_argument(format!(
            "snapshot_ids {snapshot_ids:?} do not match the members of group snapshot {}: {:?}",
            group.id, group.snapshot_ids
        )));
    }
    Ok(())
}

fn message(state: &State, group: &GroupSnapshot) -> VolumeGroupSnapshot {
    VolumeGroupSnapshot {
        group_snapshot_id: group.id.clone(),
        snapshots: group.snapshot_ids.iter().filter_map(|id| state.snapshots.get(id)).map(snapshots::message).collect(),
        creation_time: Some(group.created.timestamp()),
        ready_to_use: true,
    }
}
