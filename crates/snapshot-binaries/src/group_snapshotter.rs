//! csi-group-snapshotter's wiring, shared by its binary and `csi-sidecars`: csi-snapshotter's group loop alone, with
//! csi-snapshotter's flags (the gate CSIVolumeGroupSnapshot is implied) and a Lease of its own,
//! `external-snapshotter-group-leader-<driver>`, so that it never takes csi-snapshotter's.

use group_snapshotter::controller::sidecar::Controller;
use sidecar_runtime::leader_election::group_snapshotter_lease_name;
use sidecar_runtime::{Driver, SetupError, SetupResult, Sidecar, SidecarLoop};
use snapshotter::flags::sidecar::Args;

use crate::group_loop;

/// The sidecar's name in `csi-sidecars --sidecars` and in its messages.
pub const NAME: &str = "group-snapshotter";

/// The events' source component, as csi-snapshotter's group events.
const EVENT_COMPONENT: &str = "csi-snapshotter";

/// The flags, checked as csi-snapshotter's.
pub struct Config {
    args: Args,
}

impl Config {
    pub fn from_args(args: Args) -> Result<Config, SetupError> {
        args.validate().refused()?;
        Ok(Config { args })
    }

    /// The flags every sidecar shares, for [`Sidecar::start`].
    pub fn common(&self) -> sidecar_runtime::CommonArgs {
        self.args.common.clone()
    }

    /// `--timeout`: each CSI call's limit, and how long in-flight work may drain.
    pub fn timeout(&self) -> std::time::Duration {
        self.args.timeout
    }
}

/// Refuses a driver without group snapshots and builds the group loop.
pub async fn start(config: Config, sidecar: &mut Sidecar, driver: &Driver) -> Result<SidecarLoop, SetupError> {
    let Config { args } = config;
    let (csi, driver) = (driver.csi.with_timeout(args.timeout), driver.name.clone());
    if !group_loop::driver_has_group_snapshots(&csi).await {
        return Err(SetupError::message(format!(
            "CSI driver {driver} does not support CreateDeleteGetVolumeGroupSnapshot"
        )));
    }
    let queue_metrics = sidecar.queue_metrics();
    let events = sidecar.events(format!("{EVENT_COMPONENT} {driver}"));
    let options = group_loop::options(&args, &driver);
    let controller = Controller::new(sidecar.client(), &sidecar.caches(), csi, events, options, Some(&queue_metrics));
    let lease = group_snapshotter_lease_name(&driver);
    Ok(SidecarLoop::new(NAME, lease, args.timeout, |stop| controller.run(stop)))
}
