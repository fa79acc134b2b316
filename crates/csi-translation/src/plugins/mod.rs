//! One module per in-tree plugin, and the dispatch between them.

mod aws_ebs;
mod azure_disk;
mod azure_file;
mod gce_pd;
mod openstack_cinder;
mod portworx;
mod vsphere_volume;

use k8s_openapi::api::core::v1::{CSIPersistentVolumeSource, PersistentVolume};
use k8s_openapi::api::storage::v1::StorageClass;

use crate::TranslationError;

/// The in-tree plugins this crate translates for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plugin {
    AwsEbs,
    AzureDisk,
    AzureFile,
    GcePd,
    OpenStackCinder,
    Portworx,
    VsphereVolume,
}

const ALL: [Plugin; 7] = [
    Plugin::AwsEbs,
    Plugin::AzureDisk,
    Plugin::AzureFile,
    Plugin::GcePd,
    Plugin::OpenStackCinder,
    Plugin::Portworx,
    Plugin::VsphereVolume,
];

impl Plugin {
    pub fn by_driver(driver: &str) -> Option<Plugin> {
        ALL.into_iter().find(|p| p.driver_name() == driver)
    }

    pub fn by_in_tree_name(name: &str) -> Option<Plugin> {
        ALL.into_iter().find(|p| p.in_tree_name() == name)
    }

    /// The plugin whose source the PV has.
    pub fn of_in_tree_pv(pv: &PersistentVolume) -> Option<Plugin> {
        let spec = pv.spec.as_ref()?;
        if spec.aws_elastic_block_store.is_some() {
            Some(Plugin::AwsEbs)
        } else if spec.azure_disk.is_some() {
            Some(Plugin::AzureDisk)
        } else if spec.azure_file.is_some() {
            Some(Plugin::AzureFile)
        } else if spec.gce_persistent_disk.is_some() {
            Some(Plugin::GcePd)
        } else if spec.cinder.is_some() {
            Some(Plugin::OpenStackCinder)
        } else if spec.portworx_volume.is_some() {
            Some(Plugin::Portworx)
        } else if spec.vsphere_volume.is_some() {
            Some(Plugin::VsphereVolume)
        } else {
            None
        }
    }

    pub fn driver_name(self) -> &'static str {
        match self {
            Plugin::AwsEbs => aws_ebs::DRIVER,
            Plugin::AzureDisk => azure_disk::DRIVER,
            Plugin::AzureFile => azure_file::DRIVER,
            Plugin::GcePd => gce_pd::DRIVER,
            Plugin::OpenStackCinder => openstack_cinder::DRIVER,
            Plugin::Portworx => portworx::DRIVER,
            Plugin::VsphereVolume => vsphere_volume::DRIVER,
        }
    }

    pub fn in_tree_name(self) -> &'static str {
        match self {
            Plugin::AwsEbs => aws_ebs::IN_TREE,
            Plugin::AzureDisk => azure_disk::IN_TREE,
            Plugin::AzureFile => azure_file::IN_TREE,
            Plugin::GcePd => gce_pd::IN_TREE,
            Plugin::OpenStackCinder => openstack_cinder::IN_TREE,
            Plugin::Portworx => portworx::IN_TREE,
            Plugin::VsphereVolume => vsphere_volume::IN_TREE,
        }
    }

    pub fn storage_class_to_csi(self, class: StorageClass) -> Result<StorageClass, TranslationError> {
        match self {
            Plugin::AwsEbs => aws_ebs::storage_class_to_csi(class),
            Plugin::AzureDisk => azure_disk::storage_class_to_csi(class),
            Plugin::AzureFile => azure_file::storage_class_to_csi(class),
            Plugin::GcePd => gce_pd::storage_class_to_csi(class),
            Plugin::OpenStackCinder => openstack_cinder::storage_class_to_csi(class),
            Plugin::Portworx => portworx::storage_class_to_csi(class),
            Plugin::VsphereVolume => vsphere_volume::storage_class_to_csi(class),
        }
    }

    pub fn pv_to_csi(self, pv: PersistentVolume) -> Result<PersistentVolume, TranslationError> {
        match self {
            Plugin::AwsEbs => aws_ebs::pv_to_csi(pv),
            Plugin::AzureDisk => azure_disk::pv_to_csi(pv),
            Plugin::AzureFile => azure_file::pv_to_csi(pv),
            Plugin::GcePd => gce_pd::pv_to_csi(pv),
            Plugin::OpenStackCinder => openstack_cinder::pv_to_csi(pv),
            Plugin::Portworx => portworx::pv_to_csi(pv),
            Plugin::VsphereVolume => vsphere_volume::pv_to_csi(pv),
        }
    }

    /// A volume handle completed from the node ID where the in-tree form left parts out (only GCE PD does).
    pub fn repair_volume_handle(self, handle: &str, node_id: &str) -> Result<String, TranslationError> {
        match self {
            Plugin::GcePd => gce_pd::repair_volume_handle(handle, node_id),
            _ => Ok(handle.to_string()),
        }
    }

    pub fn pv_to_in_tree(self, pv: PersistentVolume) -> Result<PersistentVolume, TranslationError> {
        match self {
            Plugin::AwsEbs => aws_ebs::pv_to_in_tree(pv),
            Plugin::AzureDisk => azure_disk::pv_to_in_tree(pv),
            Plugin::AzureFile => azure_file::pv_to_in_tree(pv),
            Plugin::GcePd => gce_pd::pv_to_in_tree(pv),
            Plugin::OpenStackCinder => openstack_cinder::pv_to_in_tree(pv),
            Plugin::Portworx => portworx::pv_to_in_tree(pv),
            Plugin::VsphereVolume => vsphere_volume::pv_to_in_tree(pv),
        }
    }
}

/// Parameter keys every plugin treats alike (compared case-insensitively, as upstream).
pub(crate) const FS_TYPE_KEY: &str = "fstype";
pub(crate) const CSI_FS_TYPE_KEY: &str = "csi.storage.k8s.io/fstype";
pub(crate) const ZONE_KEY: &str = "zone";
pub(crate) const ZONES_KEY: &str = "zones";

/// Takes the CSI source off a PV about to get its in-tree source.
pub(crate) fn take_csi_source(pv: &mut PersistentVolume) -> Result<CSIPersistentVolumeSource, TranslationError> {
    let name = pv.metadata.name.clone().unwrap_or_default();
    pv.spec.as_mut().and_then(|s| s.csi.take()).ok_or(TranslationError::NotCsi(name))
}

/// The error for a PV without the plugin's in-tree source.
pub(crate) fn not_migratable(pv: &PersistentVolume) -> TranslationError {
    TranslationError::NotMigratable(pv.metadata.name.clone().unwrap_or_default())
}
