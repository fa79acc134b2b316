//! When the attacher's finalizer leaves a PersistentVolume (external-attacher pkg/controller/csi_handler.go,
//! SyncNewOrUpdatedPersistentVolume): the PV is being deleted, or is an in-tree PV no longer handed to this driver,
//! and no VolumeAttachment, of any driver, names it any more.

use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::api::storage::v1::VolumeAttachment;

use crate::translate::filter::migration_rolled_back;
use crate::translate::names::finalizer;
use crate::translate::patch::VolumeFinalizerPatch;

/// The removal to write, if the finalizer must go now. `attachments` are every VolumeAttachment in the cache.
pub fn removal<'a>(
    volume: &PersistentVolume,
    driver: &str,
    mut attachments: impl Iterator<Item = &'a VolumeAttachment>,
) -> Option<VolumeFinalizerPatch> {
    if volume.metadata.deletion_timestamp.is_none() && !migration_rolled_back(volume, driver) {
        return None;
    }
    let ours = finalizer(driver);
    let index = volume.metadata.finalizers.as_ref()?.iter().position(|f| *f == ours)?;
    let name = volume.metadata.name.as_deref();
    if attachments.any(|va| va.spec.source.persistent_volume_name.as_deref() == name) {
        return None;
    }
    Some(VolumeFinalizerPatch::Remove { finalizer: ours, index })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{CSIPersistentVolumeSource, PersistentVolumeSpec};
    use k8s_openapi::api::storage::v1::{VolumeAttachmentSource, VolumeAttachmentSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    use super::*;

    fn volume(finalizers: &[&str], deleted: bool) -> PersistentVolume {
        PersistentVolume {
            metadata: ObjectMeta {
                name: Some("pv-1".into()),
                finalizers: Some(finalizers.iter().map(|f| f.to_string()).collect()),
                deletion_timestamp: deleted.then_some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)),
                ..Default::default()
            },
            spec: Some(PersistentVolumeSpec {
                csi: Some(CSIPersistentVolumeSource { driver: "d".into(), ..Default::default() }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn naming(pv: &str, driver: &str) -> VolumeAttachment {
        VolumeAttachment {
            spec: VolumeAttachmentSpec {
                attacher: driver.into(),
                source: VolumeAttachmentSource { persistent_volume_name: Some(pv.into()), ..Default::default() },
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn the_finalizer_goes_once_no_attachment_names_the_volume() {
        let ours = "external-attacher/d";
        let remove_at = |index| Some(VolumeFinalizerPatch::Remove { finalizer: ours.into(), index });
        // (case, PV, attachments, removal)
        let table = [
            ("deleted, nothing names it", volume(&["kubernetes.io/pv-protection", ours], true), vec![], remove_at(1)),
            ("deleted, another PV's attachment", volume(&[ours], true), vec![naming("pv-2", "d")], remove_at(0)),
            ("deleted, still attached", volume(&[ours], true), vec![naming("pv-1", "d")], None),
            ("named by another driver's attachment", volume(&[ours], true), vec![naming("pv-1", "other")], None),
            ("not deleted", volume(&[ours], false), vec![], None),
            ("deleted, no finalizer of ours", volume(&["other"], true), vec![], None),
        ];
        for (case, pv, attachments, want) in table {
            assert_eq!(removal(&pv, "d", attachments.iter()), want, "{case}");
        }
    }
}
