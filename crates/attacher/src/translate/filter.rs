//! Which change queues which key, and in which queue (external-attacher pkg/controller/controller.go).

use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::api::storage::v1::{VolumeAttachment, VolumeAttachmentStatus};

use crate::translate::names::{MIGRATED_TO_ANNOTATION, finalizer};

/// The two queues of VolumeAttachments: a burst of detaches never waits in front of an attach.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    Attach,
    Detach,
}

/// A VolumeAttachment being deleted is detached; any other is attached.
pub fn direction(attachment: &VolumeAttachment) -> Direction {
    match attachment.metadata.deletion_timestamp {
        Some(_) => Direction::Detach,
        None => Direction::Attach,
    }
}

/// Whether this attacher serves the VolumeAttachment: `spec.attacher` names its driver.
pub fn for_driver(attachment: &VolumeAttachment, driver: &str) -> bool {
    attachment.spec.attacher == driver
}

/// Whether an update needs a sync: anything but a change of only `status.attachError` / `status.detachError`
/// (the attacher's own error writes: syncing on them would call the driver again at once, past the backoff).
/// The same resourceVersion is a resync, which always syncs (controller.go, shouldEnqueueVAChange).
pub fn update_needs_sync(old: &VolumeAttachment, new: &VolumeAttachment) -> bool {
    if old.metadata.resource_version == new.metadata.resource_version {
        return true;
    }
    let errors = |va: &VolumeAttachment| {
        va.status.as_ref().map(|s| (s.attach_error.clone(), s.detach_error.clone())).unwrap_or_default()
    };
    let (old_errors, new_errors) = (errors(old), errors(new));
    if old_errors == (None, None) && new_errors == (None, None) {
        return true;
    }
    let mut sanitized = new.clone();
    sanitized.metadata.resource_version = old.metadata.resource_version.clone();
    sanitized.metadata.managed_fields = old.metadata.managed_fields.clone();
    let status = sanitized.status.get_or_insert_with(VolumeAttachmentStatus::default);
    (status.attach_error, status.detach_error) = old_errors;
    let unchanged_status = VolumeAttachmentStatus::default();
    let status_of = |va: &VolumeAttachment| va.status.clone().unwrap_or_else(|| unchanged_status.clone());
    !(sanitized.metadata == old.metadata && sanitized.spec == old.spec && status_of(&sanitized) == status_of(old))
}

/// Whether a PV event queues the PV: it carries this attacher's finalizer and either is being deleted, or is an
/// in-tree PV no longer handed to this driver (CSI migration rolled back: the finalizer must go so that
/// kube-controller-manager can act on it) (controller.go, processFinalizers).
pub fn volume_needs_sync(volume: &PersistentVolume, driver: &str) -> bool {
    let ours = finalizer(driver);
    if !volume.metadata.finalizers.as_ref().is_some_and(|list| list.contains(&ours)) {
        return false;
    }
    volume.metadata.deletion_timestamp.is_some() || migration_rolled_back(volume, driver)
}

/// An in-tree PV whose `pv.kubernetes.io/migrated-to` does not name this driver.
pub fn migration_rolled_back(volume: &PersistentVolume, driver: &str) -> bool {
    let migrated_to = volume.metadata.annotations.as_ref().and_then(|a| a.get(MIGRATED_TO_ANNOTATION));
    csi_translation::is_pv_migratable(volume) && migrated_to.is_none_or(|to| to != driver)
}

