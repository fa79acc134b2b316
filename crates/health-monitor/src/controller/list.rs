//! The listing check (drivers with LIST_VOLUME_HEALTH): at start and then every `--list-volumes-interval`,
//! ControllerListVolumeHealth page by page, and every monitored PV reported on its claim: abnormal when the listing
//! names its volume, healthy when it does not (the listing holds only abnormal volumes) (external-health-monitor
//! pkg/csi-handler/pv_checker.go CheckControllerListVolumeStatuses).

use std::collections::HashMap;
use std::sync::Arc;

use csi_client::proto::{ControllerListVolumeHealthRequest, VolumeHealth};
use tokio_util::sync::CancellationToken;

use super::Shared;
use crate::translate::health::conditions;

pub(super) async fn run(shared: Arc<Shared>, stop: CancellationToken) {
    loop {
        match list(&shared).await {
            Ok(health) => {
                for monitored in shared.stores.monitored(&shared.options.driver) {
                    if stop.is_cancelled() {
                        return;
                    }
                    shared.report(&monitored, conditions(health.get(&monitored.volume_handle))).await;
                }
            }
            Err(error) => tracing::warn!(%error, "Check controller volume status error"),
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(shared.options.list_volumes_interval) => {}
        }
    }
}

/// Every abnormal volume the driver lists, by volume id.
async fn list(shared: &Shared) -> Result<HashMap<String, VolumeHealth>, String> {
    let mut health = HashMap::new();
    let mut starting_token = String::new();
    let mut pages = csi_client::pages::Pages::default();
    loop {
        let request = ControllerListVolumeHealthRequest { starting_token, ..Default::default() };
        let page = shared
            .csi
            .controller_list_volume_health(request)
            .await
            .map_err(|e| format!("failed to list volume health: {e}"))?;
        health.extend(page.entries.into_iter().map(|entry| (entry.volume_id.clone(), entry)));
        match pages.next(page.next_token).map_err(|e| format!("failed to list volume health: {e}"))? {
            Some(token) => starting_token = token,
            None => return Ok(health),
        }
    }
}
