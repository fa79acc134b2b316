//! Volume RPCs: create (empty, from a snapshot, or as a clone), delete, validate, list, get, capacity,
//! expand and modify.
//!
//! Observing mutable parameters: ListVolumes and ControllerGetVolume put a volume's current mutable
//! parameters into its `volume_context` as `hostpath.csi.k8s.io/<key>`, next to the creation parameters.
//! CreateVolume does not, because a CO stores that context once (in a PersistentVolume) and it would go
//! stale at the first ControllerModifyVolume. They also show the access modes CreateVolume asked for
//! ([`ACCESS_MODES_CONTEXT_KEY`]), so that tests can check what a CO sent.

use std::collections::{BTreeMap, HashMap};

use csi_client::proto::controller_get_volume_response::VolumeStatus;
use csi_client::proto::validate_volume_capabilities_response::Confirmed;
use csi_client::proto::volume_content_source::{self, SnapshotSource, VolumeSource};
use csi_client::proto::{
    self, CapacityRange, ControllerExpandVolumeRequest, ControllerExpandVolumeResponse, ControllerGetVolumeRequest,
    ControllerGetVolumeResponse, ControllerModifyVolumeRequest, ControllerModifyVolumeResponse, CreateVolumeRequest,
    CreateVolumeResponse, DeleteVolumeRequest, DeleteVolumeResponse, GetCapacityRequest, GetCapacityResponse,
    ListVolumesRequest, ListVolumesResponse, ValidateVolumeCapabilitiesRequest, ValidateVolumeCapabilitiesResponse,
    VolumeContentSource, list_volumes_response,
};
use tonic::Status;

use crate::capability::{access_type, requested_access_modes, requested_access_type, unsupported};
use crate::creations::{Kind, Outcome};
use crate::paging::page;
use crate::plugin::{Config, Shared};
use crate::publish::published_node_ids;
use crate::state::{AccessType, ContentSource, Volume};
use crate::storage;
use crate::topology::{is_this_node, node_topology};

/// Prefix of the `volume_context` keys that show a volume's current mutable parameters.
pub const MUTABLE_CONTEXT_PREFIX: &str = "hostpath.csi.k8s.io/";

/// The `volume_context` key of ListVolumes and ControllerGetVolume that shows the access modes CreateVolume asked
/// for, comma-separated: what a CO's access-mode mapping sent, for tests to check.
pub const ACCESS_MODES_CONTEXT_KEY: &str = "hostpath.csi.k8s.io/created-access-modes";

/// Size of a volume whose request gives no size.
pub const DEFAULT_SIZE: i64 = 1 << 30;

