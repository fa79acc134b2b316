//! One attach of a VolumeAttachment, in the order the worker takes the steps (external-attacher
//! pkg/controller/csi_handler.go, syncAttach and csiAttach):
//!
//! 1. [`needed`]: an attached VolumeAttachment is left alone, unless the reconciler found the driver disagrees.
//! 2. [`crate::translate::volume::source`]; the PV from the cache, refused while it is being deleted.
//! 3. [`volume_finalizer`]: the PV gets the attacher's finalizer, so it outlives its attachments.
//! 4. The volume in its CSI form ([`crate::translate::volume`]) and its capability
//!    ([`crate::translate::request::volume_capability`]).
//! 5. The publish Secret, read live.
//! 6. The node ID from the node's CSINode ([`crate::translate::node::node_id`]).
//! 7. [`metadata`]: the attacher's finalizer and the node ID annotation on the VolumeAttachment, written before the
//!    driver is called: after a crash at any later point the VolumeAttachment will be detached before it goes.
//! 8. ControllerPublishVolume.
//! 9. [`attached`] through `status`; any failure of steps 2 to 8 goes to `status.attachError` instead ([`failed`]).
//!
//! A driver without PUBLISH_UNPUBLISH_VOLUME gets [`attached_without_driver`] alone (trivial_handler.go).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::api::storage::v1::{VolumeAttachment, VolumeError};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::translate::names::{NODE_ID_ANNOTATION, finalizer};
use crate::translate::patch::{StatusPatch, VolumeAttachmentPatch, VolumeFinalizerPatch, replace_metadata};

pub fn is_attached(attachment: &VolumeAttachment) -> bool {
    attachment.status.as_ref().is_some_and(|s| s.attached)
}

/// Whether to call the driver: not attached yet, or `forced` by the reconciler.
pub fn needed(attachment: &VolumeAttachment, forced: bool) -> bool {
    forced || !is_attached(attachment)
}

/// The attacher's finalizer appended to the PV, when it lacks it.
pub fn volume_finalizer(volume: &PersistentVolume, driver: &str) -> Option<VolumeFinalizerPatch> {
    let ours = finalizer(driver);
    let existing = volume.metadata.finalizers.clone();
    let present = existing.as_ref().is_some_and(|list| list.contains(&ours));
    (!present).then_some(VolumeFinalizerPatch::Add { finalizer: ours, existing })
}

/// The VolumeAttachment's finalizer and node ID annotation, where missing (empty: nothing to write).
pub fn metadata(attachment: &VolumeAttachment, driver: &str, node_id: &str) -> VolumeAttachmentPatch {
    let ours = finalizer(driver);
    let finalizers = attachment.metadata.finalizers.clone().unwrap_or_default();
    let annotated = attachment.metadata.annotations.as_ref().and_then(|a| a.get(NODE_ID_ANNOTATION));
    VolumeAttachmentPatch {
        finalizers: (!finalizers.contains(&ours)).then(|| finalizers.into_iter().chain([ours]).collect()),
        annotations: match annotated {
            Some(id) if id == node_id => BTreeMap::new(),
            _ => BTreeMap::from([(NODE_ID_ANNOTATION.to_string(), node_id.to_string())]),
        },
    }
}

/// Attached: `status.attached`, the publish context as `attachmentMetadata`, no `attachError` (markAsAttached).
/// Only what differs is written.
pub fn attached(attachment: &VolumeAttachment, publish_context: BTreeMap<String, String>) -> StatusPatch {
    let status = attachment.status.clone().unwrap_or_default();
    StatusPatch {
        attached: (!status.attached).then_some(true),
        attachment_metadata: replace_metadata(attachment, publish_context),
        attach_error: status.attach_error.is_some().then_some(None),
        detach_error: None,
    }
}

/// A driver that attaches nothing: the VolumeAttachment is marked attached without a call, once.
pub fn attached_without_driver(attachment: &VolumeAttachment) -> Option<StatusPatch> {
    (!is_attached(attachment)).then(|| attached(attachment, BTreeMap::new()))
}

/// A failed attach in `status.attachError`: the error's text, when, and the gRPC code of a driver's answer
/// (`code`, written with the MutableCSINodeAllocatableCount gate, on by default).
pub fn failed(message: String, code: Option<i32>, now: Time) -> StatusPatch {
    let error = VolumeError { message: Some(message), time: Some(now), error_code: code };
    StatusPatch { attach_error: Some(Some(error)), ..Default::default() }
}

/// A step before ControllerPublishVolume that failed, with upstream's wording where it adds context.
pub fn volume_finalizer_failed(error: &str) -> String {
    format!("could not add PersistentVolume finalizer: {error}")
}

