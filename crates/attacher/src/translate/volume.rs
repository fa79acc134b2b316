//! What a VolumeAttachment attaches, in the form the driver is called with: the PV it names or the inline volume it
//! carries, an in-tree PV translated to its CSI form (CSI migration), and the texts of every way that can fail, as
//! upstream words them (external-attacher pkg/controller/csi_handler.go, csiAttach, csiDetach, getCSISource).

use k8s_openapi::api::core::v1::{CSIPersistentVolumeSource, PersistentVolume, PersistentVolumeSpec};
use k8s_openapi::api::storage::v1::VolumeAttachment;

/// Where the volume of a VolumeAttachment is described.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Source<'a> {
    /// `spec.source.persistentVolumeName`.
    Volume(&'a str),
    /// `spec.source.inlineVolumeSpec`: an inline volume of a pod, migrated from an in-tree plugin.
    Inline(&'a PersistentVolumeSpec),
}

/// The volume as the driver gets it.
#[derive(Clone, Debug, PartialEq)]
pub struct CsiVolume {
    pub csi: CSIPersistentVolumeSource,
    /// The PV's (or inline volume's) spec, in its CSI form: volume mode, access modes, mount options.
    pub spec: PersistentVolumeSpec,
    /// An in-tree PV handed to this driver: its calls count as `migrated` in `csi_sidecar_operations_seconds`.
    pub migrated: bool,
}

/// Exactly one of the two sources must be set.
pub fn source(attachment: &VolumeAttachment) -> Result<Source<'_>, String> {
    let source = &attachment.spec.source;
    match (&source.persistent_volume_name, &source.inline_volume_spec) {
        (Some(_), Some(_)) => Err("both InlineCSIVolumeSource and PersistentVolumeName specified in VA source".into()),
        (Some(name), None) => Ok(Source::Volume(name)),
        (None, Some(spec)) => Ok(Source::Inline(spec)),
        (None, None) => Err("neither InlineCSIVolumeSource nor PersistentVolumeName specified in VA source".into()),
    }
}

/// A PV the cache does not hold, in client-go's lister words.
pub fn volume_not_found(name: &str) -> String {
    format!("persistentvolume {name:?} not found")
}

/// A PV being deleted is never attached.
pub fn refuse_deleted(volume: &PersistentVolume) -> Result<(), String> {
    match volume.metadata.deletion_timestamp {
        Some(_) => {
            Err(format!("PersistentVolume {:?} is marked for deletion", volume.metadata.name.as_deref().unwrap_or("")))
        }
        None => Ok(()),
    }
}

/// The PV in its CSI form: an in-tree PV is translated (whichever driver it names: `spec.attacher` already chose
/// this attacher), a CSI PV taken as it is.
pub fn of_volume(volume: &PersistentVolume) -> Result<CsiVolume, String> {
    let migrated = csi_translation::is_pv_migratable(volume);
    let spec = if migrated {
        let translated = csi_translation::translate_in_tree_pv_to_csi(volume)
            .map_err(|e| format!("failed to translate in tree pv to CSI: {e}"))?;
        translated.spec.unwrap_or_default()
    } else {
        volume.spec.clone().unwrap_or_default()
    };
    let csi = spec.csi.clone().ok_or("pv spec contained non-csi source that was not migrated")?;
    Ok(CsiVolume { csi, spec, migrated })
}

/// An inline volume: already in its CSI form (kubelet translated it before creating the VolumeAttachment).
pub fn of_inline(spec: &PersistentVolumeSpec) -> Result<CsiVolume, String> {
    let csi = spec.csi.clone().ok_or("inline volume spec contains nil CSI source")?;
    Ok(CsiVolume { csi, spec: spec.clone(), migrated: false })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::GCEPersistentDiskVolumeSource;
    use k8s_openapi::api::storage::v1::{VolumeAttachmentSource, VolumeAttachmentSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    use super::*;

    fn attachment(volume: Option<&str>, inline: Option<PersistentVolumeSpec>) -> VolumeAttachment {
        VolumeAttachment {
            spec: VolumeAttachmentSpec {
                source: VolumeAttachmentSource {
                    persistent_volume_name: volume.map(str::to_string),
                    inline_volume_spec: inline,
                },
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn csi_spec(handle: &str) -> PersistentVolumeSpec {
        PersistentVolumeSpec {
            csi: Some(CSIPersistentVolumeSource {
                driver: "d".into(),
                volume_handle: handle.into(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn exactly_one_source() {
        let spec = csi_spec("h");
        assert_eq!(source(&attachment(Some("pv"), None)), Ok(Source::Volume("pv")));
        assert_eq!(source(&attachment(None, Some(spec.clone()))), Ok(Source::Inline(&spec)));
        let both = attachment(Some("pv"), Some(spec));
        let both = source(&both);
        assert_eq!(both, Err("both InlineCSIVolumeSource and PersistentVolumeName specified in VA source".into()));
        let neither = attachment(None, None);
        let neither = source(&neither);
        assert_eq!(
            neither,
            Err("neither InlineCSIVolumeSource nor PersistentVolumeName specified in VA source".into())
        );
        assert_eq!(volume_not_found("pv-1"), r#"persistentvolume "pv-1" not found"#);
    }

    fn volume(spec: PersistentVolumeSpec, deleted: bool) -> PersistentVolume {
        PersistentVolume {
            metadata: ObjectMeta {
                name: Some("pv-1".into()),
                deletion_timestamp: deleted.then_some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)),
                ..Default::default()
            },
            spec: Some(spec),
            ..Default::default()
        }
    }

    #[test]
    fn volumes_in_their_csi_form() {
        let csi = of_volume(&volume(csi_spec("h"), false)).unwrap();
        assert_eq!((csi.csi.volume_handle.as_str(), csi.migrated), ("h", false), "a CSI PV as it is");

        let gce = PersistentVolumeSpec {
            gce_persistent_disk: Some(GCEPersistentDiskVolumeSource { pd_name: "disk".into(), ..Default::default() }),
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            ..Default::default()
        };
        let migrated = of_volume(&volume(gce, false)).unwrap();
        assert_eq!(migrated.csi.driver, "pd.csi.storage.gke.io", "an in-tree PV translated");
        assert_eq!(migrated.csi.volume_handle, "projects/UNSPECIFIED/zones/UNSPECIFIED/disks/disk");
        assert!(migrated.migrated);

        let nfs = PersistentVolumeSpec::default();
        assert_eq!(
            of_volume(&volume(nfs, false)),
            Err("pv spec contained non-csi source that was not migrated".into())
        );
        assert_eq!(
            of_inline(&PersistentVolumeSpec::default()),
            Err("inline volume spec contains nil CSI source".into())
        );
        assert!(!of_inline(&csi_spec("i")).unwrap().migrated, "an inline volume is never labelled migrated");

        assert_eq!(refuse_deleted(&volume(csi_spec("h"), false)), Ok(()));
        assert_eq!(
            refuse_deleted(&volume(csi_spec("h"), true)),
            Err(r#"PersistentVolume "pv-1" is marked for deletion"#.into())
        );
    }
}
