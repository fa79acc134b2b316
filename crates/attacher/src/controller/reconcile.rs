//! The reconciler (drivers with LIST_VOLUMES_PUBLISHED_NODES): at start and then `--reconcile-sync` after each
//! round, ListVolumes page by page; each VolumeAttachment of this driver it contradicts is queued again, forced, as
//! [`crate::translate::reconcile`] decides.

use std::sync::Arc;
use std::time::Duration;

use csi_client::proto::ListVolumesRequest;
use tokio_util::sync::CancellationToken;

use super::Shared;
use crate::translate::filter;
use crate::translate::reconcile::{Facts, disagrees, published_nodes};

pub(super) async fn run(shared: Arc<Shared>, period: Option<Duration>, stop: CancellationToken) {
    let Some(period) = period else { return };
    loop {
        if let Err(error) = reconcile(&shared).await {
            tracing::warn!(%error, "failed to reconcile VolumeAttachments");
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(period) => {}
        }
    }
}

async fn reconcile(shared: &Shared) -> Result<(), String> {
    let mut entries = Vec::new();
    let mut starting_token = String::new();
    let mut pages = csi_client::pages::Pages::default();
    loop {
        let request = ListVolumesRequest { max_entries: shared.options.max_entries, starting_token };
        let page = shared.csi.list_volumes(request).await.map_err(|e| format!("failed to ListVolumes: {e}"))?;
        entries.extend(page.entries);
        match pages.next(page.next_token).map_err(|e| format!("failed to ListVolumes: {e}"))? {
            Some(token) => starting_token = token,
            None => break,
        }
    }
    let published = published_nodes(&entries);
    let driver = shared.options.driver.as_str();
    for attachment in shared.stores.attachments.state() {
        if !filter::for_driver(&attachment, driver) {
            continue;
        }
        let name = attachment.metadata.name.clone().unwrap_or_default();
        let volume = attachment.spec.source.persistent_volume_name.as_deref().and_then(|pv| shared.stores.volume(pv));
        let csi_node = shared.stores.csi_node(&attachment.spec.node_name);
        let facts = Facts { attachment: &attachment, csi_node: csi_node.as_deref(), volume: volume.as_deref() };
        match disagrees(&facts, driver, &published) {
            Ok(false) => {}
            Ok(true) => {
                let attached = attachment.status.as_ref().is_some_and(|s| s.attached);
                tracing::warn!(attachment = %name, attached, "the driver disagrees with status.attached; syncing it again");
                shared.force(&name);
                shared.queue(filter::direction(&attachment)).add(name);
            }
            Err(error) => tracing::debug!(attachment = %name, %error, "not reconciled"),
        }
    }
    Ok(())
}
