//! csi-snapshotter's CreateVolumeGroupSnapshot for a dynamic group content, and what a failure means
//! (upstream: external-snapshotter, pkg/sidecar-controller/groupsnapshot_helper.go, `createGroupSnapshotWrapper`;
//! the name flags are csi-snapshotter's `--groupsnapshot-name-prefix` and `--groupsnapshot-name-uuid-length`).

use std::collections::{BTreeMap, HashMap};

use csi_client::proto::{CreateVolumeGroupSnapshotRequest, VolumeGroupSnapshot};
use csi_client::{Call, CallError};
use sidecar_runtime::events::PlannedEvent;
use snapshot_api::names::{
    PARAM_VOLUME_GROUP_SNAPSHOT_CONTENT_NAME, PARAM_VOLUME_GROUP_SNAPSHOT_NAME, PARAM_VOLUME_GROUP_SNAPSHOT_NAMESPACE,
    RESERVED_PARAMETER_PREFIX, RESERVED_PARAMETERS,
};
use snapshot_api::{VolumeGroupSnapshotClass, VolumeGroupSnapshotContent};

use super::names::EVENT_GROUP_SNAPSHOT_CREATION_FAILED;

/// The flags that shape the request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestOptions {
    /// `--groupsnapshot-name-prefix` (default `groupsnapshot`).
    pub name_prefix: String,
    /// `--groupsnapshot-name-uuid-length` (default -1: the whole UID).
    pub name_uuid_length: i64,
    /// `--extra-create-metadata`.
    pub extra_create_metadata: bool,
}

impl Default for RequestOptions {
    fn default() -> Self {
        RequestOptions { name_prefix: "groupsnapshot".into(), name_uuid_length: -1, extra_create_metadata: false }
    }
}

/// A content CreateVolumeGroupSnapshot cannot be asked for.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("group snapshot name prefix cannot be of length 0")]
    EmptyPrefix,
    #[error("cannot create group snapshot name: the VolumeGroupSnapshot UID in volumeGroupSnapshotRef is empty")]
    MissingGroupUid,
    #[error("group snapshot name UUID length {length} does not fit the VolumeGroupSnapshot UID {uid}")]
    UuidLength { length: i64, uid: String },
    #[error("cannot create group snapshot {0}: it names no VolumeGroupSnapshotClass")]
    NoClass(String),
    #[error("cannot create group snapshot {0}: it lists no volume handles")]
    NoVolumes(String),
    #[error(
        "failed to strip CSI Parameters of prefixed keys: found unknown parameter key \"{0}\" with reserved namespace {RESERVED_PARAMETER_PREFIX}"
    )]
    UnknownReservedKey(String),
}

/// `<prefix>-<UID>`, or with a UUID length N ≥ 0 the UID without dashes cut to N characters. The same rule as
/// csi-provisioner's volume names and csi-snapshotter's snapshot names.
pub fn group_snapshot_name(prefix: &str, group_uid: &str, uuid_length: i64) -> Result<String, RequestError> {
    if prefix.is_empty() {
        return Err(RequestError::EmptyPrefix);
    }
    if group_uid.is_empty() {
        return Err(RequestError::MissingGroupUid);
    }
    if uuid_length == -1 {
        return Ok(format!("{prefix}-{group_uid}"));
    }
    let compact: String = group_uid.chars().filter(|c| *c != '-').collect();
    // Upstream crashes on an out-of-range length; refuse instead.
    let cut = usize::try_from(uuid_length)
        .ok()
        .and_then(|n| compact.get(..n))
        .ok_or_else(|| RequestError::UuidLength { length: uuid_length, uid: group_uid.into() })?;
    Ok(format!("{prefix}-{cut}"))
}

/// The class parameters for the driver: the reserved keys csi-snapshotter understands are taken out, any other
/// reserved key is refused, and with `--extra-create-metadata` the group's identity is added.
pub fn group_snapshot_parameters(
    class_parameters: Option<&BTreeMap<String, String>>,
    content: &VolumeGroupSnapshotContent,
    extra_create_metadata: bool,
) -> Result<HashMap<String, String>, RequestError> {
    let mut parameters = HashMap::new();
    for (key, value) in class_parameters.into_iter().flatten() {
        if !key.starts_with(RESERVED_PARAMETER_PREFIX) {
            parameters.insert(key.clone(), value.clone());
        } else if !RESERVED_PARAMETERS.contains(&key.as_str()) {
            return Err(RequestError::UnknownReservedKey(key.clone()));
        }
    }
    if extra_create_metadata {
        let group = &content.spec.volume_group_snapshot_ref;
        let metadata = [
            (PARAM_VOLUME_GROUP_SNAPSHOT_NAME, group.name.clone()),
            (PARAM_VOLUME_GROUP_SNAPSHOT_NAMESPACE, group.namespace.clone()),
            (PARAM_VOLUME_GROUP_SNAPSHOT_CONTENT_NAME, content.metadata.name.clone()),
        ];
        for (key, value) in metadata {
            parameters.insert(key.into(), value.unwrap_or_default());
        }
    }
    Ok(parameters)
}

