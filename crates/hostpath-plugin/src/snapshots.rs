//! Snapshot RPCs. A snapshot is a full copy of its source volume's data, taken while the state mutex is
//! held, so it is ready to use as soon as it exists.
//!
//! A snapshot that belongs to a group snapshot cannot be deleted alone: DeleteSnapshot answers
//! INVALID_ARGUMENT, as the CSI spec allows ("Snapshot is part of a group"); DeleteVolumeGroupSnapshot
//! deletes it with its group.

use std::collections::BTreeMap;

use csi_client::proto::{
    self, CreateSnapshotRequest, CreateSnapshotResponse, DeleteSnapshotRequest, DeleteSnapshotResponse,
    GetSnapshotRequest, GetSnapshotResponse, ListSnapshotsRequest, ListSnapshotsResponse, list_snapshots_response,
};
use tonic::Status;

use crate::creations::{Kind, Outcome};
use crate::instant::Instant;
use crate::paging::page;
use crate::plugin::{Config, Shared};
use crate::state::{Change, Snapshot};
use crate::storage;
use crate::volumes::settle_block_data;

pub fn create(shared: &Shared, request: CreateSnapshotRequest) -> Result<CreateSnapshotResponse, Status> {
    if request.name.is_empty() {
        return Err(Status::invalid_argument("name is required"));
    }
    if request.source_volume_id.is_empty() {
        return Err(Status::invalid_argument("source_volume_id is required"));
    }
    let parameters: BTreeMap<String, String> = request.parameters.into_iter().collect();
    let mut store = shared.store();
    if let Some(existing) = store.state().snapshot_by_name(&request.name) {
        if existing.source_volume_id != request.source_volume_id {
            return Err(Status::already_exists(format!(
                "snapshot {:?} ({}) was taken of volume {}",
                existing.name, existing.id, existing.source_volume_id
            )));
        }
        if existing.parameters != parameters {
            return Err(Status::already_exists(format!(
                "snapshot {:?} ({}) has different parameters",
                existing.name, existing.id
            )));
        }
        let response = CreateSnapshotResponse { snapshot: Some(message(existing)) };
        return store.update(|change| {
            change.count_create(Kind::Snapshot, &request.name, Outcome::Existing);
            Ok(response)
        });
    }
    store.update(|change| {
        let snapshot = take(
            &shared.config,
            change,
            &request.source_volume_id,
            request.name.clone(),
            parameters,
            None,
            Instant::now(),
        )?;
        change.count_create(Kind::Snapshot, &request.name, Outcome::Created);
        Ok(CreateSnapshotResponse { snapshot: Some(message(&snapshot)) })
    })
}

pub fn delete(shared: &Shared, request: DeleteSnapshotRequest) -> Result<DeleteSnapshotResponse, Status> {
    let id = request.snapshot_id;
    if id.is_empty() {
        return Err(Status::invalid_argument("snapshot_id is required"));
    }
    shared.store().update(|change| {
        let Some(snapshot) = change.state.snapshots.get(&id) else {
            return Ok(DeleteSnapshotResponse {});
        };
        if let Some(group) = &snapshot.group_snapshot_id {
            return Err(Status::invalid_argument(format!(
                "snapshot {id} is part of group snapshot {group}; delete the group snapshot instead"
            )));
        }
        storage::remove(&change.layout.snapshot(&id))?;
        change.state.snapshots.remove(&id);
        Ok(DeleteSnapshotResponse {})
    })
}

pub fn list(shared: &Shared, request: ListSnapshotsRequest) -> Result<ListSnapshotsResponse, Status> {
    let store = shared.store();
    let state = store.state();
    let entries = state
        .snapshots
        .values()
        .filter(|s| request.snapshot_id.is_empty() || s.id == request.snapshot_id)
        .filter(|s| request.source_volume_id.is_empty() || s.source_volume_id == request.source_volume_id)
        .map(|s| (s.sequence, list_snapshots_response::Entry { snapshot: Some(message(s)) }))
        .collect();
    let (entries, next_token) = page(entries, request.max_entries, &request.starting_token, state.next_sequence)?;
    Ok(ListSnapshotsResponse { entries, next_token })
}

pub fn get(shared: &Shared, request: GetSnapshotRequest) -> Result<GetSnapshotResponse, Status> {
    if request.snapshot_id.is_empty() {
        return Err(Status::invalid_argument("snapshot_id is required"));
    }
    let store = shared.store();
    let snapshot = store
        .state()
        .snapshots
        .get(&request.snapshot_id)
        .ok_or_else(|| Status::not_found(format!("snapshot {} does not exist", request.snapshot_id)))?;
    Ok(GetSnapshotResponse { snapshot: Some(message(snapshot)) })
}

/// Copies a volume's data into a new snapshot and records it in the draft state.
pub(crate) fn take(
    config: &Config,
    change: &mut Change<'_>,
    source_volume_id: &str,
    name: String,
    parameters: BTreeMap<String, String>,
    group_snapshot_id: Option<String>,
    created: Instant,
) -> Result<Snapshot, Status> {
    let volume = change
        .state
        .volumes
        .get(source_volume_id)
        .ok_or_else(|| Status::not_found(format!("volume {source_volume_id} does not exist")))?;
    settle_block_data(config, &change.layout.volume(source_volume_id), volume)?;
    let (access_type, size_bytes) = (volume.access_type, volume.capacity_bytes);
    let id = change.new_id();
    storage::copy(access_type, &change.layout.volume(source_volume_id), &change.layout.snapshot(&id), size_bytes)?;
    let snapshot = Snapshot {
        id: id.clone(),
        name,
        sequence: change.state.take_sequence(),
        source_volume_id: source_volume_id.to_string(),
        size_bytes,
        access_type,
        parameters,
        created,
        group_snapshot_id,
    };
    change.state.snapshots.insert(id, snapshot.clone());
    Ok(snapshot)
}

/// A snapshot as CSI describes it.
pub(crate) fn message(snapshot: &Snapshot) -> proto::Snapshot {
    proto::Snapshot {
        size_bytes: snapshot.size_bytes,
        snapshot_id: snapshot.id.clone(),
        source_volume_id: snapshot.source_volume_id.clone(),
        creation_time: Some(snapshot.created.timestamp()),
        ready_to_use: true,
        group_snapshot_id: snapshot.group_snapshot_id.clone().unwrap_or_default(),
        // No SNAPSHOT_ACCESSIBILITY_CONSTRAINTS: a snapshot is usable wherever its source was.
        accessible_topology: Vec::new(),
    }
}