pub fn create(shared: &Shared, request: CreateVolumeRequest) -> Result<CreateVolumeResponse, Status> {
    let config = &shared.config;
    if request.name.is_empty() {
        return Err(Status::invalid_argument("name is required"));
    }
    let access_type = requested_access_type(&request.volume_capabilities)?;
    let access_modes = requested_access_modes(&request.volume_capabilities, config.support())?;
    config
        .mutable_parameters
        .validate(&request.mutable_parameters)
        .map_err(|e| Status::invalid_argument(e.to_string()))?;
    let size = SizeRequest::new(request.capacity_range.as_ref(), config.max_volume_size)?;
    crate::topology::check_requirement(request.accessibility_requirements.as_ref(), &config.node_id)?;
    let source = content_source(request.volume_content_source.as_ref())?;
    let parameters: BTreeMap<String, String> = request.parameters.into_iter().collect();
    let mutable_parameters: BTreeMap<String, String> = request.mutable_parameters.into_iter().collect();

    let mut store = shared.store();
    if let Some(existing) = store.state().volume_by_name(&request.name) {
        let wanted = Wanted {
            access_type,
            size,
            parameters: &parameters,
            mutable_parameters: &mutable_parameters,
            source: &source,
        };
        wanted.check(existing)?;
        let response = CreateVolumeResponse { volume: Some(created_volume(existing, config)) };
        return store.update(|change| {
            change.count_create(Kind::Volume, &request.name, Outcome::Existing);
            Ok(response)
        });
    }
    store.update(|change| {
        // The source decides the smallest size and must be of the same kind as the new volume.
        let copy_from = match &source {
            None => None,
            Some(ContentSource::Snapshot(id)) => {
                let snapshot = change
                    .state
                    .snapshots
                    .get(id)
                    .ok_or_else(|| Status::not_found(format!("snapshot {id} does not exist")))?;
                Some((change.layout.snapshot(id), snapshot.access_type, snapshot.size_bytes, "snapshot"))
            }
            Some(ContentSource::Volume(id)) => {
                let volume = change
                    .state
                    .volumes
                    .get(id)
                    .ok_or_else(|| Status::not_found(format!("volume {id} does not exist")))?;
                settle_block_data(config, &change.layout.volume(id), volume)?;
                Some((change.layout.volume(id), volume.access_type, volume.capacity_bytes, "volume"))
            }
        };
        let mut capacity_bytes = size.bytes;
        if let Some((_, source_type, source_size, what)) = &copy_from {
            if *source_type != access_type {
                return Err(Status::invalid_argument(format!(
                    "source {what} is a {} volume, the request asks for {}",
                    source_type.as_str(),
                    access_type.as_str()
                )));
            }
            capacity_bytes = capacity_bytes.max(*source_size);
            size.check_fits(capacity_bytes, config.max_volume_size, what)?;
        }
        check_pool(config, change.state.provisioned_bytes(), capacity_bytes)?;

        let id = change.new_id();
        let path = change.layout.volume(&id);
        match &copy_from {
            None => storage::create_empty(access_type, &path, capacity_bytes)?,
            Some((from, ..)) => storage::copy(access_type, from, &path, capacity_bytes)?,
        }
        let volume = Volume {
            id: id.clone(),
            name: request.name.clone(),
            sequence: change.state.take_sequence(),
            capacity_bytes,
            access_type,
            access_modes,
            parameters,
            mutable_parameters,
            content_source: source,
            staged: BTreeMap::new(),
            published: BTreeMap::new(),
            controller_publication: None,
        };
        let response = CreateVolumeResponse { volume: Some(created_volume(&volume, config)) };
        change.state.volumes.insert(id, volume);
        change.count_create(Kind::Volume, &request.name, Outcome::Created);
        Ok(response)
    })
}

pub fn delete(shared: &Shared, request: DeleteVolumeRequest) -> Result<DeleteVolumeResponse, Status> {
    let id = request.volume_id;
    if id.is_empty() {
        return Err(Status::invalid_argument("volume_id is required"));
    }
    shared.store().update(|change| {
        let Some(volume) = change.state.volumes.get(&id) else {
            return Ok(DeleteVolumeResponse {});
        };
        if let Some(path) = volume.published.keys().chain(volume.staged.keys()).next() {
            return Err(Status::failed_precondition(format!("volume {id} is still staged or published at {path}")));
        }
        if let Some(publication) = &volume.controller_publication {
            return Err(Status::failed_precondition(format!(
                "volume {id} is still attached to node {}",
                publication.node_id
            )));
        }
        storage::remove(&change.layout.volume(&id))?;
        change.state.volumes.remove(&id);
        Ok(DeleteVolumeResponse {})
    })
}

pub fn validate_capabilities(
    shared: &Shared,
    request: ValidateVolumeCapabilitiesRequest,
) -> Result<ValidateVolumeCapabilitiesResponse, Status> {
    if request.volume_id.is_empty() {
        return Err(Status::invalid_argument("volume_id is required"));
    }
    if request.volume_capabilities.is_empty() {
        return Err(Status::invalid_argument("volume_capabilities are required"));
    }
    let asked: Vec<AccessType> = request.volume_capabilities.iter().map(access_type).collect::<Result<_, _>>()?;
    let store = shared.store();
    let volume = store
        .state()
        .volumes
        .get(&request.volume_id)
        .ok_or_else(|| Status::not_found(format!("volume {} does not exist", request.volume_id)))?;
    let unconfirmed = |message: String| Ok(ValidateVolumeCapabilitiesResponse { confirmed: None, message });
    for capability in &request.volume_capabilities {
        if let Some(reason) = unsupported(capability, shared.config.support())? {
            return unconfirmed(reason);
        }
    }
    if let Some(other) = asked.iter().find(|t| **t != volume.access_type) {
        return unconfirmed(format!(
            "volume {} is a {} volume, not {}",
            volume.id,
            volume.access_type.as_str(),
            other.as_str()
        ));
    }
    if let Err(error) = shared.config.mutable_parameters.validate(&request.mutable_parameters) {
        return unconfirmed(error.to_string());
    }
    Ok(ValidateVolumeCapabilitiesResponse {
        confirmed: Some(Confirmed {
            volume_context: request.volume_context,
            volume_capabilities: request.volume_capabilities,
            parameters: request.parameters,
            mutable_parameters: request.mutable_parameters,
        }),
        message: String::new(),
    })
}

