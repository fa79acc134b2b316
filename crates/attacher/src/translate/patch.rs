//! The attacher's writes as values, each turned into the patch upstream sends and applied by `apply` the way the API
//! server stores it (the tests check what a write leaves behind):
//!
//! - [`VolumeAttachmentPatch`]: the VolumeAttachment's finalizers and annotations, a JSON merge patch (a list is
//!   replaced whole, as upstream's `createMergePatch` sends it).
//! - [`StatusPatch`]: `status` of a VolumeAttachment, a JSON merge patch through the `status` subresource.
//! - [`VolumeFinalizerPatch`]: the finalizer on a PersistentVolume, a JSON patch that appends it, or removes it at
//!   the index it was read at after a `test` of that index, so a list another controller changed meanwhile is
//!   never written back stale (external-attacher pkg/controller/util.go, addFinalizerPatch and removeFinalizerPatch).
//!
//! None carries a resourceVersion: upstream's merge patches do not either.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::api::storage::v1::{VolumeAttachment, VolumeAttachmentStatus, VolumeError};
use serde_json::{Map, Value, json};

/// A write to a VolumeAttachment's metadata.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VolumeAttachmentPatch {
    /// The whole new finalizer list; an empty list removes the field.
    pub finalizers: Option<Vec<String>>,
    /// Annotations to set.
    pub annotations: BTreeMap<String, String>,
}

impl VolumeAttachmentPatch {
    pub fn is_empty(&self) -> bool {
        self.finalizers.is_none() && self.annotations.is_empty()
    }

    pub fn merge_patch(&self) -> Value {
        let mut metadata = Map::new();
        if let Some(finalizers) = &self.finalizers {
            let list = if finalizers.is_empty() { Value::Null } else { json!(finalizers) };
            metadata.insert("finalizers".into(), list);
        }
        if !self.annotations.is_empty() {
            metadata.insert("annotations".into(), json!(self.annotations));
        }
        json!({ "metadata": metadata })
    }

    /// The VolumeAttachment as the API server stores it after this patch.
    pub fn apply(&self, attachment: &VolumeAttachment) -> VolumeAttachment {
        let mut attachment = attachment.clone();
        if let Some(finalizers) = &self.finalizers {
            attachment.metadata.finalizers = (!finalizers.is_empty()).then(|| finalizers.clone());
        }
        if !self.annotations.is_empty() {
            let annotations = attachment.metadata.annotations.get_or_insert_with(BTreeMap::new);
            annotations.extend(self.annotations.clone());
        }
        attachment
    }
}

/// A change to `status.attachmentMetadata`: the publish context replaces what was there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MetadataChange {
    /// The field goes.
    Clear,
    /// The map becomes `set`; `stale` are the keys it had that `set` lacks (a merge patch nulls them).
    Replace { set: BTreeMap<String, String>, stale: BTreeSet<String> },
}

/// A write through a VolumeAttachment's `status` subresource. `None` leaves a field as it is; for the errors,
/// `Some(None)` removes one.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StatusPatch {
    pub attached: Option<bool>,
    pub attachment_metadata: Option<MetadataChange>,
    pub attach_error: Option<Option<VolumeError>>,
    pub detach_error: Option<Option<VolumeError>>,
}

impl StatusPatch {
    pub fn is_empty(&self) -> bool {
        *self == StatusPatch::default()
    }

    pub fn merge_patch(&self) -> Value {
        let mut status = Map::new();
        if let Some(attached) = self.attached {
            status.insert("attached".into(), json!(attached));
        }
        match &self.attachment_metadata {
            Some(MetadataChange::Clear) => {
                status.insert("attachmentMetadata".into(), Value::Null);
            }
            Some(MetadataChange::Replace { set, stale }) => {
                let mut map: Map<String, Value> = stale.iter().map(|key| (key.clone(), Value::Null)).collect();
                map.extend(set.iter().map(|(key, value)| (key.clone(), json!(value))));
                status.insert("attachmentMetadata".into(), Value::Object(map));
            }
            None => {}
        }
        for (field, change) in [("attachError", &self.attach_error), ("detachError", &self.detach_error)] {
            if let Some(error) = change {
                status.insert(field.into(), json!(error));
            }
        }
        json!({ "status": status })
    }

