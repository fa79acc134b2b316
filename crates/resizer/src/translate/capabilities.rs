//! Which of its jobs the resizer can do for a driver, from the driver's capabilities at startup (external-resizer
//! pkg/resizer/csi_resizer.go, NewResizerFromClient; pkg/modifier/csi_modifier.go, NewModifierFromClient;
//! cmd/csi-resizer/main.go).

use csi_client::capabilities::{ControllerCapabilities, ControllerCapability, PluginCapabilities, PluginService};

/// How volumes are expanded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Expander {
    /// ControllerExpandVolume. `single_node_multi_writer` selects the access-mode mapping of the volume capability.
    Controller { single_node_multi_writer: bool },
    /// The driver expands on the node only: the PV is resized without a driver call and kubelet does the rest.
    NodeOnly,
}

impl Expander {
    /// Whether the controller step is done by the driver (upstream's `DriverSupportsControlPlaneExpansion`).
    pub fn expands_in_controller(self) -> bool {
        matches!(self, Expander::Controller { .. })
    }
}

/// What expansion support a driver's controller capabilities give.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ControllerExpansion {
    Supported(Expander),
    /// No EXPAND_VOLUME in the controller: ask NodeGetCapabilities, then [`node_expansion`].
    AskNode,
}

/// A driver the resizer cannot serve.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StartupError {
    /// Fatal ("Failed to create CSI resizer"), even when the driver could modify: upstream does not read a missing
    /// CONTROLLER_SERVICE as "resize unsupported".
    #[error("CSI driver does not support controller service")]
    NoControllerService,
    /// Fatal: neither job is possible.
    #[error("CSI driver does not support resize nor modify")]
    NeitherResizeNorModify,
}

/// Step 1 of the expansion check: CONTROLLER_SERVICE is required; EXPAND_VOLUME selects the controller expander, whose
/// access-mode mapping depends on SINGLE_NODE_MULTI_WRITER.
pub fn controller_expansion(
    plugin: &PluginCapabilities,
    controller: &ControllerCapabilities,
) -> Result<ControllerExpansion, StartupError> {
    if !plugin.has(PluginService::ControllerService) {
        return Err(StartupError::NoControllerService);
    }
    if controller.has(ControllerCapability::ExpandVolume) {
        let single_node_multi_writer = controller.has(ControllerCapability::SingleNodeMultiWriter);
        return Ok(ControllerExpansion::Supported(Expander::Controller { single_node_multi_writer }));
    }
    Ok(ControllerExpansion::AskNode)
}

/// Step 2, when the controller cannot expand: a node with EXPAND_VOLUME gives node-only expansion; otherwise expansion
/// is off.
pub fn node_expansion(node_expand_volume: bool) -> Option<Expander> {
    node_expand_volume.then_some(Expander::NodeOnly)
}

/// Whether the driver can modify volumes: MODIFY_VOLUME is enough, EXPAND_VOLUME is not needed.
pub fn modification_supported(controller: &ControllerCapabilities) -> bool {
    controller.has(ControllerCapability::ModifyVolume)
}

/// The final check: at least one job (the modify controller runs only when the VolumeAttributesClass gate is on too,
/// but a driver that can modify is accepted either way, as upstream).
pub fn check_jobs(expander: Option<Expander>, modify: bool) -> Result<(), StartupError> {
    if expander.is_none() && !modify { Err(StartupError::NeitherResizeNorModify) } else { Ok(()) }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    fn plugin(controller_service: bool) -> PluginCapabilities {
        let mut caps = PluginCapabilities::default();
        if controller_service {
            caps.services.insert(PluginService::ControllerService);
        }
        caps
    }

    fn controller(list: &[ControllerCapability]) -> ControllerCapabilities {
        ControllerCapabilities(list.iter().copied().collect::<BTreeSet<_>>())
    }

    #[test]
    fn expansion_support_follows_capabilities() {
        use ControllerCapability::*;
        // (rule, controller service, controller capabilities, result)
        let table = [
            ("no CONTROLLER_SERVICE is fatal", false, vec![ExpandVolume], Err(StartupError::NoControllerService)),
            (
                "EXPAND_VOLUME → controller expander",
                true,
                vec![ExpandVolume],
                Ok(ControllerExpansion::Supported(Expander::Controller { single_node_multi_writer: false })),
            ),
            (
                "SINGLE_NODE_MULTI_WRITER is remembered",
                true,
                vec![ExpandVolume, SingleNodeMultiWriter],
                Ok(ControllerExpansion::Supported(Expander::Controller { single_node_multi_writer: true })),
            ),
            ("no EXPAND_VOLUME → ask the node", true, vec![ModifyVolume], Ok(ControllerExpansion::AskNode)),
        ];
        for (rule, service, caps, want) in table {
            assert_eq!(controller_expansion(&plugin(service), &controller(&caps)), want, "{rule}");
        }
        assert_eq!(node_expansion(true), Some(Expander::NodeOnly), "node EXPAND_VOLUME → node-only");
        assert_eq!(node_expansion(false), None, "resize not supported");
        assert!(!Expander::NodeOnly.expands_in_controller(), "a node-only driver does not expand in the controller");
    }

    #[test]
    fn at_least_one_job() {
        use ControllerCapability::*;
        assert!(modification_supported(&controller(&[ModifyVolume])), "MODIFY_VOLUME alone is enough");
        assert!(!modification_supported(&controller(&[ExpandVolume])), "EXPAND_VOLUME alone does not modify");
        // (rule, expander, modify, result)
        let table = [
            (
                "a driver that can neither resize nor modify is refused",
                None,
                false,
                Err(StartupError::NeitherResizeNorModify),
            ),
            ("modify-only drivers run", None, true, Ok(())),
            ("resize-only drivers run", Some(Expander::NodeOnly), false, Ok(())),
        ];
        for (rule, expander, modify, want) in table {
            assert_eq!(check_jobs(expander, modify), want, "{rule}");
        }
    }
}