pub fn metadata_failed(error: &str) -> String {
    format!("could not save VolumeAttachment: {error}")
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::storage::v1::VolumeAttachmentStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::translate::patch::MetadataChange;

    fn attachment(finalizers: &[&str], node_id: Option<&str>, status: VolumeAttachmentStatus) -> VolumeAttachment {
        VolumeAttachment {
            metadata: ObjectMeta {
                name: Some("va".into()),
                finalizers: (!finalizers.is_empty()).then(|| finalizers.iter().map(|f| f.to_string()).collect()),
                annotations: node_id.map(|id| BTreeMap::from([(NODE_ID_ANNOTATION.to_string(), id.to_string())])),
                ..Default::default()
            },
            status: Some(status),
            ..Default::default()
        }
    }

    fn attached_status(attached: bool) -> VolumeAttachmentStatus {
        VolumeAttachmentStatus { attached, ..Default::default() }
    }

    #[test]
    fn an_attached_attachment_is_left_alone_unless_forced() {
        let done = attachment(&[], None, attached_status(true));
        let fresh = attachment(&[], None, attached_status(false));
        assert!(!needed(&done, false));
        assert!(needed(&done, true), "the reconciler found the driver disagrees");
        assert!(needed(&fresh, false));
        assert!(needed(&VolumeAttachment::default(), false), "no status yet");
    }

    #[test]
    fn finalizer_and_node_id_are_written_where_missing() {
        let ours = "external-attacher/d";
        let annotation = |id: &str| BTreeMap::from([(NODE_ID_ANNOTATION.to_string(), id.to_string())]);
        // (case, attachment, patch)
        let table = [
            (
                "neither",
                attachment(&[], None, attached_status(false)),
                VolumeAttachmentPatch { finalizers: Some(vec![ours.into()]), annotations: annotation("n1") },
            ),
            (
                "another finalizer stays first",
                attachment(&["other"], Some("n1"), attached_status(false)),
                VolumeAttachmentPatch {
                    finalizers: Some(vec!["other".into(), ours.into()]),
                    annotations: BTreeMap::new(),
                },
            ),
            (
                "a node ID from before",
                attachment(&[ours], Some("n0"), attached_status(false)),
                VolumeAttachmentPatch { finalizers: None, annotations: annotation("n1") },
            ),
            ("both there", attachment(&[ours], Some("n1"), attached_status(false)), VolumeAttachmentPatch::default()),
        ];
        for (case, va, want) in table {
            assert_eq!(metadata(&va, "d", "n1"), want, "{case}");
        }
    }

    #[test]
    fn volumes_get_the_finalizer_once() {
        let mut pv = PersistentVolume::default();
        let add = volume_finalizer(&pv, "d").expect("missing");
        assert_eq!(add, VolumeFinalizerPatch::Add { finalizer: "external-attacher/d".into(), existing: None });
        pv = add.apply(&pv).unwrap();
        assert_eq!(volume_finalizer(&pv, "d"), None);
    }

    #[test]
    fn marking_attached_writes_only_what_differs() {
        let error = VolumeError { message: Some("old".into()), ..Default::default() };
        let failed_before = VolumeAttachmentStatus { attach_error: Some(error), ..attached_status(false) };
        let context = BTreeMap::from([("device".to_string(), "/dev/xvdb".to_string())]);
        let patch = attached(&attachment(&[], None, failed_before), context.clone());
        assert_eq!(patch.attached, Some(true));
        assert_eq!(patch.attach_error, Some(None), "the old error goes");
        assert_eq!(
            patch.attachment_metadata,
            Some(MetadataChange::Replace { set: context.clone(), stale: Default::default() })
        );

        let same = VolumeAttachmentStatus { attachment_metadata: Some(context.clone()), ..attached_status(true) };
        assert!(attached(&attachment(&[], None, same), context).is_empty(), "forced again, same answer: no write");

        assert_eq!(attached_without_driver(&attachment(&[], None, attached_status(true))), None);
        let trivial = attached_without_driver(&attachment(&[], None, attached_status(false))).unwrap();
        assert_eq!(trivial, StatusPatch { attached: Some(true), ..Default::default() });
    }

    #[test]
    fn failures_go_to_attach_error_with_the_grpc_code() {
        let now = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        let patch = failed("rpc error: code = NotFound desc = no volume".into(), Some(5), now.clone());
        let error = patch.attach_error.clone().flatten().unwrap();
        assert_eq!(error.message.as_deref(), Some("rpc error: code = NotFound desc = no volume"));
        assert_eq!((error.error_code, error.time), (Some(5), Some(now)));
        assert_eq!(patch.attached, None, "attached stays as it was");
        assert_eq!(volume_finalizer_failed("x"), "could not add PersistentVolume finalizer: x");
        assert_eq!(metadata_failed("x"), "could not save VolumeAttachment: x");
    }
}
