//! Restores from a VolumeSnapshot: reading the snapshot and its content, the source-protection finalizer around
//! CreateVolume, and the sweep that removes finalizers left behind (item 54).
//!
//! Snapshots are read with GETs when a restore needs them rather than watched: most clusters restore rarely, and a
//! cluster-wide VolumeSnapshot cache would cost memory in every provisioner for nothing.

use std::time::Duration;

use csi_client::capabilities::ControllerCapability;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::Api;
use kube::api::ListParams;
use sidecar_runtime::update::set_finalizer;
use snapshot_api::{VolumeSnapshot, VolumeSnapshotContent};
use tokio_util::sync::CancellationToken;

use super::Shared;
use super::provision::api_error_text;
use crate::translate::api_errors::{snapshot_not_protected, snapshot_not_read};
use crate::translate::data_source::DataSource;
use crate::translate::names::FINALIZER_SNAPSHOT_SOURCE_PROTECTION;
use crate::translate::refusal::Refusal;
use crate::translate::snapshot_source::{SnapshotRestore, snapshot_restore, source_protection_releasable};

impl Shared {
    /// The content source for restoring `source` into `claim`, or why not yet.
    pub(super) async fn snapshot_restore(
        &self,
        claim: &PersistentVolumeClaim,
        source: &DataSource,
        provisioner_name: &str,
    ) -> Result<SnapshotRestore, Refusal> {
        let snapshots: Api<VolumeSnapshot> = Api::namespaced(self.client.clone(), &source.namespace);
        let snapshot =
            snapshots.get_opt(&source.name).await.map_err(|e| snapshot_not_read(&source.name, &api_error_text(&e)))?;
        let content_name =
            snapshot.as_ref().and_then(|s| s.status.as_ref()?.bound_volume_snapshot_content_name.clone());
        let content = match content_name {
            Some(name) => {
                let contents: Api<VolumeSnapshotContent> = Api::all(self.client.clone());
                contents.get_opt(&name).await.unwrap_or_else(|err| {
                    tracing::warn!(content = %name, error = %err, "cannot read the snapshot's content");
                    None
                })
            }
            None => None,
        };
        let restore = snapshot_restore(
            claim,
            source,
            snapshot.as_ref(),
            content.as_ref(),
            provisioner_name,
            self.provisioner.prevent_volume_mode_conversion,
        )?;
        if let Some(warning) = &restore.larger_than_snapshot {
            tracing::warn!(claim = claim.metadata.name.as_deref().unwrap_or_default(), "{warning}");
        }
        Ok(restore)
    }

    /// Adds the source-protection finalizer before CreateVolume, so the snapshot outlives the restore.
    pub(super) async fn protect_snapshot(&self, source: &DataSource) -> Result<(), Refusal> {
        self.change_snapshot_finalizer(source, true)
            .await
            .map_err(|e| snapshot_not_protected(&source.name, &api_error_text(&e)))
    }

    /// Removes the source-protection finalizer once `claim`'s PV exists, unless another claim still restores from
    /// the same snapshot (upstream removes it regardless, which unprotects the other restore).
    pub(super) async fn release_snapshot(&self, claim: &PersistentVolumeClaim, source: &DataSource) {
        let Some(snapshot) = self.read_snapshot(source).await else { return };
        let uid = claim.metadata.uid.as_deref();
        let claims = self.stores.claims.state();
        let others = claims.iter().filter(|c| c.metadata.uid.as_deref() != uid).map(|c| &**c);
        if !source_protection_releasable(&snapshot, others) {
            return;
        }
        if let Err(err) = self.change_snapshot_finalizer(source, false).await {
            // The sweep takes it away later.
            tracing::warn!(snapshot = %source.name, error = %err, "cannot remove the snapshot's source protection yet");
        }
    }

    async fn read_snapshot(&self, source: &DataSource) -> Option<VolumeSnapshot> {
        let snapshots: Api<VolumeSnapshot> = Api::namespaced(self.client.clone(), &source.namespace);
        snapshots.get_opt(&source.name).await.ok().flatten()
    }

    /// Adds or removes the finalizer on the snapshot as read now (snapshots are not cached), with an update.
    async fn change_snapshot_finalizer(&self, source: &DataSource, add: bool) -> Result<(), kube::Error> {
        let snapshots: Api<VolumeSnapshot> = Api::namespaced(self.client.clone(), &source.namespace);
        let Some(snapshot) = snapshots.get_opt(&source.name).await? else { return Ok(()) };
        match set_finalizer(&snapshots, &snapshot, FINALIZER_SNAPSHOT_SOURCE_PROTECTION, add).await {
            Ok(_) => Ok(()),
            // Upstream tolerates RBAC without `update` on snapshots (older deployments): go on unprotected.
            Err(kube::Error::Api(status)) if status.code == 403 => {
                tracing::warn!(
                    snapshot = %source.name,
                    "no permission to update volumesnapshots: the snapshot's finalizers are left as they are"
                );
                Ok(())
            }
            Err(err) => Err(err),
        }
    }

    /// Every `interval`, removes the source protection of snapshots no pending claim restores from. Runs only when
    /// the driver can restore snapshots at all.
    pub(super) async fn sweep_snapshot_protection(&self, interval: Duration, stop: CancellationToken) {
        if interval.is_zero() || !self.provisioner.has(ControllerCapability::CreateDeleteSnapshot) {
            return;
        }
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(interval) => {}
            }
            self.sweep_once().await;
        }
    }

    async fn sweep_once(&self) {
        let snapshots: Api<VolumeSnapshot> = Api::all(self.client.clone());
        let list = match snapshots.list(&ListParams::default()).await {
            Ok(list) => list,
            Err(kube::Error::Api(status)) if status.code == 404 => {
                tracing::debug!("no VolumeSnapshot API in this cluster: nothing to sweep");
                return;
            }
            Err(err) => {
                tracing::warn!(error = %err, "cannot list VolumeSnapshots for the orphan sweep");
                return;
            }
        };
        let claims = self.stores.claims.state();
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
            match self.change_snapshot_finalizer(&source, false).await {
                Ok(()) => {
                    tracing::info!(snapshot = %format!("{}/{}", source.namespace, source.name), "removed an orphaned source protection")
                }
                Err(err) => {
                    tracing::warn!(snapshot = %source.name, error = %err, "cannot remove an orphaned source protection")
                }
            }
        }
    }
}
