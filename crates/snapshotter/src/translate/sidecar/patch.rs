//! The writes csi-snapshotter makes to a VolumeSnapshotContent, as plain values: a change to its metadata (the
//! being-created annotation, the bound-protection finalizer) and a new status.
//!
//! Both become JSON merge patches. A status is written whole, every field present (absent ones as `null`), so the
//! stored status is exactly the value computed here whatever was there before. The finalizer list is a list, which a
//! merge patch replaces whole; the patch then carries the resourceVersion it was computed from, so that a finalizer
//! another controller added meanwhile makes the write fail with a Conflict instead of being dropped.
//! [`ContentPatch::apply`] and [`ContentStatusPatch::apply`] compute what the API server will store.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};
use snapshot_api::{VolumeSnapshotContent, VolumeSnapshotContentStatus};

/// A write to a content's metadata.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContentPatch {
    /// The content's resourceVersion when the write must not overwrite a newer content (optimistic lock).
    pub resource_version: Option<String>,
    /// `Some` sets an annotation, `None` removes it.
    pub annotations: BTreeMap<String, Option<String>>,
    /// The whole new finalizer list, when it changes.
    pub finalizers: Option<Vec<String>>,
}

/// A write to a content's `status` subresource: the status becomes exactly this value.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ContentStatusPatch {
    pub status: VolumeSnapshotContentStatus,
}

impl ContentPatch {
    /// Sets (`Some`) or removes (`None`) one annotation.
    pub fn annotation(key: &str, value: Option<&str>) -> ContentPatch {
        ContentPatch {
            annotations: BTreeMap::from([(key.to_string(), value.map(str::to_string))]),
            ..Default::default()
        }
    }

    /// Removes `finalizer` from the content's list, guarded by the content's resourceVersion; `None` when absent.
    pub fn remove_finalizer(content: &VolumeSnapshotContent, finalizer: &str) -> Option<ContentPatch> {
        let finalizers = content.metadata.finalizers.as_deref().unwrap_or_default();
        if !finalizers.iter().any(|f| f == finalizer) {
            return None;
        }
        Some(ContentPatch {
            resource_version: content.metadata.resource_version.clone(),
            finalizers: Some(finalizers.iter().filter(|f| *f != finalizer).cloned().collect()),
            ..Default::default()
        })
    }

    /// The body of a JSON merge patch.
    pub fn merge_patch(&self) -> Value {
        let mut metadata = Map::new();
        if let Some(version) = &self.resource_version {
            metadata.insert("resourceVersion".into(), json!(version));
        }
        if !self.annotations.is_empty() {
            metadata.insert("annotations".into(), json!(self.annotations));
        }
        if let Some(finalizers) = &self.finalizers {
            metadata.insert("finalizers".into(), json!(finalizers));
        }
        json!({ "metadata": metadata })
    }

    /// The content as the API server will store it after this patch.
    pub fn apply(&self, content: &VolumeSnapshotContent) -> VolumeSnapshotContent {
        let mut content = content.clone();
        if !self.annotations.is_empty() {
            let mut map = content.metadata.annotations.take().unwrap_or_default();
            for (key, value) in &self.annotations {
                match value {
                    Some(value) => map.insert(key.clone(), value.clone()),
                    None => map.remove(key),
                };
            }
            content.metadata.annotations = (!map.is_empty()).then_some(map);
        }
        if let Some(finalizers) = &self.finalizers {
            content.metadata.finalizers = (!finalizers.is_empty()).then(|| finalizers.clone());
        }
        content
    }
}

impl ContentStatusPatch {
    /// The body of a JSON merge patch for the `status` subresource.
    pub fn merge_patch(&self) -> Value {
        let status = &self.status;
        json!({ "status": {
            "snapshotHandle": status.snapshot_handle,
            "creationTime": status.creation_time,
            "restoreSize": status.restore_size,
            "readyToUse": status.ready_to_use,
            "error": status.error,
            "volumeGroupSnapshotHandle": status.volume_group_snapshot_handle,
        }})
    }

