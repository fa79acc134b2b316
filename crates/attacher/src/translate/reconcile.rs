//! Reconciliation with the driver (drivers with LIST_VOLUMES and LIST_VOLUMES_PUBLISHED_NODES): every
//! `--reconcile-sync`, ListVolumes says on which nodes each volume is published; a VolumeAttachment of this driver
//! whose `status.attached` disagrees is synced again, forced past "already attached" / "already detached"
//! (external-attacher pkg/controller/csi_handler.go, ReconcileVA; pkg/attacher/lister.go).

use std::collections::HashMap;

use csi_client::proto::list_volumes_response::Entry;
use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::api::storage::v1::{CSINode, VolumeAttachment};

use crate::translate::node::node_id;
use crate::translate::volume::{self, Source};

/// Volume ID → the node IDs it is published on; entries without a volume or a status are left out.
pub fn published_nodes(entries: &[Entry]) -> HashMap<String, Vec<String>> {
    entries
        .iter()
        .filter_map(|entry| {
            let (volume, status) = (entry.volume.as_ref()?, entry.status.as_ref()?);
            Some((volume.volume_id.clone(), status.published_node_ids.clone()))
        })
        .collect()
}

/// What the reconciler knows of one VolumeAttachment of this driver.
pub struct Facts<'a> {
    pub attachment: &'a VolumeAttachment,
    pub csi_node: Option<&'a CSINode>,
    /// The PV it names, if the cache has it.
    pub volume: Option<&'a PersistentVolume>,
}

