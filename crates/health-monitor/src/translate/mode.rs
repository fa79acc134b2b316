//! How volume health is asked for, from what the driver can do (external-health-monitor
//! cmd/csi-external-health-monitor-controller/main.go, read in CSI v1.13's terms).
//!
//! CSI v1.13 replaced the alpha VolumeCondition (capability VOLUME_CONDITION, the `volume_condition` of ListVolumes and
//! ControllerGetVolume) with ControllerListVolumeHealth and ControllerGetVolumeHealth. Upstream prefers the listing
//! call for its cost (one call for every volume) and otherwise asks each PV's volume; it exits when the driver has no
//! controller service or neither call.

use csi_client::capabilities::{ControllerCapabilities, ControllerCapability, PluginCapabilities, PluginService};

/// CSI v1.12's VOLUME_CONDITION, reserved in v1.13: a driver that lists it speaks the removed API.
pub const LEGACY_VOLUME_CONDITION: i32 = 11;

/// How health is asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// ControllerListVolumeHealth every `--list-volumes-interval`: every abnormal volume in one listing.
    List,
    /// ControllerGetVolumeHealth for each bound PV of the driver, every `--monitor-interval`.
    PerVolume,
}

/// Why the monitor does not start (upstream exits 1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    NoControllerService,
    NoHealthCalls { legacy_condition: bool },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::NoControllerService => f.write_str("CSI driver does not support Plugin Controller Service"),
            Refusal::NoHealthCalls { legacy_condition: false } => f.write_str(
                "CSI driver does not support Controller ListVolumeHealth and GetVolumeHealth service (LIST_VOLUME_HEALTH, \
                 GET_VOLUME_HEALTH)",
            ),
            Refusal::NoHealthCalls { legacy_condition: true } => f.write_str(
                "CSI driver advertises VOLUME_CONDITION, which CSI v1.13 removed; it needs LIST_VOLUME_HEALTH or \
                 GET_VOLUME_HEALTH (ControllerListVolumeHealth, ControllerGetVolumeHealth)",
            ),
        }
    }
}

/// The mode for a driver's plugin capabilities, its controller capabilities (`None`: not asked, no controller
/// service) and whether its raw list names the removed VOLUME_CONDITION.
pub fn mode(
    plugin: &PluginCapabilities,
    controller: Option<&ControllerCapabilities>,
    legacy_condition: bool,
) -> Result<Mode, Refusal> {
    if !plugin.has(PluginService::ControllerService) {
        return Err(Refusal::NoControllerService);
    }
    let controller = controller.ok_or(Refusal::NoControllerService)?;
    if controller.has(ControllerCapability::ListVolumeHealth) {
        Ok(Mode::List)
    } else if controller.has(ControllerCapability::GetVolumeHealth) {
        Ok(Mode::PerVolume)
    } else {
        Err(Refusal::NoHealthCalls { legacy_condition })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    fn plugin(controller_service: bool) -> PluginCapabilities {
        let services = match controller_service {
            true => BTreeSet::from([PluginService::ControllerService]),
            false => BTreeSet::new(),
        };
        PluginCapabilities { services, ..Default::default() }
    }

    fn controller(list: &[ControllerCapability]) -> ControllerCapabilities {
        ControllerCapabilities(list.iter().copied().collect())
    }

    #[test]
    fn mode_from_capabilities() {
        use ControllerCapability::*;
        // (rule, controller service, controller capabilities, VOLUME_CONDITION listed, the mode)
        type Row<'a> = (&'a str, bool, Option<&'a [ControllerCapability]>, bool, Result<Mode, Refusal>);
        let rows: [Row; 7] = [
            ("the listing call is preferred", true, Some(&[ListVolumeHealth, GetVolumeHealth]), false, Ok(Mode::List)),
            ("the listing call alone", true, Some(&[ListVolumeHealth]), false, Ok(Mode::List)),
            (
                "each volume asked without the listing call",
                true,
                Some(&[GetVolumeHealth, ListVolumes]),
                false,
                Ok(Mode::PerVolume),
            ),
            (
                "no controller service: refused",
                false,
                Some(&[ListVolumeHealth]),
                false,
                Err(Refusal::NoControllerService),
            ),
            ("controller capabilities not asked: refused", true, None, false, Err(Refusal::NoControllerService)),
            (
                "ListVolumes and GetVolume without health: refused",
                true,
                Some(&[ListVolumes, GetVolume, ListVolumesPublishedNodes]),
                false,
                Err(Refusal::NoHealthCalls { legacy_condition: false }),
            ),
            (
                "the removed VOLUME_CONDITION alone: refused, saying so",
                true,
                Some(&[ListVolumes, GetVolume]),
                true,
                Err(Refusal::NoHealthCalls { legacy_condition: true }),
            ),
        ];
        for (rule, service, caps, legacy, want) in rows {
            let caps = caps.map(controller);
            assert_eq!(mode(&plugin(service), caps.as_ref(), legacy), want, "{rule}");
        }
        assert!(Refusal::NoHealthCalls { legacy_condition: true }.to_string().contains("VOLUME_CONDITION"));
    }
}