/// The PV whose finalizer may go once a VolumeAttachment is deleted.
pub fn volume_of_deleted(attachment: &VolumeAttachment) -> Option<&str> {
    attachment.spec.source.persistent_volume_name.as_deref()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::{
        AWSElasticBlockStoreVolumeSource, CSIPersistentVolumeSource, PersistentVolumeSpec,
    };
    use k8s_openapi::api::storage::v1::{VolumeAttachmentSpec, VolumeError};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    use super::*;

    fn attachment(
        version: &str,
        attached: bool,
        attach_error: Option<&str>,
        detach_error: Option<&str>,
    ) -> VolumeAttachment {
        let error = |m: Option<&str>| m.map(|m| VolumeError { message: Some(m.into()), ..Default::default() });
        VolumeAttachment {
            metadata: ObjectMeta {
                name: Some("va".into()),
                resource_version: Some(version.into()),
                ..Default::default()
            },
            spec: VolumeAttachmentSpec { attacher: "d".into(), node_name: "n".into(), ..Default::default() },
            status: Some(VolumeAttachmentStatus {
                attached,
                attach_error: error(attach_error),
                detach_error: error(detach_error),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn error_writes_alone_do_not_sync_again() {
        // (case, old, new, sync)
        let table = [
            (
                "a resync (same version)",
                attachment("1", false, Some("e"), None),
                attachment("1", false, Some("e"), None),
                true,
            ),
            ("no errors on either side", attachment("1", false, None, None), attachment("2", true, None, None), true),
            (
                "only attachError written",
                attachment("1", false, None, None),
                attachment("2", false, Some("e"), None),
                false,
            ),
            (
                "only attachError changed",
                attachment("1", false, Some("a"), None),
                attachment("2", false, Some("b"), None),
                false,
            ),
            (
                "only detachError written",
                attachment("1", true, None, None),
                attachment("2", true, None, Some("e")),
                false,
            ),
            (
                "attachError and attached",
                attachment("1", false, Some("e"), None),
                attachment("2", true, None, None),
                true,
            ),
            (
                "an error and a spec change",
                attachment("1", false, None, None),
                {
                    let mut va = attachment("2", false, Some("e"), None);
                    va.spec.node_name = "other".into();
                    va
                },
                true,
            ),
            (
                "an error and a deletion",
                attachment("1", true, None, None),
                {
                    let mut va = attachment("2", true, None, Some("e"));
                    va.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
                    va
                },
                true,
            ),
        ];
        for (case, old, new, want) in table {
            assert_eq!(update_needs_sync(&old, &new), want, "{case}");
        }
    }

    #[test]
    fn deleted_attachments_detach() {
        let mut va = attachment("1", true, None, None);
        assert_eq!(direction(&va), Direction::Attach);
        va.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        assert_eq!(direction(&va), Direction::Detach);
        assert!(for_driver(&va, "d") && !for_driver(&va, "other"));
        assert_eq!(volume_of_deleted(&va), None);
    }

    fn volume(finalizers: &[&str], deleted: bool, in_tree: bool, migrated_to: Option<&str>) -> PersistentVolume {
        PersistentVolume {
            metadata: ObjectMeta {
                name: Some("pv".into()),
                finalizers: Some(finalizers.iter().map(|f| f.to_string()).collect()),
                deletion_timestamp: deleted.then_some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)),
                annotations: migrated_to
                    .map(|to| BTreeMap::from([(MIGRATED_TO_ANNOTATION.to_string(), to.to_string())])),
                ..Default::default()
            },
            spec: Some(PersistentVolumeSpec {
                aws_elastic_block_store: in_tree
                    .then(|| AWSElasticBlockStoreVolumeSource { volume_id: "vol-1".into(), ..Default::default() }),
                csi: (!in_tree).then(|| CSIPersistentVolumeSource { driver: "d".into(), ..Default::default() }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn volumes_are_queued_when_the_finalizer_may_have_to_go() {
        let ours = "external-attacher/d";
        // (case, PV, queued)
        let table = [
            ("no finalizer of ours", volume(&["other"], true, false, None), false),
            ("ours, not deleted", volume(&[ours], false, false, None), false),
            ("ours, being deleted", volume(&[ours], true, false, None), true),
            ("in-tree, migrated to us", volume(&[ours], false, true, Some("d")), false),
            ("in-tree, migrated elsewhere", volume(&[ours], false, true, Some("other")), true),
            ("in-tree, migration rolled back", volume(&[ours], false, true, None), true),
        ];
        for (case, pv, want) in table {
            assert_eq!(volume_needs_sync(&pv, "d"), want, "{case}");
        }
    }
}
