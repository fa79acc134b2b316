//! The snapshot-controller's sync of a VolumeSnapshotContent (external-snapshotter
//! pkg/common-controller/snapshot_controller.go, syncContent). It never deletes a content: a content
//! whose snapshot is missing may be a copy of another cluster's objects, and deleting it would delete the storage
//! snapshot too. It only protects bound contents and tells csi-snapshotter when their snapshot is being deleted.

use kube::ResourceExt;
use sidecar_runtime::events::PlannedEvent;
use snapshot_api::names::{
    ANN_VALUE_YES, ANN_VOLUME_SNAPSHOT_BEING_DELETED, FINALIZER_VOLUME_SNAPSHOT_AS_SOURCE,
    FINALIZER_VOLUME_SNAPSHOT_BOUND, FINALIZER_VOLUME_SNAPSHOT_CONTENT_BOUND,
};
use snapshot_api::{VolumeSnapshot, VolumeSnapshotContent};

use super::patch::{ContentPatch, MetadataPatch};
use super::reasons::CONTENT_VALIDATION_ERROR;
use super::status::snapshot_needs_status;

/// What the content sync does.
#[derive(Clone, Debug, PartialEq)]
pub enum ContentSync {
    /// Not exactly one source: a Warning on the content, and the sync fails (retried).
    Invalid { event: PlannedEvent, error: String },
    /// `volumeSnapshotRef.uid` is empty: the content waits for its snapshot's sync to bind it.
    PreBound,
    /// Add `volumesnapshotcontent-bound-protection`; the write's update event brings the content back.
    AddFinalizer(ContentPatch),
    Bound {
        /// The snapshot's status lags the content's: enqueue the snapshot.
        enqueue_snapshot: bool,
        /// The snapshot is being deleted: mark the content for csi-snapshotter.
        being_deleted: Option<ContentPatch>,
    },
}

/// The `ns/name` key of the snapshot the content points at, to read it from the snapshot store.
pub fn referenced_snapshot_key(content: &VolumeSnapshotContent) -> String {
    let reference = &content.spec.volume_snapshot_ref;
    format!("{}/{}", reference.namespace.as_deref().unwrap_or_default(), reference.name.as_deref().unwrap_or_default())
}

/// The snapshot (`namespace/name` key) to sync again when `content` is deleted: a snapshot keeps its bound finalizer
/// until its Delete content is gone, and this brings it back to drop it (external-snapshotter
/// pkg/common-controller/snapshot_controller_base.go, deleteContent).
pub fn snapshot_woken_by_deleted_content(content: &VolumeSnapshotContent) -> String {
    referenced_snapshot_key(content)
}

/// The sync of `content`, with the snapshot found under [`referenced_snapshot_key`] (if any).
pub fn content_sync(content: &VolumeSnapshotContent, snapshot: Option<&VolumeSnapshot>) -> ContentSync {
    let source = &content.spec.source;
    if source.volume_handle.is_some() == source.snapshot_handle.is_some() {
        let text = "Exactly one of VolumeHandle and SnapshotHandle should be specified";
        return ContentSync::Invalid {
            event: PlannedEvent::warning(CONTENT_VALIDATION_ERROR, text),
            error: text.to_string(),
        };
    }
    let uid = content.spec.volume_snapshot_ref.uid.as_deref().unwrap_or_default();
    if uid.is_empty() {
        return ContentSync::PreBound;
    }
    if content.metadata.deletion_timestamp.is_none()
        && let Some(metadata) =
            MetadataPatch::finalizers(&content.metadata, &[FINALIZER_VOLUME_SNAPSHOT_CONTENT_BOUND], &[])
    {
        return ContentSync::AddFinalizer(ContentPatch { metadata, ..Default::default() });
    }
    // A snapshot of the same name but another UID replaced the one this content was bound to: that one is missing.
    let snapshot = snapshot.filter(|s| s.uid().as_deref() == Some(uid));
    ContentSync::Bound {
        enqueue_snapshot: snapshot.is_some_and(|s| snapshot_needs_status(s, content)),
        being_deleted: snapshot.filter(|s| is_deletion_candidate(s)).and_then(|_| being_deleted_annotation(content)),
    }
}

/// A snapshot whose deletion the controller still has to process: it has a deletionTimestamp and one of its
/// finalizers.
pub fn is_deletion_candidate(snapshot: &VolumeSnapshot) -> bool {
    snapshot.metadata.deletion_timestamp.is_some()
        && snapshot
            .finalizers()
            .iter()
            .any(|f| f == FINALIZER_VOLUME_SNAPSHOT_AS_SOURCE || f == FINALIZER_VOLUME_SNAPSHOT_BOUND)
}

