//! The writes the snapshot-controller makes, as plain values.
//!
//! Each becomes a JSON merge patch (the patch kind custom resources accept besides JSON patch). Where upstream
//! rewrites a whole finalizer list with an Update, the value carries the full new list and the resourceVersion it
//! was computed from, so the write fails with a Conflict instead of dropping someone else's finalizer. Everywhere
//! else a merge patch touches only the keys it names, which is what upstream's JSON-patch `replace` ops do.
//! `apply` computes what the API server will store; the tests check it and a controller may put it in its store.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Map, Value, json};
use snapshot_api::{VolumeSnapshot, VolumeSnapshotContent, VolumeSnapshotStatus};

/// A change to an object's metadata.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MetadataPatch {
    /// The resourceVersion the finalizer list was computed from (optimistic lock).
    pub resource_version: Option<String>,
    /// The whole finalizer list after the change.
    pub finalizers: Option<Vec<String>>,
    /// `Some` sets an annotation, `None` removes it.
    pub annotations: BTreeMap<String, Option<String>>,
}

impl MetadataPatch {
    /// The finalizer list of `meta` with `add` appended (when missing) and `remove` taken out; `None` when that
    /// changes nothing.
    pub fn finalizers(meta: &ObjectMeta, add: &[&str], remove: &[&str]) -> Option<MetadataPatch> {
        let current = meta.finalizers.clone().unwrap_or_default();
        let mut next: Vec<String> = current.iter().filter(|f| !remove.contains(&f.as_str())).cloned().collect();
        for finalizer in add {
            if !next.iter().any(|f| f == finalizer) {
                next.push(finalizer.to_string());
            }
        }
        (next != current).then(|| MetadataPatch {
            resource_version: meta.resource_version.clone(),
            finalizers: Some(next),
            ..Default::default()
        })
    }

    /// Sets one annotation.
    pub fn annotation(key: &str, value: &str) -> MetadataPatch {
        MetadataPatch {
            annotations: BTreeMap::from([(key.to_string(), Some(value.to_string()))]),
            ..Default::default()
        }
    }

    pub fn is_empty(&self) -> bool {
        self.finalizers.is_none() && self.annotations.is_empty()
    }

    fn merge_patch(&self) -> Option<Value> {
        if self.is_empty() {
            return None;
        }
        let mut metadata = Map::new();
        if let Some(version) = &self.resource_version {
            metadata.insert("resourceVersion".into(), json!(version));
        }
        if let Some(finalizers) = &self.finalizers {
            metadata.insert("finalizers".into(), json!(finalizers));
        }
        if !self.annotations.is_empty() {
            metadata.insert("annotations".into(), json!(self.annotations));
        }
        Some(Value::Object(metadata))
    }

    fn apply(&self, meta: &mut ObjectMeta) {
        if let Some(finalizers) = &self.finalizers {
            meta.finalizers = (!finalizers.is_empty()).then(|| finalizers.clone());
        }
        if !self.annotations.is_empty() {
            let mut map = meta.annotations.take().unwrap_or_default();
            for (key, value) in &self.annotations {
                match value {
                    Some(value) => map.insert(key.clone(), value.clone()),
                    None => map.remove(key),
                };
            }
            meta.annotations = (!map.is_empty()).then_some(map);
        }
    }
}

/// A write to a VolumeSnapshot's metadata and spec.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SnapshotPatch {
    pub metadata: MetadataPatch,
    /// `spec.volumeSnapshotClassName` (the default class).
    pub class_name: Option<String>,
}

impl SnapshotPatch {
    pub fn merge_patch(&self) -> Value {
        let mut patch = Map::new();
        if let Some(metadata) = self.metadata.merge_patch() {
            patch.insert("metadata".into(), metadata);
        }
        if let Some(class) = &self.class_name {
            patch.insert("spec".into(), json!({ "volumeSnapshotClassName": class }));
        }
        Value::Object(patch)
    }

