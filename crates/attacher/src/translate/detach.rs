//! One detach of a deleted VolumeAttachment, in the order the worker takes the steps (external-attacher
//! pkg/controller/csi_handler.go, syncDetach and csiDetach; util.go, markAsDetached):
//!
//! 1. [`needed`]: only while the VolumeAttachment carries the attacher's finalizer (or the reconciler asks).
//! 2. The volume in its CSI form, from the PV in the cache or the inline spec ([`crate::translate::volume`]).
//! 3. The publish Secret, read live.
//! 4. The node ID from the CSINode, or the annotation written at attach when the CSINode lacks the driver
//!    ([`crate::translate::node::node_id`]).
//! 5. ControllerUnpublishVolume.
//! 6. [`finalizer_removal`], then [`detached`] through `status`. The finalizer goes first: a deleted
//!    VolumeAttachment without it counts as detached whatever its status says, while one that still has it with
//!    `attached: false` may be a timed-out attach and is detached again.
//!
//! Any failure of steps 2 to 6 goes to `status.detachError` ([`failed`]).

use k8s_openapi::api::storage::v1::{VolumeAttachment, VolumeError};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::translate::names::finalizer;
use crate::translate::patch::{MetadataChange, StatusPatch, VolumeAttachmentPatch};

pub fn has_finalizer(attachment: &VolumeAttachment, driver: &str) -> bool {
    let ours = finalizer(driver);
    attachment.metadata.finalizers.as_ref().is_some_and(|list| list.contains(&ours))
}

/// Whether to call the driver: the finalizer says the volume may still be attached, or `forced` by the reconciler.
pub fn needed(attachment: &VolumeAttachment, driver: &str, forced: bool) -> bool {
    forced || has_finalizer(attachment, driver)
}

/// The attacher's finalizer removed, the others kept in their order.
pub fn finalizer_removal(attachment: &VolumeAttachment, driver: &str) -> Option<VolumeAttachmentPatch> {
    let ours = finalizer(driver);
    let list = attachment.metadata.finalizers.as_ref().filter(|list| list.contains(&ours))?;
    let kept = list.iter().filter(|f| **f != ours).cloned().collect();
    Some(VolumeAttachmentPatch { finalizers: Some(kept), ..Default::default() })
}

/// Detached: not attached, no `detachError`, no `attachmentMetadata`; `None` when the status says so already.
pub fn detached(attachment: &VolumeAttachment) -> Option<StatusPatch> {
    let status = attachment.status.clone().unwrap_or_default();
    let patch = StatusPatch {
        attached: status.attached.then_some(false),
        attachment_metadata: status.attachment_metadata.is_some().then_some(MetadataChange::Clear),
        attach_error: None,
        detach_error: status.detach_error.is_some().then_some(None),
    };
    (!patch.is_empty()).then_some(patch)
}

/// A failed detach in `status.detachError` (no error code: upstream writes one for attach errors only).
pub fn failed(message: String, now: Time) -> StatusPatch {
    let error = VolumeError { message: Some(message), time: Some(now), error_code: None };
    StatusPatch { detach_error: Some(Some(error)), ..Default::default() }
}

pub fn mark_failed(error: &str) -> String {
    format!("could not mark as detached: {error}")
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::storage::v1::VolumeAttachmentStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn attachment(finalizers: &[&str], status: VolumeAttachmentStatus) -> VolumeAttachment {
        VolumeAttachment {
            metadata: ObjectMeta {
                finalizers: (!finalizers.is_empty()).then(|| finalizers.iter().map(|f| f.to_string()).collect()),
                ..Default::default()
            },
            status: Some(status),
            ..Default::default()
        }
    }

    #[test]
    fn only_an_attachment_with_our_finalizer_is_detached() {
        let ours = "external-attacher/d";
        let status = VolumeAttachmentStatus { attached: true, ..Default::default() };
        // (case, finalizers, forced, detach)
        let table = [
            ("our finalizer", &[ours][..], false, true),
            ("another's finalizer only", &["other"][..], false, false),
            ("none: already detached", &[][..], false, false),
            ("none, but the reconciler asks", &[][..], true, true),
        ];
        for (case, finalizers, forced, want) in table {
            assert_eq!(needed(&attachment(finalizers, status.clone()), "d", forced), want, "{case}");
        }
    }

    #[test]
    fn the_finalizer_goes_and_the_status_says_detached() {
        let ours = "external-attacher/d";
        let status = VolumeAttachmentStatus {
            attached: true,
            attachment_metadata: Some(BTreeMap::from([("a".to_string(), "1".to_string())])),
            detach_error: Some(VolumeError { message: Some("before".into()), ..Default::default() }),
            ..Default::default()
        };
        let va = attachment(&["other", ours, "last"], status);
        let removal = finalizer_removal(&va, "d").unwrap();
        assert_eq!(removal.finalizers, Some(vec!["other".into(), "last".into()]));
        assert_eq!(finalizer_removal(&removal.apply(&va), "d"), None, "removed once");

        let patch = detached(&va).unwrap();
        let stored = patch.apply(&va).status.unwrap();
        assert!(!stored.attached);
        assert_eq!((stored.attachment_metadata, stored.detach_error), (None, None));
        assert_eq!(detached(&patch.apply(&va)), None, "nothing left to write");
    }

    #[test]
    fn failures_go_to_detach_error_without_a_code() {
        let now = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        let error = failed("rpc error: code = Internal desc = stuck".into(), now).detach_error.flatten().unwrap();
        assert_eq!(error.message.as_deref(), Some("rpc error: code = Internal desc = stuck"));
        assert_eq!(error.error_code, None);
        assert_eq!(mark_failed("x"), "could not mark as detached: x");
    }
}
