//! One PV's check (drivers without LIST_VOLUME_HEALTH): ControllerGetVolumeHealth for its volume, reported on its
//! claim (external-health-monitor pkg/controller/pv_monitor_controller.go checkPVWorker, pkg/csi-handler/pv_checker.go
//! CheckControllerVolumeStatus). Every PV comes round again with the `--monitor-interval` resync, so a failed call is
//! logged and not retried sooner, as upstream.

use std::sync::Arc;

use csi_client::proto::ControllerGetVolumeHealthRequest;
use sidecar_runtime::Outcome;

use super::Shared;
use crate::translate::filter;
use crate::translate::health::conditions;

pub(super) async fn sync(shared: Arc<Shared>, name: String) -> Outcome {
    let Some(volume) = shared.stores.volume(&name) else { return Outcome::Done };
    let Some(monitored) = filter::monitored(&volume, &shared.options.driver) else { return Outcome::Done };
    let request = ControllerGetVolumeHealthRequest { volume_id: monitored.volume_handle.clone(), ..Default::default() };
    match shared.csi.controller_get_volume_health(request).await {
        Ok(answer) => shared.report(&monitored, conditions(answer.volume_health.as_ref())).await,
        Err(error) => tracing::warn!(pv = %name, %error, "Check controller volume status error"),
    }
    Outcome::Done
}
