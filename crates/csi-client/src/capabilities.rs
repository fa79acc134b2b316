//! Capabilities as typed sets, so a sidecar asks `controller.has(ExpandVolume)`
//! instead of walking oneofs. Unknown or empty entries are skipped, as upstream does.

use std::collections::BTreeSet;

use crate::proto::{
    ControllerServiceCapability, GroupControllerServiceCapability, NodeServiceCapability, PluginCapability,
    controller_service_capability, group_controller_service_capability, node_service_capability, plugin_capability,
};

pub use crate::proto::controller_service_capability::rpc::Type as ControllerCapability;
pub use crate::proto::group_controller_service_capability::rpc::Type as GroupControllerCapability;
pub use crate::proto::node_service_capability::rpc::Type as NodeCapability;
pub use crate::proto::plugin_capability::service::Type as PluginService;
pub use crate::proto::plugin_capability::volume_expansion::Type as VolumeExpansion;

/// What GetPluginCapabilities answered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PluginCapabilities {
    pub services: BTreeSet<PluginService>,
    pub volume_expansion: BTreeSet<VolumeExpansion>,
}

impl PluginCapabilities {
    pub fn from_response(capabilities: &[PluginCapability]) -> Self {
        let mut out = PluginCapabilities::default();
        for capability in capabilities {
            match &capability.r#type {
                Some(plugin_capability::Type::Service(service)) => {
                    if let Ok(t) = PluginService::try_from(service.r#type)
                        && t != PluginService::Unknown
                    {
                        out.services.insert(t);
                    }
                }
                Some(plugin_capability::Type::VolumeExpansion(expansion)) => {
                    if let Ok(t) = VolumeExpansion::try_from(expansion.r#type)
                        && t != VolumeExpansion::Unknown
                    {
                        out.volume_expansion.insert(t);
                    }
                }
                None => {}
            }
        }
        out
    }

    pub fn has(&self, service: PluginService) -> bool {
        self.services.contains(&service)
    }
}

/// What ControllerGetCapabilities answered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ControllerCapabilities(pub BTreeSet<ControllerCapability>);

impl ControllerCapabilities {
    pub fn from_response(capabilities: &[ControllerServiceCapability]) -> Self {
        ControllerCapabilities(known(
            capabilities
                .iter()
                .map(|c| c.r#type.as_ref().map(|controller_service_capability::Type::Rpc(rpc)| rpc.r#type)),
        ))
    }

    pub fn has(&self, capability: ControllerCapability) -> bool {
        self.0.contains(&capability)
    }
}

/// What GroupControllerGetCapabilities answered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupControllerCapabilities(pub BTreeSet<GroupControllerCapability>);

impl GroupControllerCapabilities {
    pub fn from_response(capabilities: &[GroupControllerServiceCapability]) -> Self {
        GroupControllerCapabilities(known(
            capabilities
                .iter()
                .map(|c| c.r#type.as_ref().map(|group_controller_service_capability::Type::Rpc(rpc)| rpc.r#type)),
        ))
    }

    pub fn has(&self, capability: GroupControllerCapability) -> bool {
        self.0.contains(&capability)
    }
}

/// What NodeGetCapabilities answered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeCapabilities(pub BTreeSet<NodeCapability>);

impl NodeCapabilities {
    pub fn from_response(capabilities: &[NodeServiceCapability]) -> Self {
        NodeCapabilities(known(
            capabilities.iter().map(|c| c.r#type.as_ref().map(|node_service_capability::Type::Rpc(rpc)| rpc.r#type)),
        ))
    }

    pub fn has(&self, capability: NodeCapability) -> bool {
        self.0.contains(&capability)
    }
}

/// The capability types a driver listed, without empty entries, values this version does not know, and `UNKNOWN`
/// (0 in every capability enum).
fn known<T: TryFrom<i32> + Ord>(types: impl Iterator<Item = Option<i32>>) -> BTreeSet<T> {
    types.flatten().filter(|t| *t != 0).filter_map(|t| T::try_from(t).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{controller_service_capability as csc, plugin_capability as pc};

    fn controller(t: i32) -> ControllerServiceCapability {
        ControllerServiceCapability { r#type: Some(csc::Type::Rpc(csc::Rpc { r#type: t })) }
    }

    #[test]
    fn controller_set_skips_unknown_and_empty() {
        let caps = [
            controller(ControllerCapability::CreateDeleteVolume as i32),
            controller(ControllerCapability::ModifyVolume as i32),
            controller(0),
            controller(999),
            ControllerServiceCapability { r#type: None },
        ];
        let set = ControllerCapabilities::from_response(&caps);
        assert_eq!(
            set.0.into_iter().collect::<Vec<_>>(),
            vec![ControllerCapability::CreateDeleteVolume, ControllerCapability::ModifyVolume]
        );
    }

    /// CSI v1.13 removed the alpha VOLUME_CONDITION (controller 11, node 4) and reserved its values: a driver built
    /// on an older spec that still lists it has that entry skipped, as any value this version does not know; the
    /// health capabilities that replace it are known.
    #[test]
    fn the_removed_volume_condition_is_skipped_and_the_health_capabilities_known() {
        use crate::proto::node_service_capability as nsc;
        let controller_set = ControllerCapabilities::from_response(&[
            controller(11),
            controller(ControllerCapability::GetVolumeHealth as i32),
            controller(ControllerCapability::ListVolumeHealth as i32),
        ]);
        assert_eq!(
            controller_set.0.into_iter().collect::<Vec<_>>(),
            vec![ControllerCapability::GetVolumeHealth, ControllerCapability::ListVolumeHealth]
        );
        assert_eq!(
            (ControllerCapability::GetVolumeHealth as i32, ControllerCapability::ListVolumeHealth as i32),
            (16, 17)
        );
        let node = |t: i32| NodeServiceCapability { r#type: Some(nsc::Type::Rpc(nsc::Rpc { r#type: t })) };
        let node_set = NodeCapabilities::from_response(&[
            node(4),
            node(NodeCapability::GetVolumeHealth as i32),
            node(NodeCapability::GetStorageHealth as i32),
        ]);
        assert_eq!(
            node_set.0.into_iter().collect::<Vec<_>>(),
            vec![NodeCapability::GetVolumeHealth, NodeCapability::GetStorageHealth]
        );
        assert_eq!((NodeCapability::GetVolumeHealth as i32, NodeCapability::GetStorageHealth as i32), (7, 8));
        assert_eq!(PluginService::SnapshotAccessibilityConstraints as i32, 5);
    }

    #[test]
    fn node_set_skips_unknown_and_empty() {
        use crate::proto::node_service_capability as nsc;
        let node = |t: i32| NodeServiceCapability { r#type: Some(nsc::Type::Rpc(nsc::Rpc { r#type: t })) };
        let caps =
            [node(NodeCapability::ExpandVolume as i32), node(0), node(999), NodeServiceCapability { r#type: None }];
        let set = NodeCapabilities::from_response(&caps);
        assert_eq!(set.0.into_iter().collect::<Vec<_>>(), vec![NodeCapability::ExpandVolume]);
        assert!(!NodeCapabilities::from_response(&[]).has(NodeCapability::ExpandVolume));
    }

    #[test]
    fn plugin_services_and_expansion() {
        let caps = [
            PluginCapability {
                r#type: Some(pc::Type::Service(pc::Service { r#type: PluginService::ControllerService as i32 })),
            },
            PluginCapability {
                r#type: Some(pc::Type::Service(pc::Service { r#type: PluginService::GroupControllerService as i32 })),
            },
            PluginCapability {
                r#type: Some(pc::Type::VolumeExpansion(pc::VolumeExpansion { r#type: VolumeExpansion::Online as i32 })),
            },
        ];
        let set = PluginCapabilities::from_response(&caps);
        assert!(set.has(PluginService::ControllerService));
        assert!(set.has(PluginService::GroupControllerService));
        assert!(!set.has(PluginService::VolumeAccessibilityConstraints));
        assert!(set.volume_expansion.contains(&VolumeExpansion::Online));
    }
}