/// The request for a dynamic content. `secrets` is the data of the Secret the content's deletion annotations name
/// (empty when none); it never reaches a log, the request's `Debug` strips it.
pub fn create_group_snapshot_request(
    content: &VolumeGroupSnapshotContent,
    class: Option<&VolumeGroupSnapshotClass>,
    secrets: HashMap<String, String>,
    options: &RequestOptions,
) -> Result<CreateVolumeGroupSnapshotRequest, RequestError> {
    let content_name = content.metadata.name.clone().unwrap_or_default();
    let class = class.ok_or_else(|| RequestError::NoClass(content_name.clone()))?;
    let source_volume_ids = content.spec.source.volume_handles.clone().unwrap_or_default();
    if source_volume_ids.is_empty() {
        return Err(RequestError::NoVolumes(content_name));
    }
    let group_uid = content.spec.volume_group_snapshot_ref.uid.as_deref().unwrap_or_default();
    Ok(CreateVolumeGroupSnapshotRequest {
        name: group_snapshot_name(&options.name_prefix, group_uid, options.name_uuid_length)?,
        source_volume_ids,
        secrets,
        parameters: group_snapshot_parameters(class.spec.parameters.as_ref(), content, options.extra_create_metadata)?,
    })
}

/// What a failed CreateVolumeGroupSnapshot leaves behind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreationFailure {
    /// The driver gave a definite answer, so no group snapshot is being cut: the being-created annotation comes off
    /// (a timeout, Unavailable, Aborted, Canceled or ResourceExhausted keeps it, and deletion waits).
    pub release_being_created: bool,
    /// The Warning on the content; its message also goes to `status.error`.
    pub event: PlannedEvent,
}

/// The failure of CreateVolumeGroupSnapshot for this content.
pub fn creation_failure(content_name: &str, error: &CallError) -> CreationFailure {
    CreationFailure {
        release_being_created: error.disposition_for(Call::CreateVolumeGroupSnapshot).is_final(),
        event: PlannedEvent::warning(
            EVENT_GROUP_SNAPSHOT_CREATION_FAILED,
            format!("failed to create group snapshot for content {content_name}: {error}"),
        ),
    }
}

/// CreateVolumeGroupSnapshot could not be asked for because its Secret could not be read (`message`): a Warning,
/// and nothing is in flight.
pub fn creation_refused(message: String) -> CreationFailure {
    CreationFailure {
        release_being_created: true,
        event: PlannedEvent::warning(EVENT_GROUP_SNAPSHOT_CREATION_FAILED, message),
    }
}

/// A content CreateVolumeGroupSnapshot cannot be asked for: a Warning, and nothing is in flight.
pub fn request_refused(content_name: &str, error: &RequestError) -> CreationFailure {
    CreationFailure {
        release_being_created: true,
        event: PlannedEvent::warning(
            EVENT_GROUP_SNAPSHOT_CREATION_FAILED,
            format!("failed to create group snapshot for content {content_name}: {error}"),
        ),
    }
}

/// What makes a CreateVolumeGroupSnapshot or GetVolumeGroupSnapshot answer unfit to record, if anything: no group
/// snapshot id, or a member without its snapshot or volume id. Recorded, an empty handle would mark the content
/// done with nothing to delete it by later; the answer is treated as a failed call instead and asked again (by the
/// same name, which the driver answers idempotently).
pub fn answer_defect(answer: &VolumeGroupSnapshot) -> Option<String> {
    if answer.group_snapshot_id.is_empty() {
        return Some("the driver returned an empty group snapshot id".into());
    }
    let member = answer.snapshots.iter().find(|m| m.snapshot_id.is_empty() || m.source_volume_id.is_empty())?;
    Some(if member.source_volume_id.is_empty() {
        format!("the driver returned member snapshot {:?} without its source volume id", member.snapshot_id)
    } else {
        format!("the driver returned an empty snapshot id for the member of volume {}", member.source_volume_id)
    })
}

/// CreateVolumeGroupSnapshot answered with `defect` ([`answer_defect`]): the group may be cut, so the being-created
/// annotation stays and the call is asked again; a Warning names the problem.
pub fn wrong_answer(content_name: &str, defect: &str) -> CreationFailure {
    CreationFailure {
        release_being_created: false,
        event: PlannedEvent::warning(
            EVENT_GROUP_SNAPSHOT_CREATION_FAILED,
            format!("failed to create group snapshot for content {content_name}: {defect}"),
        ),
    }
}

#[cfg(test)]
mod tests;
