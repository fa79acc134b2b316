//! Readiness of a snapshot the sidecar did not cut itself: a pre-provisioned content, or a member of a group snapshot
//! (external-snapshotter pkg/sidecar-controller/snapshot_controller.go, checkandUpdateContentStatusOperation).
//! ListSnapshots by id answers, when the driver has it; a driver without LIST_SNAPSHOTS is taken at its word that the
//! snapshot exists and is ready.
//!
//! (A dynamic content that is not ready is asked with CreateSnapshot again: [`super::creation`].)

use csi_client::proto::{ListSnapshotsRequest, ListSnapshotsResponse};
use snapshot_api::{VolumeSnapshotClass, VolumeSnapshotContent};

use super::Snapshotter;
use super::outcome::SnapshotInfo;
use super::secrets::{SecretRef, deletion_secret, list_secret};

/// ListSnapshots and the Secret whose data goes into its `secrets`.
#[derive(Clone, Debug, PartialEq)]
pub struct ListSnapshotsCall {
    /// `secrets` is left empty: the controller fills it from [`ListSnapshotsCall::secret`].
    pub request: ListSnapshotsRequest,
    pub secret: Option<SecretRef>,
}

/// How to learn whether the snapshot is ready.
#[derive(Clone, Debug, PartialEq)]
pub enum ReadinessCheck {
    /// Ask the driver; the answer goes through [`listed`].
    List(ListSnapshotsCall),
    /// The driver cannot list snapshots: ready now, size unknown.
    AssumeReady(SnapshotInfo),
}

/// The check for `content` (pre-provisioned, or a group member), whose class, when it names one, is `class` as found
/// in the cache. The snapshot id is the spec's handle of a pre-provisioned content, else the status's. `now` is in ns.
pub fn readiness_check(
    snapshotter: &Snapshotter,
    content: &VolumeSnapshotContent,
    class: Option<&VolumeSnapshotClass>,
    now: i64,
) -> Result<ReadinessCheck, String> {
    let snapshot_id = content
        .spec
        .source
        .snapshot_handle
        .clone()
        .or_else(|| content.status.as_ref().and_then(|s| s.snapshot_handle.clone()))
        .unwrap_or_default();
    if !snapshotter.list_snapshots {
        return Ok(ReadinessCheck::AssumeReady(SnapshotInfo {
            snapshot_id,
            ready_to_use: true,
            creation_time: now,
            restore_size: 0,
            group_snapshot_id: None,
        }));
    }
    let content_name = content.metadata.name.as_deref().unwrap_or_default();
    let secret = match (&content.spec.volume_snapshot_class_name, class) {
        (Some(name), None) => return Err(format!("failed to get snapshot class {name}: not found")),
        (Some(_), Some(class)) => list_secret(&class.spec.parameters.clone().unwrap_or_default(), content_name)
            .map_err(|e| format!("failed to get list secret for content {content_name}: {e}"))?,
        // A group member has no class: the Secret its group was cut with.
        (None, _) => deletion_secret(content),
    };
    Ok(ReadinessCheck::List(ListSnapshotsCall {
        request: ListSnapshotsRequest { snapshot_id, ..Default::default() },
        secret,
    }))
}

/// The snapshot ListSnapshots described; an empty answer is an error (the snapshot is not there). The snapshot is the
/// one asked for by id, whatever id the answer gives it (none, or another): the status records the content's
/// handle, as upstream. Without an id to ask for, ListSnapshots would list every snapshot: nothing is found.
pub fn listed(response: &ListSnapshotsResponse, snapshot_id: &str, now: i64) -> Result<SnapshotInfo, String> {
    let not_found = || format!("can not find snapshot for snapshotID {snapshot_id}");
    if snapshot_id.is_empty() {
        return Err(not_found());
    }
    response
        .entries
        .iter()
        .find_map(|entry| entry.snapshot.as_ref())
        .map(|snapshot| SnapshotInfo { snapshot_id: snapshot_id.to_string(), ..SnapshotInfo::from_csi(snapshot, now) })
        .ok_or_else(not_found)
}

#[cfg(test)]
mod tests {
    use csi_client::proto::Snapshot;
    use csi_client::proto::list_snapshots_response::Entry;
    use snapshot_api::VolumeSnapshotContentStatus;
    use snapshot_api::names::{
        ANN_DELETION_SECRET_NAME, ANN_DELETION_SECRET_NAMESPACE, PARAM_SNAPSHOTTER_LIST_SECRET_NAME,
        PARAM_SNAPSHOTTER_LIST_SECRET_NAMESPACE,
    };

    use super::*;
    use crate::translate::sidecar::fixtures::{annotate, class, content, pre_provisioned, snapshotter};

    const NOW: i64 = 42;