pub fn list(shared: &Shared, request: ListVolumesRequest) -> Result<ListVolumesResponse, Status> {
    let store = shared.store();
    let state = store.state();
    let entries = state
        .volumes
        .values()
        .map(|volume| {
            // The published nodes are reported where the plugin attaches (LIST_VOLUMES_PUBLISHED_NODES).
            let status = shared
                .config
                .attach_required
                .then(|| list_volumes_response::VolumeStatus { published_node_ids: published_node_ids(volume) });
            let entry = list_volumes_response::Entry { volume: Some(listed_volume(volume, &shared.config)), status };
            (volume.sequence, entry)
        })
        .collect();
    let (entries, next_token) = page(entries, request.max_entries, &request.starting_token, state.next_sequence)?;
    Ok(ListVolumesResponse { entries, next_token })
}

pub fn get(shared: &Shared, request: ControllerGetVolumeRequest) -> Result<ControllerGetVolumeResponse, Status> {
    if request.volume_id.is_empty() {
        return Err(Status::invalid_argument("volume_id is required"));
    }
    let store = shared.store();
    let volume = store
        .state()
        .volumes
        .get(&request.volume_id)
        .ok_or_else(|| Status::not_found(format!("volume {} does not exist", request.volume_id)))?;
    // Whether its data is still there is ControllerGetVolumeHealth's to say (VolumeCondition went in CSI v1.13).
    Ok(ControllerGetVolumeResponse {
        volume: Some(listed_volume(volume, &shared.config)),
        status: Some(VolumeStatus { published_node_ids: published_node_ids(volume) }),
    })
}

pub fn capacity(shared: &Shared, request: GetCapacityRequest) -> Result<GetCapacityResponse, Status> {
    let config = &shared.config;
    for capability in &request.volume_capabilities {
        access_type(capability)?;
    }
    let here = request.accessible_topology.as_ref().is_none_or(|t| is_this_node(t, &config.node_id));
    let available =
        if here { config.capacity.saturating_sub(shared.store().state().provisioned_bytes()).max(0) } else { 0 };
    Ok(GetCapacityResponse {
        available_capacity: available,
        maximum_volume_size: Some(available.min(config.max_volume_size)),
        minimum_volume_size: None,
    })
}

/// Grows the recorded size (and a block volume's file). Asking for less than the current size changes
/// nothing and answers the current size. Mount volumes report that the node must finish the expansion,
/// as a filesystem resize would; block volumes do not.
pub fn expand(
    shared: &Shared,
    request: ControllerExpandVolumeRequest,
) -> Result<ControllerExpandVolumeResponse, Status> {
    let config = &shared.config;
    let id = request.volume_id;
    if id.is_empty() {
        return Err(Status::invalid_argument("volume_id is required"));
    }
    let range = request.capacity_range.ok_or_else(|| Status::invalid_argument("capacity_range is required"))?;
    check_range(&range)?;
    let target = if range.required_bytes > 0 { range.required_bytes } else { range.limit_bytes };
    if target == 0 {
        return Err(Status::invalid_argument("capacity_range asks for no size"));
    }
    if target > config.max_volume_size {
        return Err(Status::out_of_range(format!(
            "{target} bytes exceed the maximum volume size of {} bytes",
            config.max_volume_size
        )));
    }
    let asked_type = request.volume_capability.as_ref().map(access_type).transpose()?;
    shared.store().update(|change| {
        let provisioned = change.state.provisioned_bytes();
        let path = change.layout.volume(&id);
        let volume = change
            .state
            .volumes
            .get_mut(&id)
            .ok_or_else(|| Status::not_found(format!("volume {id} does not exist")))?;
        if asked_type.is_some_and(|t| t != volume.access_type) {
            return Err(Status::invalid_argument(format!("volume {id} is a {} volume", volume.access_type.as_str())));
        }
        if target > volume.capacity_bytes {
            check_pool(config, provisioned, target - volume.capacity_bytes)?;
            if volume.access_type == AccessType::Block {
                storage::grow(&path, target)?;
            }
            volume.capacity_bytes = target;
        }
        Ok(ControllerExpandVolumeResponse {
            capacity_bytes: volume.capacity_bytes,
            // A loop device over a block volume's file must learn the new size on the node.
            node_expansion_required: volume.access_type == AccessType::Mount || config.node_mounts,
        })
    })
}