/// Whether the driver's view disagrees with `status.attached`; an error when the VolumeAttachment cannot be judged
/// (it is skipped, and logged).
pub fn disagrees(facts: &Facts, driver: &str, published: &HashMap<String, Vec<String>>) -> Result<bool, String> {
    let attachment = facts.attachment;
    let node = node_id(facts.csi_node, &attachment.spec.node_name, driver, Some(attachment))?;
    let (csi_volume, migratable) = match volume::source(attachment)? {
        Source::Volume(name) => {
            let pv = facts.volume.ok_or_else(|| volume::volume_not_found(name))?;
            (volume::of_volume(pv)?, csi_translation::is_pv_migratable(pv))
        }
        // An inline volume counts as migrated here, as upstream's isMigratable has it: for a driver that replaces
        // no in-tree plugin the handle cannot be repaired, and the VolumeAttachment is skipped.
        Source::Inline(spec) => (volume::of_inline(spec)?, true),
    };
    let mut handle = csi_volume.csi.volume_handle.clone();
    if migratable {
        handle = csi_translation::repair_volume_handle(&csi_volume.csi.driver, &handle, &node).map_err(|e| {
            format!("failed to repair volume handle {handle} for driver {}: {e}", csi_volume.csi.driver)
        })?;
    }
    let found = published.get(&handle).is_some_and(|nodes| nodes.contains(&node));
    let attached = attachment.status.as_ref().is_some_and(|s| s.attached);
    Ok(attached != found)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use csi_client::proto::list_volumes_response::VolumeStatus;
    use k8s_openapi::api::core::v1::{CSIPersistentVolumeSource, GCEPersistentDiskVolumeSource, PersistentVolumeSpec};
    use k8s_openapi::api::storage::v1::{
        CSINodeDriver, CSINodeSpec, VolumeAttachmentSource, VolumeAttachmentSpec, VolumeAttachmentStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::translate::names::NODE_ID_ANNOTATION;

    fn entry(volume: Option<&str>, nodes: Option<&[&str]>) -> Entry {
        Entry {
            volume: volume.map(|id| csi_client::proto::Volume { volume_id: id.into(), ..Default::default() }),
            status: nodes.map(|n| VolumeStatus {
                published_node_ids: n.iter().map(|s| s.to_string()).collect(),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn published_nodes_by_volume() {
        let map = published_nodes(&[
            entry(Some("v1"), Some(&["n1", "n2"])),
            entry(Some("v2"), None),
            entry(None, Some(&["n1"])),
            entry(Some("v3"), Some(&[])),
        ]);
        let want =
            HashMap::from([("v1".to_string(), vec!["n1".to_string(), "n2".to_string()]), ("v3".to_string(), vec![])]);
        assert_eq!(map, want);
    }

    fn attachment(attached: bool, volume: Option<&str>, inline: Option<PersistentVolumeSpec>) -> VolumeAttachment {
        VolumeAttachment {
            metadata: ObjectMeta {
                name: Some("va".into()),
                annotations: Some(BTreeMap::from([(NODE_ID_ANNOTATION.to_string(), "annotated".to_string())])),
                ..Default::default()
            },
            spec: VolumeAttachmentSpec {
                attacher: "d".into(),
                node_name: "node-1".into(),
                source: VolumeAttachmentSource {
                    persistent_volume_name: volume.map(str::to_string),
                    inline_volume_spec: inline,
                },
            },
            status: Some(VolumeAttachmentStatus { attached, ..Default::default() }),
        }
    }

    fn csi_spec(driver: &str, handle: &str) -> PersistentVolumeSpec {
        PersistentVolumeSpec {
            csi: Some(CSIPersistentVolumeSource {
                driver: driver.into(),
                volume_handle: handle.into(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn pv(spec: PersistentVolumeSpec) -> PersistentVolume {
        PersistentVolume {
            metadata: ObjectMeta { name: Some("pv".into()), ..Default::default() },
            spec: Some(spec),
            ..Default::default()
        }
    }

    fn csi_node(driver: &str, id: &str) -> CSINode {
        CSINode {
            metadata: ObjectMeta { name: Some("node-1".into()), ..Default::default() },
            spec: CSINodeSpec {
                drivers: vec![CSINodeDriver { name: driver.into(), node_id: id.into(), ..Default::default() }],
            },
        }
    }

    #[test]
    fn attachments_the_driver_disagrees_with_are_synced_again() {
        let published: HashMap<String, Vec<String>> = HashMap::from([
            ("h1".to_string(), vec!["id-1".to_string()]),
            ("projects/p/zones/z/disks/disk".to_string(), vec!["projects/p/zones/z/instances/i".to_string()]),
        ]);
        let csi_pv = pv(csi_spec("d", "h1"));
        let other_pv = pv(csi_spec("d", "h2"));
        let gce = pv(PersistentVolumeSpec {
            gce_persistent_disk: Some(GCEPersistentDiskVolumeSource { pd_name: "disk".into(), ..Default::default() }),
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            ..Default::default()
        });
        let node = csi_node("d", "id-1");
        let gce_node = csi_node("pd.csi.storage.gke.io", "projects/p/zones/z/instances/i");
        let attached_pv = attachment(true, Some("pv"), None);
        let detached_pv = attachment(false, Some("pv"), None);
        let inline = attachment(true, None, Some(csi_spec("d", "h1")));
        let facts = |attachment, csi_node, volume| Facts { attachment, csi_node, volume };
        // (case, facts, driver, verdict)
        let table: [(&str, Facts, &str, Result<bool, &str>); 8] = [
            ("attached and published", facts(&attached_pv, Some(&node), Some(&csi_pv)), "d", Ok(false)),
            ("attached, not published", facts(&attached_pv, Some(&node), Some(&other_pv)), "d", Ok(true)),
            ("detached, but published", facts(&detached_pv, Some(&node), Some(&csi_pv)), "d", Ok(true)),
            ("detached, not published", facts(&detached_pv, Some(&node), Some(&other_pv)), "d", Ok(false)),
            ("the node ID from the annotation", facts(&attached_pv, None, Some(&csi_pv)), "d", Ok(true)),
            (
                "a migrated PV's handle repaired from the node ID",
                facts(&attached_pv, Some(&gce_node), Some(&gce)),
                "pd.csi.storage.gke.io",
                Ok(false),
            ),
            (
                "an inline volume of a driver without an in-tree plugin",
                facts(&inline, Some(&node), None),
                "d",
                Err(
                    "failed to repair volume handle h1 for driver d: could not find in-tree plugin translation logic for d",
                ),
            ),
            (
                "the PV not in the cache",
                facts(&attached_pv, Some(&node), None),
                "d",
                Err(r#"persistentvolume "pv" not found"#),
            ),
        ];
        for (case, facts, driver, want) in table {
            assert_eq!(disagrees(&facts, driver, &published), want.map_err(str::to_string), "{case}");
        }
    }
}