    /// The content as the API server will store it after this patch.
    pub fn apply(&self, content: &VolumeSnapshotContent) -> VolumeSnapshotContent {
        let mut content = content.clone();
        content.status = Some(self.status.clone());
        content
    }
}

#[cfg(test)]
mod tests {
    use snapshot_api::names::{ANN_VOLUME_SNAPSHOT_BEING_CREATED, FINALIZER_VOLUME_SNAPSHOT_CONTENT_BOUND};

    use super::*;
    use crate::translate::sidecar::fixtures::content;

    #[test]
    fn annotations_are_set_and_removed() {
        let mut stored = content();
        stored.metadata.annotations = Some(BTreeMap::from([("keep".to_string(), "1".to_string())]));
        let set = ContentPatch::annotation(ANN_VOLUME_SNAPSHOT_BEING_CREATED, Some("yes"));
        assert_eq!(set.merge_patch(), json!({"metadata": {"annotations": {ANN_VOLUME_SNAPSHOT_BEING_CREATED: "yes"}}}));
        let written = set.apply(&stored);
        assert_eq!(written.metadata.annotations.as_ref().map(BTreeMap::len), Some(2));
        let removed = ContentPatch::annotation(ANN_VOLUME_SNAPSHOT_BEING_CREATED, None);
        assert_eq!(
            removed.merge_patch(),
            json!({"metadata": {"annotations": {ANN_VOLUME_SNAPSHOT_BEING_CREATED: null}}})
        );
        assert_eq!(removed.apply(&written).metadata.annotations, stored.metadata.annotations);
        // The last annotation gone leaves no empty map behind.
        assert_eq!(removed.apply(&set.apply(&content())).metadata.annotations, None);
    }

    #[test]
    fn finalizer_removal_is_guarded_by_the_resource_version() {
        let mut stored = content();
        stored.metadata.resource_version = Some("42".into());
        assert_eq!(ContentPatch::remove_finalizer(&stored, FINALIZER_VOLUME_SNAPSHOT_CONTENT_BOUND), None);
        stored.metadata.finalizers = Some(vec!["other".into(), FINALIZER_VOLUME_SNAPSHOT_CONTENT_BOUND.into()]);
        let patch = ContentPatch::remove_finalizer(&stored, FINALIZER_VOLUME_SNAPSHOT_CONTENT_BOUND).unwrap();
        assert_eq!(patch.merge_patch(), json!({"metadata": {"resourceVersion": "42", "finalizers": ["other"]}}));
        assert_eq!(patch.apply(&stored).metadata.finalizers, Some(vec!["other".to_string()]));
        stored.metadata.finalizers = Some(vec![FINALIZER_VOLUME_SNAPSHOT_CONTENT_BOUND.into()]);
        let patch = ContentPatch::remove_finalizer(&stored, FINALIZER_VOLUME_SNAPSHOT_CONTENT_BOUND).unwrap();
        assert_eq!(patch.apply(&stored).metadata.finalizers, None);
    }

    #[test]
    fn status_is_written_whole() {
        let mut stored = content();
        stored.status = Some(VolumeSnapshotContentStatus {
            snapshot_handle: Some("old".into()),
            restore_size: Some(5),
            ..Default::default()
        });
        let patch = ContentStatusPatch {
            status: VolumeSnapshotContentStatus {
                snapshot_handle: Some("snap-1".into()),
                ready_to_use: Some(true),
                ..Default::default()
            },
        };
        assert_eq!(
            patch.merge_patch(),
            json!({"status": {"snapshotHandle": "snap-1", "creationTime": null, "restoreSize": null,
                "readyToUse": true, "error": null, "volumeGroupSnapshotHandle": null}})
        );
        assert_eq!(patch.apply(&stored).status, Some(patch.status.clone()));
    }
}