    pub fn apply(&self, snapshot: &VolumeSnapshot) -> VolumeSnapshot {
        let mut snapshot = snapshot.clone();
        self.metadata.apply(&mut snapshot.metadata);
        if let Some(class) = &self.class_name {
            snapshot.spec.volume_snapshot_class_name = Some(class.clone());
        }
        snapshot
    }
}

/// A write of a VolumeSnapshot's whole status through the `status` subresource, as upstream's UpdateStatus.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SnapshotStatusWrite {
    /// The snapshot's resourceVersion when read.
    pub resource_version: Option<String>,
    pub status: VolumeSnapshotStatus,
}

impl SnapshotStatusWrite {
    /// Every status field is named, `null` when unset, so that nothing of the old status survives.
    pub fn merge_patch(&self) -> Value {
        let mut status = match serde_json::to_value(&self.status) {
            Ok(Value::Object(map)) => map,
            _ => Map::new(),
        };
        for key in [
            "boundVolumeSnapshotContentName",
            "creationTime",
            "readyToUse",
            "restoreSize",
            "error",
            "volumeGroupSnapshotName",
        ] {
            status.entry(key).or_insert(Value::Null);
        }
        let mut patch = Map::new();
        if let Some(version) = &self.resource_version {
            patch.insert("metadata".into(), json!({ "resourceVersion": version }));
        }
        patch.insert("status".into(), Value::Object(status));
        Value::Object(patch)
    }

    pub fn apply(&self, snapshot: &VolumeSnapshot) -> VolumeSnapshot {
        VolumeSnapshot { status: Some(self.status.clone()), ..snapshot.clone() }
    }
}

/// A write to a VolumeSnapshotContent's metadata and spec.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ContentPatch {
    pub metadata: MetadataPatch,
    /// `spec.volumeSnapshotRef.uid` (binding a pre-provisioned content).
    pub snapshot_uid: Option<String>,
    /// `spec.volumeSnapshotClassName`.
    pub class_name: Option<String>,
}

impl ContentPatch {
    pub fn merge_patch(&self) -> Value {
        let mut patch = Map::new();
        if let Some(metadata) = self.metadata.merge_patch() {
            patch.insert("metadata".into(), metadata);
        }
        let mut spec = Map::new();
        if let Some(uid) = &self.snapshot_uid {
            spec.insert("volumeSnapshotRef".into(), json!({ "uid": uid }));
        }
        if let Some(class) = &self.class_name {
            spec.insert("volumeSnapshotClassName".into(), json!(class));
        }
        if !spec.is_empty() {
            patch.insert("spec".into(), Value::Object(spec));
        }
        Value::Object(patch)
    }

    pub fn apply(&self, content: &VolumeSnapshotContent) -> VolumeSnapshotContent {
        let mut content = content.clone();
        self.metadata.apply(&mut content.metadata);
        if let Some(uid) = &self.snapshot_uid {
            content.spec.volume_snapshot_ref.uid = Some(uid.clone());
        }
        if let Some(class) = &self.class_name {
            content.spec.volume_snapshot_class_name = Some(class.clone());
        }
        content
    }
}

/// A write to a claim's finalizers.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClaimPatch {
    pub metadata: MetadataPatch,
}

impl ClaimPatch {
    pub fn merge_patch(&self) -> Value {
        match self.metadata.merge_patch() {
            Some(metadata) => json!({ "metadata": metadata }),
            None => json!({}),
        }
    }

    pub fn apply(&self, claim: &PersistentVolumeClaim) -> PersistentVolumeClaim {
        let mut claim = claim.clone();
        self.metadata.apply(&mut claim.metadata);
        claim
    }
}

#[cfg(test)]
mod tests {
    use snapshot_api::SnapshotError;

    use super::*;
    use crate::translate::common::fixtures::*;