/// `volumesnapshot-being-deleted: "yes"` on the content, unless it is there (with any value) already.
pub fn being_deleted_annotation(content: &VolumeSnapshotContent) -> Option<ContentPatch> {
    (!content.annotations().contains_key(ANN_VOLUME_SNAPSHOT_BEING_DELETED)).then(|| ContentPatch {
        metadata: MetadataPatch::annotation(ANN_VOLUME_SNAPSHOT_BEING_DELETED, ANN_VALUE_YES),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::translate::common::fixtures::*;

    const CONTENT_FINALIZER: &str = "snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection";

    fn bound_content(finalizer: bool) -> VolumeSnapshotContent {
        let mut content = content_for("c", "ns", "snap", "uid-1", ContentSourceKind::Volume);
        content.metadata.finalizers = finalizer.then(|| vec![CONTENT_FINALIZER.to_string()]);
        content
    }

    fn deleting(uid: &str) -> VolumeSnapshot {
        let mut vs = snapshot_of_claim("ns", "snap", uid, "data");
        vs.metadata.deletion_timestamp = Some(time(1));
        vs.metadata.finalizers =
            Some(vec!["snapshot.storage.kubernetes.io/volumesnapshot-as-source-protection".into()]);
        vs
    }

    #[test]
    fn content_sync_decisions() {
        let mut both = bound_content(true);
        both.spec.source.snapshot_handle = Some("h".into());
        let mut neither = bound_content(true);
        neither.spec.source.volume_handle = None;
        let prebound = content_for("c", "ns", "snap", "", ContentSourceKind::Snapshot);
        let mut annotated = bound_content(true);
        annotated.metadata.annotations =
            Some([(ANN_VOLUME_SNAPSHOT_BEING_DELETED.to_string(), "yes".to_string())].into());
        let mut deleted_without_finalizer = bound_content(false);
        deleted_without_finalizer.metadata.deletion_timestamp = Some(time(1));
        let live = snapshot_of_claim("ns", "snap", "uid-1", "data");
        let mut with_status = bound_content(true);
        with_status.status =
            Some(snapshot_api::VolumeSnapshotContentStatus { ready_to_use: Some(false), ..Default::default() });
        let mut deleting_without_finalizers = deleting("uid-1");
        deleting_without_finalizers.metadata.finalizers = None;
        let invalid = ContentSync::Invalid {
            event: PlannedEvent::warning(
                "ContentValidationError",
                "Exactly one of VolumeHandle and SnapshotHandle should be specified",
            ),
            error: "Exactly one of VolumeHandle and SnapshotHandle should be specified".into(),
        };
        let mark = Some(ContentPatch {
            metadata: MetadataPatch::annotation("snapshot.storage.kubernetes.io/volumesnapshot-being-deleted", "yes"),
            ..Default::default()
        });
        let bound = bound_content(true);
        let quiet = ContentSync::Bound { enqueue_snapshot: false, being_deleted: None };
        // (rule, content, snapshot, decision)
        let table: Vec<(&str, &VolumeSnapshotContent, Option<VolumeSnapshot>, ContentSync)> = vec![
            ("both handles", &both, None, invalid.clone()),
            ("no handle", &neither, None, invalid),
            ("pre-bound: nothing", &prebound, None, ContentSync::PreBound),
            ("snapshot missing: never deleted", &bound, None, quiet.clone()),
            ("snapshot of another uid counts as missing", &bound, Some(deleting("uid-2")), quiet.clone()),
            (
                "snapshot being deleted: content marked",
                &bound,
                Some(deleting("uid-1")),
                ContentSync::Bound { enqueue_snapshot: false, being_deleted: mark },
            ),
            (
                "already marked",
                &annotated,
                Some(deleting("uid-1")),
                ContentSync::Bound { enqueue_snapshot: false, being_deleted: None },
            ),
            (
                "deletionTimestamp without finalizers: not a candidate",
                &bound,
                Some(deleting_without_finalizers),
                ContentSync::Bound { enqueue_snapshot: false, being_deleted: None },
            ),
            ("content without status: snapshot not enqueued", &bound, Some(live.clone()), quiet.clone()),
            (
                "6/9: content status ahead of the snapshot: enqueued",
                &with_status,
                Some(live),
                ContentSync::Bound { enqueue_snapshot: true, being_deleted: None },
            ),
            ("content being deleted gets no finalizer", &deleted_without_finalizer, None, quiet),
        ];
        for (rule, content, snapshot, want) in table {
            assert_eq!(content_sync(content, snapshot.as_ref()), want, "{rule}");
        }
        match content_sync(&bound_content(false), None) {
            ContentSync::AddFinalizer(patch) => {
                assert_eq!(
                    patch.apply(&bound_content(false)).metadata.finalizers,
                    Some(vec![CONTENT_FINALIZER.to_string()])
                );
            }
            other => panic!("finalizer expected, got {other:?}"),
        }
        assert_eq!(referenced_snapshot_key(&bound_content(true)), "ns/snap");
        assert_eq!(snapshot_woken_by_deleted_content(&bound_content(true)), "ns/snap", "its deletion wakes it");
    }
}
