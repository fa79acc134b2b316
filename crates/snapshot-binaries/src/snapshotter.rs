//! csi-snapshotter, as its binary and `csi-sidecars` start it: [`::snapshotter::start`]'s content loop and, with the
//! gate on (its default) and the group CRDs served, the group loop beside it. A driver without group snapshots gets a
//! warning and the loop all the same, as upstream's (external-snapshotter cmd/csi-snapshotter/main.go): its group
//! contents are then refused by the driver and each gets a `GroupSnapshotCreationFailed` event naming the answer,
//! instead of waiting unseen.

use group_snapshotter::start::{driver_has_group_snapshots, sidecar_controller, sidecar_groups_served};
use sidecar_runtime::describe::Metrics;
use sidecar_runtime::leader_election::snapshotter_lease_name;
use sidecar_runtime::{Beside, Described, Description, Driver, SetupError, Sidecar, SidecarLoop, Started};
use snapshotter::flags::sidecar::Args;
pub use snapshotter::start::{Config, NAME};

use crate::group_snapshotter::group_args;

/// Refuses a driver without CreateSnapshot and builds the content loop; with `groups` (csi-snapshotter alone: yes;
/// beside `group-snapshotter` in `csi-sidecars`: no, that one runs it) the group loop too. Runs under
/// `external-snapshotter-leader-<driver>`.
pub async fn start(
    config: Config,
    sidecar: &mut Sidecar,
    driver: &Driver,
    groups: bool,
) -> Result<SidecarLoop, SetupError> {
    let content = snapshotter::start::content_loop(&config, sidecar, driver).await?;
    if !(groups && config.group_snapshots() && sidecar_groups_served(&sidecar.client()).await) {
        return Ok(content.alone());
    }
    if !driver_has_group_snapshots(&content.csi).await {
        tracing::warn!(driver = %driver.name,
            "the CSI driver does not offer CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT with CSIVolumeGroupSnapshot on: \
             its group snapshot contents will fail");
    }
    let args = group_args(config.args());
    let groups = sidecar_controller(&args, sidecar, content.csi.clone(), &driver.name, content.events.clone());
    Ok(content.beside(|stop| groups.run(stop)))
}

/// csi-snapshotter, as `csi-sidecars` and the e2e harness find it.
pub struct Snapshotter;

impl Described for Snapshotter {
    const DESCRIPTION: Description = Description {
        name: NAME,
        binary: "csi-snapshotter",
        lease: Some(snapshotter_lease_name),
        rbac: Some("csi-snapshotter.yaml"),
        metrics: Metrics::Runtime,
    };
    type Args = Args;
    type Config = Config;

    fn from_args(args: Args) -> Result<Config, SetupError> {
        Config::from_args(args)
    }

    fn timeout(config: &Config) -> std::time::Duration {
        config.timeout()
    }

    /// Beside `group-snapshotter` the group loop is that one's (one loop per group content, under one Lease).
    async fn start(config: Config, mut beside: Beside<'_>) -> Result<Started, SetupError> {
        let (driver, groups) = (beside.driver, !beside.selected(crate::group_snapshotter::NAME));
        Ok(Started::Loop(start(config, beside.sidecar()?, driver, groups).await?))
    }
}