    /// The VolumeAttachment as the API server stores it after this patch.
    pub fn apply(&self, attachment: &VolumeAttachment) -> VolumeAttachment {
        let mut attachment = attachment.clone();
        let status = attachment.status.get_or_insert_with(VolumeAttachmentStatus::default);
        if let Some(attached) = self.attached {
            status.attached = attached;
        }
        match &self.attachment_metadata {
            Some(MetadataChange::Clear) => status.attachment_metadata = None,
            Some(MetadataChange::Replace { set, .. }) => {
                status.attachment_metadata = (!set.is_empty()).then(|| set.clone());
            }
            None => {}
        }
        if let Some(error) = &self.attach_error {
            status.attach_error = error.clone();
        }
        if let Some(error) = &self.detach_error {
            status.detach_error = error.clone();
        }
        attachment
    }
}

/// The change of `attachmentMetadata` that leaves exactly `context` (the publish context; empty: none).
pub fn replace_metadata(attachment: &VolumeAttachment, context: BTreeMap<String, String>) -> Option<MetadataChange> {
    let current = attachment.status.as_ref().and_then(|s| s.attachment_metadata.as_ref());
    match (current, context.is_empty()) {
        (None, true) => None,
        (Some(_), true) => Some(MetadataChange::Clear),
        (Some(current), false) if *current == context => None,
        (current, false) => {
            let stale = current.into_iter().flat_map(|c| c.keys()).filter(|k| !context.contains_key(*k)).cloned();
            Some(MetadataChange::Replace { stale: stale.collect(), set: context })
        }
    }
}

/// The attacher's finalizer added to, or removed from, a PersistentVolume.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VolumeFinalizerPatch {
    /// Appended; `existing` is the list as read (`None`: the PV has none).
    Add { finalizer: String, existing: Option<Vec<String>> },
    /// Removed at `index`, where it was read.
    Remove { finalizer: String, index: usize },
}

impl VolumeFinalizerPatch {
    /// The RFC 6902 operations.
    pub fn json_patch(&self) -> Value {
        match self {
            VolumeFinalizerPatch::Add { finalizer, existing: None } => json!([
                {"op": "test", "path": "/metadata/finalizers", "value": null},
                {"op": "add", "path": "/metadata/finalizers", "value": [finalizer]},
            ]),
            VolumeFinalizerPatch::Add { finalizer, existing: Some(list) } if list.is_empty() => json!([
                {"op": "test", "path": "/metadata/finalizers", "value": []},
                {"op": "replace", "path": "/metadata/finalizers", "value": [finalizer]},
            ]),
            VolumeFinalizerPatch::Add { finalizer, existing: Some(_) } => {
                json!([{"op": "add", "path": "/metadata/finalizers/-", "value": finalizer}])
            }
            VolumeFinalizerPatch::Remove { finalizer, index } => {
                let path = format!("/metadata/finalizers/{index}");
                json!([{"op": "test", "path": path, "value": finalizer}, {"op": "remove", "path": path}])
            }
        }
    }