/// Validates and stores mutable parameters. Keys the request leaves out keep their values: the spec
/// forbids changing a volume because of a missing key.
pub fn modify(
    shared: &Shared,
    request: ControllerModifyVolumeRequest,
) -> Result<ControllerModifyVolumeResponse, Status> {
    let policy = &shared.config.mutable_parameters;
    if !policy.enabled() {
        return Err(Status::unimplemented("mutable parameters are disabled (--accepted-mutable-parameters is empty)"));
    }
    let id = request.volume_id;
    if id.is_empty() {
        return Err(Status::invalid_argument("volume_id is required"));
    }
    policy.validate(&request.mutable_parameters).map_err(|e| Status::invalid_argument(e.to_string()))?;
    shared.store().update(|change| {
        let volume = change
            .state
            .volumes
            .get_mut(&id)
            .ok_or_else(|| Status::not_found(format!("volume {id} does not exist")))?;
        volume.mutable_parameters.extend(request.mutable_parameters);
        Ok(ControllerModifyVolumeResponse {})
    })
}

/// The size a CreateVolume asks for.
#[derive(Debug, Clone, Copy)]
struct SizeRequest {
    /// What the volume gets unless a content source is larger.
    bytes: i64,
    required: i64,
    /// 0: no limit.
    limit: i64,
}

impl SizeRequest {
    fn new(range: Option<&CapacityRange>, max_volume_size: i64) -> Result<Self, Status> {
        let range = range.copied().unwrap_or_default();
        check_range(&range)?;
        let default = DEFAULT_SIZE.min(max_volume_size);
        let bytes = match (range.required_bytes, range.limit_bytes) {
            (0, 0) => default,
            (0, limit) => default.min(limit),
            (required, _) => required,
        };
        if bytes > max_volume_size {
            return Err(Status::out_of_range(format!(
                "{bytes} bytes exceed the maximum volume size of {max_volume_size} bytes"
            )));
        }
        Ok(Self { bytes, required: range.required_bytes, limit: range.limit_bytes })
    }

    /// A content source may need more than was asked; that is fine unless it breaks the limit.
    fn check_fits(&self, bytes: i64, max_volume_size: i64, source: &str) -> Result<(), Status> {
        if (self.limit > 0 && bytes > self.limit) || bytes > max_volume_size {
            return Err(Status::out_of_range(format!("the source {source} needs {bytes} bytes, more than allowed")));
        }
        Ok(())
    }

    fn admits(&self, capacity_bytes: i64) -> bool {
        capacity_bytes >= self.required && (self.limit == 0 || capacity_bytes <= self.limit)
    }
}

fn check_range(range: &CapacityRange) -> Result<(), Status> {
    if range.required_bytes < 0 || range.limit_bytes < 0 {
        return Err(Status::invalid_argument("capacity_range must not be negative"));
    }
    if range.limit_bytes > 0 && range.required_bytes > range.limit_bytes {
        return Err(Status::invalid_argument("capacity_range.required_bytes exceeds limit_bytes"));
    }
    Ok(())
}