    #[test]
    fn finalizer_lists() {
        let meta = |finalizers: &[&str]| ObjectMeta {
            resource_version: Some("5".into()),
            finalizers: (!finalizers.is_empty()).then(|| finalizers.iter().map(|f| f.to_string()).collect()),
            ..Default::default()
        };
        // (rule, current, add, remove, new list or no write)
        type Row = (
            &'static str,
            &'static [&'static str],
            &'static [&'static str],
            &'static [&'static str],
            Option<&'static [&'static str]>,
        );
        let table: [Row; 5] = [
            ("added at the end", &["x"], &["a"], &[], Some(&["x", "a"])),
            ("present: no write", &["a"], &["a"], &[], None),
            ("removed keeps order", &["x", "a", "y"], &[], &["a"], Some(&["x", "y"])),
            ("absent: no write", &["x"], &[], &["a"], None),
            ("last removed", &["a"], &[], &["a"], Some(&[])),
        ];
        for (rule, current, add, remove, want) in table {
            let patch = MetadataPatch::finalizers(&meta(current), add, remove);
            let want = want.map(|list| MetadataPatch {
                resource_version: Some("5".into()),
                finalizers: Some(list.iter().map(|f| f.to_string()).collect()),
                ..Default::default()
            });
            assert_eq!(patch, want, "{rule}");
        }
        let patch = MetadataPatch::finalizers(&meta(&["a"]), &[], &["a"]).unwrap();
        let mut out = meta(&["a"]);
        patch.apply(&mut out);
        assert_eq!(out.finalizers, None, "an empty list disappears");
    }

    #[test]
    fn snapshot_patch_body_and_apply() {
        let vs = snapshot_of_claim("ns", "snap", "uid-1", "claim");
        let patch = SnapshotPatch {
            metadata: MetadataPatch::finalizers(&vs.metadata, &["f"], &[]).unwrap(),
            class_name: Some("gold".into()),
        };
        assert_eq!(
            patch.merge_patch(),
            json!({"metadata": {"resourceVersion": "7", "finalizers": ["f"]}, "spec": {"volumeSnapshotClassName": "gold"}})
        );
        let out = patch.apply(&vs);
        assert_eq!(out.metadata.finalizers, Some(vec!["f".to_string()]));
        assert_eq!(out.spec.volume_snapshot_class_name.as_deref(), Some("gold"));
    }

    #[test]
    fn status_write_names_every_field() {
        let write = SnapshotStatusWrite {
            resource_version: Some("7".into()),
            status: VolumeSnapshotStatus {
                bound_volume_snapshot_content_name: Some("c".into()),
                ready_to_use: Some(false),
                error: Some(SnapshotError { time: None, message: Some("boom".into()) }),
                ..Default::default()
            },
        };
        assert_eq!(
            write.merge_patch(),
            json!({"metadata": {"resourceVersion": "7"}, "status": {
                "boundVolumeSnapshotContentName": "c", "readyToUse": false, "error": {"message": "boom"},
                "creationTime": null, "restoreSize": null, "volumeGroupSnapshotName": null,
            }})
        );
    }

    #[test]
    fn content_patch_body_and_apply() {
        let content = content_for("c", "ns", "snap", "", ContentSourceKind::Snapshot);
        let patch = ContentPatch {
            metadata: MetadataPatch::annotation("k", "yes"),
            snapshot_uid: Some("uid-1".into()),
            class_name: Some("gold".into()),
        };
        assert_eq!(
            patch.merge_patch(),
            json!({"metadata": {"annotations": {"k": "yes"}},
                   "spec": {"volumeSnapshotRef": {"uid": "uid-1"}, "volumeSnapshotClassName": "gold"}})
        );
        let out = patch.apply(&content);
        assert_eq!(out.spec.volume_snapshot_ref.uid.as_deref(), Some("uid-1"));
        assert_eq!(out.spec.volume_snapshot_ref.name.as_deref(), Some("snap"), "rest of the reference kept");
        assert_eq!(out.metadata.annotations.unwrap()["k"], "yes");
    }
}
