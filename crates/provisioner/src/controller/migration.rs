//! CSI migration (item 64): a driver that replaces an in-tree plugin (`ebs.csi.aws.com` for `kubernetes.io/aws-ebs`,
//! ...) also serves that plugin's classes and volumes. Classes are translated to their CSI form before anything
//! reads them, the PVs it creates are written back in their in-tree form, in-tree PVs are translated to CSI to be
//! deleted, and every such CSI call carries `migrated="true"` in the metrics. The translation rules are the
//! `csi-translation` crate's.

use std::borrow::Cow;

use csi_client::CsiClient;
use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::api::storage::v1::StorageClass;

use super::Shared;
use crate::translate::refusal::Refusal;

impl Shared {
    /// Whether `class` belongs to the in-tree plugin this driver replaces.
    pub(super) fn is_migrated_class(&self, class: &StorageClass) -> bool {
        self.provisioner.migrated_in_tree_name.as_deref() == Some(class.provisioner.as_str())
    }

    /// The class as the driver understands it: an in-tree class translated, any other as it is. A class that
    /// cannot be translated is a definite failure, worded as upstream words it.
    pub(super) fn csi_class<'a>(&self, class: &'a StorageClass) -> Result<Cow<'a, StorageClass>, Refusal> {
        if !self.is_migrated_class(class) {
            return Ok(Cow::Borrowed(class));
        }
        csi_translation::translate_in_tree_storage_class_to_csi(&class.provisioner, class)
            .map(Cow::Owned)
            .map_err(|err| Refusal::finished(format!("failed to translate storage class: {err}")))
    }

    /// The CSI client for calls about a migrated (`true`) or CSI volume, for the metrics' `migrated` label.
    pub(super) fn csi_for(&self, migrated: bool) -> Cow<'_, CsiClient> {
        if migrated { Cow::Owned(self.csi.for_migrated_volume()) } else { Cow::Borrowed(&self.csi) }
    }

    /// A PV as the deletion path reads it: an in-tree PV of the replaced plugin in its CSI form (with whether it
    /// was translated), any other as it is.
    pub(super) fn csi_volume<'a>(
        &self,
        volume: &'a PersistentVolume,
    ) -> Result<(Cow<'a, PersistentVolume>, bool), String> {
        if self.provisioner.migrated_in_tree_name.is_none() || !csi_translation::is_pv_migratable(volume) {
            return Ok((Cow::Borrowed(volume), false));
        }
        let translated = csi_translation::translate_in_tree_pv_to_csi(volume).map_err(|err| err.to_string())?;
        Ok((Cow::Owned(translated), true))
    }

    /// The PV this driver's volume gets in the API: in-tree form for a migrated class (upstream deletes the volume
    /// when that translation fails).
    pub(super) fn api_volume(&self, pv: PersistentVolume, migrated: bool) -> Result<PersistentVolume, String> {
        if !migrated {
            return Ok(pv);
        }
        csi_translation::translate_csi_pv_to_in_tree(&pv)
            .map_err(|err| format!("failed to translate CSI PV to in-tree: {err}"))
    }
}
