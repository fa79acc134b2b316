//! What the driver's capabilities make of the attacher (external-attacher cmd/csi-attacher/main.go,
//! supportsPluginControllerService and supportsControllerCapabilities).

use csi_client::capabilities::{ControllerCapabilities, ControllerCapability, PluginCapabilities, PluginService};

use crate::translate::request::PublishConfig;

/// How VolumeAttachments are served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Handling {
    /// ControllerPublishVolume and ControllerUnpublishVolume for each; `reconcile` with ListVolumes' published
    /// nodes when the driver has LIST_VOLUMES and LIST_VOLUMES_PUBLISHED_NODES.
    Publish { config: PublishConfig, reconcile: bool },
    /// The driver has no controller service, or no PUBLISH_UNPUBLISH_VOLUME: every VolumeAttachment is marked
    /// attached without a call, and deleting one needs nothing (upstream's trivial handler).
    MarkAttached,
}

/// Whether the driver has a controller service at all; without one its controller capabilities are not asked.
pub fn has_controller_service(plugin: &PluginCapabilities) -> bool {
    plugin.has(PluginService::ControllerService)
}

pub fn handling(controller: Option<&ControllerCapabilities>, default_fs_type: &str) -> Handling {
    let Some(controller) = controller.filter(|c| c.has(ControllerCapability::PublishUnpublishVolume)) else {
        return Handling::MarkAttached;
    };
    let config = PublishConfig {
        publish_readonly: controller.has(ControllerCapability::PublishReadonly),
        single_node_multi_writer: controller.has(ControllerCapability::SingleNodeMultiWriter),
        default_fs_type: default_fs_type.to_string(),
    };
    let reconcile = controller.has(ControllerCapability::ListVolumes)
        && controller.has(ControllerCapability::ListVolumesPublishedNodes);
    Handling::Publish { config, reconcile }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn controller(list: &[ControllerCapability]) -> ControllerCapabilities {
        ControllerCapabilities(list.iter().copied().collect())
    }

    #[test]
    fn capabilities_choose_the_handling() {
        use ControllerCapability::*;
        let publish = |readonly, snmw, reconcile| Handling::Publish {
            config: PublishConfig {
                publish_readonly: readonly,
                single_node_multi_writer: snmw,
                default_fs_type: "ext4".into(),
            },
            reconcile,
        };
        // (case, controller capabilities (None: no controller service), handling)
        let table = [
            ("no controller service", None, Handling::MarkAttached),
            (
                "no PUBLISH_UNPUBLISH_VOLUME",
                Some(controller(&[CreateDeleteVolume, ListVolumes])),
                Handling::MarkAttached,
            ),
            ("publish only", Some(controller(&[PublishUnpublishVolume])), publish(false, false, false)),
            (
                "read-only and SINGLE_NODE_MULTI_WRITER",
                Some(controller(&[PublishUnpublishVolume, PublishReadonly, SingleNodeMultiWriter])),
                publish(true, true, false),
            ),
            (
                "LIST_VOLUMES alone does not reconcile",
                Some(controller(&[PublishUnpublishVolume, ListVolumes])),
                publish(false, false, false),
            ),
            (
                "LIST_VOLUMES_PUBLISHED_NODES alone neither",
                Some(controller(&[PublishUnpublishVolume, ListVolumesPublishedNodes])),
                publish(false, false, false),
            ),
            (
                "both: reconcile",
                Some(controller(&[PublishUnpublishVolume, ListVolumes, ListVolumesPublishedNodes])),
                publish(false, false, true),
            ),
        ];
        for (case, capabilities, want) in table {
            assert_eq!(handling(capabilities.as_ref(), "ext4"), want, "{case}");
        }
        let plugin = PluginCapabilities { services: [PluginService::ControllerService].into(), ..Default::default() };
        assert!(has_controller_service(&plugin) && !has_controller_service(&PluginCapabilities::default()));
    }
}
