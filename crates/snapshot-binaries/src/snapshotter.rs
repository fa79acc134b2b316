//! csi-snapshotter, as its binary and `csi-sidecars` start it: [`::snapshotter::start`]'s content loop and, with the
//! gate on (its default), the group CRDs served and a driver that has group snapshots, the group loop beside it.

use group_snapshotter::start::{sidecar_controller, sidecar_groups_served};
use sidecar_runtime::{Driver, SetupError, Sidecar, SidecarLoop};
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
    if !(groups && config.group_snapshots() && sidecar_groups_served(&sidecar.client(), &content.csi).await) {
        return Ok(content.alone());
    }
    let args = group_args(config.args());
    let groups = sidecar_controller(&args, sidecar, content.csi.clone(), &driver.name, content.events.clone());
    Ok(content.beside(|stop| groups.run(stop)))
}
