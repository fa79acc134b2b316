//! The sweep that removes the source-protection finalizer from snapshots no pending claim restores from any more,
//! left behind by a crash or a failed removal (external-provisioner pkg/controller/snapshot_finalizer_controller.go,
//! `sweepOrphanedFinalizers`).

use std::sync::Arc;

use csi_client::capabilities::ControllerCapability;
use kube::Api;
use kube::api::ListParams;
use sidecar_runtime::api_error::is_not_found;
use snapshot_api::VolumeSnapshot;
use tokio_util::sync::CancellationToken;

use super::Shared;
use crate::translate::data_source::DataSource;
use crate::translate::snapshot_source::source_protection_releasable;

/// Every `--snapshot-orphan-sweep-interval` (zero: never) until `stop`. Runs only when the driver can restore
/// snapshots at all.
pub(super) async fn sweep_snapshots(shared: Arc<Shared>, stop: CancellationToken) {
    let interval = shared.options.snapshot_orphan_sweep_interval;
    if interval.is_zero() || !shared.provisioner.has(ControllerCapability::CreateDeleteSnapshot) {
        return;
    }
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(interval) => {}
        }
        sweep_once(&shared).await;
    }
}

async fn sweep_once(shared: &Shared) {
    let snapshots: Api<VolumeSnapshot> = Api::all(shared.client.clone());
    let list = match snapshots.list(&ListParams::default()).await {
        Ok(list) => list,
        Err(err) if is_not_found(&err) => {
            tracing::debug!("no VolumeSnapshot API in this cluster: nothing to sweep");
            return;
        }
        Err(err) => {
            tracing::warn!(error = %err, "cannot list VolumeSnapshots for the orphan sweep");
            return;
        }
    };
    let claims = shared.stores.claims_with_data_source();
    for snapshot in list.items {
        if !source_protection_releasable(&snapshot, claims.iter().map(|c| &**c)) {
            continue;
        }
        let source = DataSource {
            kind: String::new(),
            name: snapshot.metadata.name.clone().unwrap_or_default(),
            api_group: String::new(),
            namespace: snapshot.metadata.namespace.clone().unwrap_or_default(),
        };
        match shared.change_snapshot_finalizer(&source, false).await {
            Ok(()) => {
                tracing::info!(snapshot = %format!("{}/{}", source.namespace, source.name), "removed an orphaned source protection")
            }
            Err(err) => {
                tracing::warn!(snapshot = %source.name, error = %err, "cannot remove an orphaned source protection")
            }
        }
    }
}
