//! csi-snapshotter's GetVolumeGroupSnapshot for a pre-provisioned group content (upstream: external-snapshotter,
//! pkg/sidecar-controller/groupsnapshot_helper.go, `checkandUpdateGroupSnapshotContentStatusOperation`): the
//! group's id and its snapshots' ids from `source.groupSnapshotHandles`, the Secret of the class's
//! `group-snapshotter-get-secret-*` parameters.

use std::collections::HashMap;

use csi_client::CallError;
use csi_client::proto::GetVolumeGroupSnapshotRequest;
use sidecar_runtime::events::PlannedEvent;
use snapshot_api::VolumeGroupSnapshotContent;

use super::create_request::CreationFailure;
use super::names::EVENT_CONTENT_CHECK_FAILED;

/// The request for a pre-provisioned content; `None` for a dynamic one (it has no handles to ask about).
pub fn get_group_snapshot_request(
    content: &VolumeGroupSnapshotContent,
    secrets: HashMap<String, String>,
) -> Option<GetVolumeGroupSnapshotRequest> {
    let handles = content.spec.source.group_snapshot_handles.as_ref()?;
    Some(GetVolumeGroupSnapshotRequest {
        // The id the driver answered with wins over the one the administrator typed, as for single snapshots.
        group_snapshot_id: content
            .status
            .as_ref()
            .and_then(|s| s.volume_group_snapshot_handle.clone())
            .unwrap_or_else(|| handles.volume_group_snapshot_handle.clone()),
        snapshot_ids: handles.volume_snapshot_handles.clone(),
        secrets,
    })
}

/// GetVolumeGroupSnapshot could not be asked for (`message`: its Secret): a Warning. Nothing is being cut, so no
/// being-created annotation is touched.
pub fn get_refused(message: String) -> CreationFailure {
    CreationFailure { release_being_created: false, event: PlannedEvent::warning(EVENT_CONTENT_CHECK_FAILED, message) }
}

/// GetVolumeGroupSnapshot failed.
pub fn get_failed(content_name: &str, error: &CallError) -> CreationFailure {
    get_refused(format!("failed to get group snapshot {content_name} from the CSI driver: {error}"))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ObjectReference;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use snapshot_api::{
        DeletionPolicy, GroupSnapshotHandles, VolumeGroupSnapshotContentSource, VolumeGroupSnapshotContentSpec,
        VolumeGroupSnapshotContentStatus,
    };

    use super::*;

    fn content(handles: Option<(&str, &[&str])>, status_handle: Option<&str>) -> VolumeGroupSnapshotContent {
        VolumeGroupSnapshotContent {
            metadata: ObjectMeta { name: Some("imported".into()), ..Default::default() },
            spec: VolumeGroupSnapshotContentSpec {
                volume_group_snapshot_ref: ObjectReference::default(),
                deletion_policy: DeletionPolicy::Retain,
                driver: "d".into(),
                volume_group_snapshot_class_name: None,
                source: VolumeGroupSnapshotContentSource {
                    volume_handles: handles.is_none().then(|| vec!["v1".into()]),
                    group_snapshot_handles: handles.map(|(group, snapshots)| GroupSnapshotHandles {
                        volume_group_snapshot_handle: group.into(),
                        volume_snapshot_handles: snapshots.iter().map(|s| s.to_string()).collect(),
                    }),
                },
            },
            status: status_handle.map(|h| VolumeGroupSnapshotContentStatus {
                volume_group_snapshot_handle: Some(h.into()),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn pre_provisioned_contents_are_asked_about_by_their_handles() {
        let secrets = HashMap::from([("key".to_string(), "value".to_string())]);
        // (rule, content, (group id, snapshot ids) or None)
        let table = [
            ("dynamic: nothing to get", content(None, None), None),
            ("the spec's ids", content(Some(("g1", &["s1", "s2"])), None), Some(("g1", vec!["s1", "s2"]))),
            (
                "the driver's answer wins",
                content(Some(("g1", &["s1"])), Some("g1-canonical")),
                Some(("g1-canonical", vec!["s1"])),
            ),
        ];
        for (rule, content, want) in table {
            let got = get_group_snapshot_request(&content, secrets.clone());
            let got_ids = got
                .as_ref()
                .map(|r| (r.group_snapshot_id.as_str(), r.snapshot_ids.iter().map(String::as_str).collect::<Vec<_>>()));
            assert_eq!(got_ids, want, "{rule}");
            if let Some(request) = got {
                assert_eq!(request.secrets, secrets, "{rule}");
            }
        }
    }

    #[test]
    fn failed_lookups_are_warnings_that_leave_the_annotations_alone() {
        let error = CallError::Status {
            method: "/csi.v1.GroupController/GetVolumeGroupSnapshot",
            status: tonic::Status::new(tonic::Code::NotFound, "no such group"),
        };
        // (failure, message)
        let table = [
            (
                get_refused("error getting secret creds in namespace ns: forbidden".into()),
                "error getting secret creds in namespace ns: forbidden".to_string(),
            ),
            (
                get_failed("imported", &error),
                format!("failed to get group snapshot imported from the CSI driver: {error}"),
            ),
        ];
        for (failure, message) in table {
            assert_eq!(
                failure,
                CreationFailure {
                    release_being_created: false,
                    event: PlannedEvent::warning("GroupSnapshotContentCheckandUpdateFailed", message),
                }
            );
        }
    }
}
