//! CSI migration (external-resizer pkg/resizer/csi_resizer.go, CanSupport and Resize): a driver that replaces an
//! in-tree plugin (`ebs.csi.aws.com` for `awsElasticBlockStore`) also expands that plugin's PVs once
//! kube-controller-manager hands their claims over, which it does by setting `volume.kubernetes.io/storage-resizer` to
//! the driver's name. The PV is translated to its CSI form only to build the request; what is written back (the
//! capacity) goes to the PV as it is, in its in-tree form. The call is counted with `migrated="true"`.

use std::borrow::Cow;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};

use super::request::RequestError;
use crate::translate::claim::{annotation, volume_name};
use crate::translate::names::ANN_STORAGE_RESIZER;

/// How the driver comes to expand a PV.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VolumeOrigin {
    /// A CSI PV of the driver.
    Csi,
    /// An in-tree PV of the plugin the driver replaces, handed over through CSI migration.
    Migrated,
}

/// Whether `driver_name` expands the claim's PV, and how; None when the PV is not the driver's.
///
/// Upstream accepts any PV once the annotation names a migration-target driver, even a CSI PV of another driver or
/// an in-tree PV of a plugin the driver does not replace. Deliberately, only an in-tree PV of the replaced plugin
/// counts here.
pub fn volume_origin(
    claim: &PersistentVolumeClaim,
    volume: &PersistentVolume,
    driver_name: &str,
) -> Option<VolumeOrigin> {
    let spec = volume.spec.as_ref()?;
    if let Some(csi) = &spec.csi {
        return (csi.driver == driver_name).then_some(VolumeOrigin::Csi);
    }
    let handed_over = annotation(claim, ANN_STORAGE_RESIZER) == Some(driver_name);
    let replaced = csi_translation::csi_driver_of_in_tree_pv(volume) == Some(driver_name);
    (handed_over && replaced).then_some(VolumeOrigin::Migrated)
}

/// The PV as ControllerExpandVolume sees it: a CSI PV as it is, a migrated one in its CSI form (volume handle, fsType
/// and access modes translated).
pub fn csi_form(volume: &PersistentVolume, origin: VolumeOrigin) -> Result<Cow<'_, PersistentVolume>, RequestError> {
    match origin {
        VolumeOrigin::Csi => Ok(Cow::Borrowed(volume)),
        VolumeOrigin::Migrated => csi_translation::translate_in_tree_pv_to_csi(volume)
            .map(Cow::Owned)
            .map_err(|error| RequestError::Translation { volume: volume_name(volume).to_string(), error }),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::{
        AWSElasticBlockStoreVolumeSource, CSIPersistentVolumeSource, GCEPersistentDiskVolumeSource, NFSVolumeSource,
        PersistentVolumeSpec,
    };

    use super::*;

    const EBS: &str = "ebs.csi.aws.com";

    fn claim(resizer: Option<&str>) -> PersistentVolumeClaim {
        let mut claim = PersistentVolumeClaim::default();
        claim.metadata.annotations = resizer.map(|r| BTreeMap::from([(ANN_STORAGE_RESIZER.to_string(), r.into())]));
        claim
    }

    fn pv(spec: PersistentVolumeSpec) -> PersistentVolume {
        let mut volume = PersistentVolume { spec: Some(spec), ..Default::default() };
        volume.metadata.name = Some("pv-1".into());
        volume
    }

    fn ebs(volume_id: &str) -> PersistentVolume {
        pv(PersistentVolumeSpec {
            aws_elastic_block_store: Some(AWSElasticBlockStoreVolumeSource {
                volume_id: volume_id.into(),
                fs_type: Some("ext4".into()),
                ..Default::default()
            }),
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            ..Default::default()
        })
    }

    fn csi(driver: &str) -> PersistentVolume {
        pv(PersistentVolumeSpec {
            csi: Some(CSIPersistentVolumeSource {
                driver: driver.into(),
                volume_handle: "vol-1".into(),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    #[test]
    fn which_volumes_the_driver_expands() {
        let gce = pv(PersistentVolumeSpec {
            gce_persistent_disk: Some(GCEPersistentDiskVolumeSource { pd_name: "disk".into(), ..Default::default() }),
            ..Default::default()
        });
        let nfs = pv(PersistentVolumeSpec {
            nfs: Some(NFSVolumeSource { server: "nfs".into(), path: "/x".into(), ..Default::default() }),
            ..Default::default()
        });
        // (rule, claim, volume, driver, origin)
        let table = [
            ("a CSI PV of the driver", claim(None), csi(EBS), EBS, Some(VolumeOrigin::Csi)),
            ("a CSI PV of another driver", claim(None), csi("other.csi"), EBS, None),
            (
                "deliberate difference: another driver's CSI PV, even handed over",
                claim(Some(EBS)),
                csi("other.csi"),
                EBS,
                None,
            ),
            ("an in-tree PV handed over", claim(Some(EBS)), ebs("vol-1"), EBS, Some(VolumeOrigin::Migrated)),
            ("an in-tree PV not handed over", claim(None), ebs("vol-1"), EBS, None),
            (
                "an in-tree PV handed over to another driver",
                claim(Some("pd.csi.storage.gke.io")),
                ebs("vol-1"),
                EBS,
                None,
            ),
            ("deliberate difference: another plugin's in-tree PV", claim(Some(EBS)), gce, EBS, None),
            ("deliberate difference: a plugin nobody replaces", claim(Some(EBS)), nfs, EBS, None),
            (
                "a driver that replaces no plugin",
                claim(Some("hostpath.csi.k8s.io")),
                ebs("vol-1"),
                "hostpath.csi.k8s.io",
                None,
            ),
            ("a PV without a spec", claim(Some(EBS)), PersistentVolume::default(), EBS, None),
        ];
        for (rule, claim, volume, driver, want) in table {
            assert_eq!(volume_origin(&claim, &volume, driver), want, "{rule}");
        }
    }

    #[test]
    fn the_request_sees_the_csi_form() {
        let native = csi(EBS);
        assert!(matches!(csi_form(&native, VolumeOrigin::Csi), Ok(Cow::Borrowed(v)) if *v == native));

        let in_tree = ebs("aws://us-east-1a/vol-0123");
        let translated = csi_form(&in_tree, VolumeOrigin::Migrated).unwrap();
        let source = translated.spec.as_ref().unwrap().csi.as_ref().unwrap();
        assert_eq!(source.driver, EBS);
        assert_eq!(source.volume_handle, "vol-0123", "the handle is the translated volume ID");
        assert_eq!(source.fs_type.as_deref(), Some("ext4"));
        assert_eq!(translated.spec.as_ref().unwrap().access_modes, in_tree.spec.as_ref().unwrap().access_modes);

        let broken = ebs("aws://us-east-1a/");
        let error = csi_form(&broken, VolumeOrigin::Migrated).unwrap_err();
        assert!(matches!(&error, RequestError::Translation { volume, .. } if volume == "pv-1"), "{error:?}");
        assert!(error.to_string().starts_with("failed to translate persistent volume pv-1: "), "{error}");
    }
}