/// New volumes must fit the simulated pool (`--capacity`).
fn check_pool(config: &Config, provisioned: i64, more: i64) -> Result<(), Status> {
    if provisioned.saturating_add(more) > config.capacity {
        return Err(Status::resource_exhausted(format!(
            "{more} more bytes do not fit: {provisioned} of {} bytes are provisioned",
            config.capacity
        )));
    }
    Ok(())
}

fn content_source(source: Option<&VolumeContentSource>) -> Result<Option<ContentSource>, Status> {
    let Some(source) = source else { return Ok(None) };
    match &source.r#type {
        Some(volume_content_source::Type::Snapshot(SnapshotSource { snapshot_id })) if !snapshot_id.is_empty() => {
            Ok(Some(ContentSource::Snapshot(snapshot_id.clone())))
        }
        Some(volume_content_source::Type::Volume(VolumeSource { volume_id })) if !volume_id.is_empty() => {
            Ok(Some(ContentSource::Volume(volume_id.clone())))
        }
        _ => Err(Status::invalid_argument("volume_content_source names no snapshot or volume")),
    }
}

fn content_source_message(source: &ContentSource) -> VolumeContentSource {
    let r#type = match source {
        ContentSource::Snapshot(id) => {
            volume_content_source::Type::Snapshot(SnapshotSource { snapshot_id: id.clone() })
        }
        ContentSource::Volume(id) => volume_content_source::Type::Volume(VolumeSource { volume_id: id.clone() }),
    };
    VolumeContentSource { r#type: Some(r#type) }
}

/// What a repeated CreateVolume asks for; it must match the existing volume of that name.
struct Wanted<'a> {
    access_type: AccessType,
    size: SizeRequest,
    parameters: &'a BTreeMap<String, String>,
    mutable_parameters: &'a BTreeMap<String, String>,
    source: &'a Option<ContentSource>,
}

impl Wanted<'_> {
    fn check(&self, existing: &Volume) -> Result<(), Status> {
        let conflict = if existing.access_type != self.access_type {
            Some(format!("is a {} volume", existing.access_type.as_str()))
        } else if !self.size.admits(existing.capacity_bytes) {
            Some(format!("has {} bytes, outside the requested capacity range", existing.capacity_bytes))
        } else if existing.parameters != *self.parameters {
            Some("has different parameters".to_string())
        } else if existing.mutable_parameters != *self.mutable_parameters {
            Some("has different mutable parameters".to_string())
        } else if existing.content_source != *self.source {
            Some("has a different content source".to_string())
        } else {
            None
        };
        match conflict {
            Some(why) => Err(Status::already_exists(format!("volume {:?} ({}) {why}", existing.name, existing.id))),
            None => Ok(()),
        }
    }
}

/// The volume as CreateVolume returns it: the creation parameters are its context.
fn created_volume(volume: &Volume, config: &Config) -> proto::Volume {
    proto::Volume {
        capacity_bytes: volume.capacity_bytes,
        volume_id: volume.id.clone(),
        volume_context: volume.parameters.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        content_source: volume.content_source.as_ref().map(content_source_message),
        accessible_topology: vec![node_topology(&config.node_id)],
    }
}

/// The volume as ListVolumes and ControllerGetVolume return it: with its current mutable parameters.
fn listed_volume(volume: &Volume, config: &Config) -> proto::Volume {
    let mut listed = created_volume(volume, config);
    let mutable: HashMap<String, String> =
        volume.mutable_parameters.iter().map(|(k, v)| (format!("{MUTABLE_CONTEXT_PREFIX}{k}"), v.clone())).collect();
    listed.volume_context.extend(mutable);
    if !volume.access_modes.is_empty() {
        listed.volume_context.insert(ACCESS_MODES_CONTEXT_KEY.to_string(), volume.access_modes.join(","));
    }
    listed
}

/// Before a volume's data is copied (snapshot, clone): with `--node-mounts`, a staged block volume's loop device
/// writes what it holds in memory to the file, so the copy has every write made through the device.
pub(crate) fn settle_block_data(config: &Config, backing: &std::path::Path, volume: &Volume) -> Result<(), Status> {
    if config.node_mounts && volume.access_type == AccessType::Block && !volume.staged.is_empty() {
        crate::node_mounts::flush_block(backing)?;
    }
    Ok(())
}