    /// The PersistentVolume as stored after this patch, or `None` where the API server refuses it (a `test` that
    /// fails: the list changed since it was read).
    pub fn apply(&self, volume: &PersistentVolume) -> Option<PersistentVolume> {
        let mut volume = volume.clone();
        let finalizers = &mut volume.metadata.finalizers;
        match self {
            VolumeFinalizerPatch::Add { finalizer, existing } => {
                if existing.as_ref().is_none_or(Vec::is_empty) && finalizers.as_ref() != existing.as_ref() {
                    return None;
                }
                finalizers.get_or_insert_with(Vec::new).push(finalizer.clone());
            }
            VolumeFinalizerPatch::Remove { finalizer, index } => {
                let list = finalizers.as_mut().filter(|list| list.get(*index) == Some(finalizer))?;
                list.remove(*index);
            }
        }
        Some(volume)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn attachment(finalizers: Option<&[&str]>, metadata: Option<&[(&str, &str)]>) -> VolumeAttachment {
        VolumeAttachment {
            metadata: ObjectMeta {
                name: Some("va".into()),
                finalizers: finalizers.map(|list| list.iter().map(|f| f.to_string()).collect()),
                ..Default::default()
            },
            status: Some(VolumeAttachmentStatus {
                attached: metadata.is_some(),
                attachment_metadata: metadata.map(|m| m.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn metadata_patches_replace_the_finalizer_list_and_add_annotations() {
        let patch = VolumeAttachmentPatch {
            finalizers: Some(vec!["other".into(), "external-attacher/d".into()]),
            annotations: map(&[("csi.alpha.kubernetes.io/node-id", "n1")]),
        };
        assert_eq!(
            patch.merge_patch(),
            json!({"metadata": {
                "finalizers": ["other", "external-attacher/d"],
                "annotations": {"csi.alpha.kubernetes.io/node-id": "n1"},
            }})
        );
        let stored = patch.apply(&attachment(Some(&["other"]), None));
        assert_eq!(stored.metadata.finalizers, Some(vec!["other".into(), "external-attacher/d".into()]));
        assert_eq!(stored.metadata.annotations, Some(map(&[("csi.alpha.kubernetes.io/node-id", "n1")])));

        let removal = VolumeAttachmentPatch { finalizers: Some(vec![]), ..Default::default() };
        assert_eq!(removal.merge_patch(), json!({"metadata": {"finalizers": null}}), "the last finalizer goes");
        assert_eq!(removal.apply(&attachment(Some(&["external-attacher/d"]), None)).metadata.finalizers, None);
        assert!(VolumeAttachmentPatch::default().is_empty());
    }

    #[test]
    fn the_publish_context_replaces_the_attachment_metadata() {
        // (case, metadata before, publish context, change, stored after)
        type Row =
            (&'static str, Option<&'static [(&'static str, &'static str)]>, &'static [(&'static str, &'static str)]);
        let table: [(Row, Option<Value>); 5] = [
            (("none before, none now", None, &[]), None),
            (("none before, a context now", None, &[("a", "1")]), Some(json!({"a": "1"}))),
            (("the same context again", Some(&[("a", "1")]), &[("a", "1")]), None),
            (
                ("a key dropped, a key changed", Some(&[("a", "1"), ("b", "2")]), &[("b", "3")]),
                Some(json!({"a": null, "b": "3"})),
            ),
            (("a context before, none now", Some(&[("a", "1")]), &[]), Some(Value::Null)),
        ];
        for ((case, before, context), want_patch) in table {
            let va = attachment(None, before);
            let change = replace_metadata(&va, map(context));
            let patch = StatusPatch { attachment_metadata: change, ..Default::default() };
            let sent = patch.merge_patch()["status"].get("attachmentMetadata").cloned();
            assert_eq!(sent, want_patch, "{case}: patch");
            let stored = patch.apply(&va).status.unwrap().attachment_metadata.unwrap_or_default();
            assert_eq!(stored, map(context), "{case}: stored");
        }
    }

    #[test]
    fn status_patches_set_and_clear_the_errors() {
        let error = VolumeError {
            message: Some("rpc error: code = NotFound desc = x".into()),
            error_code: Some(5),
            time: None,
        };
        let failed = StatusPatch { attach_error: Some(Some(error.clone())), ..Default::default() };
        assert_eq!(
            failed.merge_patch(),
            json!({"status": {"attachError": {"message": "rpc error: code = NotFound desc = x", "errorCode": 5}}})
        );
        let va = failed.apply(&attachment(None, None));
        assert_eq!(va.status.as_ref().unwrap().attach_error, Some(error));
        let attached = StatusPatch {
            attached: Some(true),
            attach_error: Some(None),
            attachment_metadata: None,
            detach_error: None,
        };
        assert_eq!(attached.merge_patch(), json!({"status": {"attached": true, "attachError": null}}));
        let va = attached.apply(&va);
        assert!(va.status.as_ref().unwrap().attached);
        assert_eq!(va.status.as_ref().unwrap().attach_error, None);
        assert!(StatusPatch::default().is_empty());
    }

    fn volume(finalizers: Option<&[&str]>) -> PersistentVolume {
        PersistentVolume {
            metadata: ObjectMeta {
                name: Some("pv".into()),
                finalizers: finalizers.map(|list| list.iter().map(|f| f.to_string()).collect()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn volume_finalizers_are_appended_or_removed_where_they_were_read() {
        let ours = "external-attacher/d".to_string();
        let add = |existing: Option<&[&str]>| VolumeFinalizerPatch::Add {
            finalizer: ours.clone(),
            existing: existing.map(|l| l.iter().map(|f| f.to_string()).collect()),
        };
        // (case, patch, JSON patch, finalizers of the PV it is sent to, stored finalizers or refused)
        type Row<'a> = (&'a str, VolumeFinalizerPatch, Value, Option<&'a [&'a str]>, Option<Option<Vec<&'a str>>>);
        let table: Vec<Row> = vec![
            (
                "first finalizer",
                add(None),
                json!([{"op": "test", "path": "/metadata/finalizers", "value": null},
                       {"op": "add", "path": "/metadata/finalizers", "value": [ours]}]),
                None,
                Some(Some(vec!["external-attacher/d"])),
            ),
            (
                "first finalizer, but one came meanwhile",
                add(None),
                json!([{"op": "test", "path": "/metadata/finalizers", "value": null},
                       {"op": "add", "path": "/metadata/finalizers", "value": [ours]}]),
                Some(&["x"]),
                None,
            ),
            (
                "an empty list",
                add(Some(&[])),
                json!([{"op": "test", "path": "/metadata/finalizers", "value": []},
                       {"op": "replace", "path": "/metadata/finalizers", "value": [ours]}]),
                Some(&[]),
                Some(Some(vec!["external-attacher/d"])),
            ),
            (
                "appended to others",
                add(Some(&["kubernetes.io/pv-protection"])),
                json!([{"op": "add", "path": "/metadata/finalizers/-", "value": ours}]),
                Some(&["kubernetes.io/pv-protection"]),
                Some(Some(vec!["kubernetes.io/pv-protection", "external-attacher/d"])),
            ),
            (
                "removed at its index",
                VolumeFinalizerPatch::Remove { finalizer: ours.clone(), index: 1 },
                json!([{"op": "test", "path": "/metadata/finalizers/1", "value": ours},
                       {"op": "remove", "path": "/metadata/finalizers/1"}]),
                Some(&["kubernetes.io/pv-protection", "external-attacher/d"]),
                Some(Some(vec!["kubernetes.io/pv-protection"])),
            ),
            (
                "the list changed since it was read",
                VolumeFinalizerPatch::Remove { finalizer: ours.clone(), index: 1 },
                json!([{"op": "test", "path": "/metadata/finalizers/1", "value": ours},
                       {"op": "remove", "path": "/metadata/finalizers/1"}]),
                Some(&["external-attacher/d"]),
                None,
            ),
        ];
        for (case, patch, json_patch, before, after) in table {
            assert_eq!(patch.json_patch(), json_patch, "{case}");
            let stored = patch.apply(&volume(before)).map(|pv| pv.metadata.finalizers);
            let want = after.map(|list| list.map(|l| l.into_iter().map(str::to_string).collect::<Vec<_>>()));
            assert_eq!(stored, want, "{case}");
        }
    }
}