    fn list(id: &str, secret: Option<SecretRef>) -> Result<ReadinessCheck, String> {
        Ok(ReadinessCheck::List(ListSnapshotsCall {
            request: ListSnapshotsRequest { snapshot_id: id.into(), ..Default::default() },
            secret,
        }))
    }

    fn secret(namespace: &str, name: &str) -> Option<SecretRef> {
        Some(SecretRef { namespace: namespace.into(), name: name.into() })
    }

    #[test]
    fn readiness_checks() {
        let lister = Snapshotter { list_snapshots: true, ..snapshotter() };
        let member = {
            let mut c = annotate(
                annotate(content(), ANN_DELETION_SECRET_NAME, "group-secret"),
                ANN_DELETION_SECRET_NAMESPACE,
                "ns",
            );
            c.spec.volume_snapshot_class_name = None;
            c.status = Some(VolumeSnapshotContentStatus {
                snapshot_handle: Some("member-1".into()),
                volume_group_snapshot_handle: Some("group-1".into()),
                ..Default::default()
            });
            c
        };
        let classed = {
            let mut c = pre_provisioned();
            c.spec.volume_snapshot_class_name = Some("class".into());
            c
        };
        let list_class = class(&[
            (PARAM_SNAPSHOTTER_LIST_SECRET_NAME, "list-${volumesnapshotcontent.name}"),
            (PARAM_SNAPSHOTTER_LIST_SECRET_NAMESPACE, "kube-system"),
        ]);
        let broken_class = class(&[(PARAM_SNAPSHOTTER_LIST_SECRET_NAME, "x")]);
        let assumed = Ok(ReadinessCheck::AssumeReady(SnapshotInfo {
            snapshot_id: "snap-7".into(),
            ready_to_use: true,
            creation_time: NOW,
            restore_size: 0,
            group_snapshot_id: None,
        }));
        // (rule, flags, content, class found, check)
        let table = [
            ("no LIST_SNAPSHOTS: assume ready now", snapshotter(), pre_provisioned(), None, assumed),
            (
                "pre-provisioned: by the spec's handle, no secret",
                lister.clone(),
                pre_provisioned(),
                None,
                list("snap-7", None),
            ),
            (
                "the class's list secret, with the content name",
                lister.clone(),
                classed.clone(),
                Some(list_class),
                list("snap-7", secret("kube-system", "list-snapcontent-1")),
            ),
            (
                "a group member: by the status's handle, the group's secret",
                lister.clone(),
                member,
                None,
                list("member-1", secret("ns", "group-secret")),
            ),
            (
                "a named class not found",
                lister.clone(),
                classed.clone(),
                None,
                Err("failed to get snapshot class class: not found".into()),
            ),
        ];
        for (rule, flags, content, class, want) in table {
            assert_eq!(readiness_check(&flags, &content, class.as_ref(), NOW), want, "{rule}");
        }
        let error = readiness_check(&lister, &classed, Some(&broken_class), NOW).unwrap_err();
        assert!(error.contains("must be given together"), "{error}");
    }

    #[test]
    fn list_answers() {
        let snapshot = Snapshot {
            size_bytes: 9,
            snapshot_id: "snap-7".into(),
            ready_to_use: false,
            group_snapshot_id: "group-1".into(),
            ..Default::default()
        };
        let response = |entries: Vec<Entry>| ListSnapshotsResponse { entries, next_token: String::new() };
        let found = listed(&response(vec![Entry { snapshot: Some(snapshot) }]), "snap-7", NOW).unwrap();
        assert_eq!(
            found,
            SnapshotInfo {
                snapshot_id: "snap-7".into(),
                ready_to_use: false,
                creation_time: NOW,
                restore_size: 9,
                group_snapshot_id: Some("group-1".into()),
            }
        );
        for empty in [response(vec![]), response(vec![Entry { snapshot: None }])] {
            assert_eq!(listed(&empty, "snap-7", NOW), Err("can not find snapshot for snapshotID snap-7".into()));
        }
        // (rule, id the answer gives, id asked, id recorded)
        let table = [
            ("an answer without an id is the snapshot asked for", "", "snap-7", Ok("snap-7")),
            ("an answer naming another id is the snapshot asked for", "snap-8", "snap-7", Ok("snap-7")),
            ("without an id to ask for, nothing is found", "snap-8", "", Err(())),
        ];
        for (rule, answered, asked, want) in table {
            let snapshot = Snapshot { snapshot_id: answered.into(), ..Default::default() };
            let got = listed(&response(vec![Entry { snapshot: Some(snapshot) }]), asked, NOW);
            assert_eq!(got.as_ref().map(|i| i.snapshot_id.as_str()).map_err(|_| ()), want, "{rule}");
        }
    }
}

#[cfg(test)]
#[path = "readiness_prop.rs"]
mod prop_tests;
