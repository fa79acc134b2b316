//! What a check does on the claim: the event, the `status.healthStatus` merge patch (JSON, the field being newer than
//! this workspace's k8s-openapi) while the API server keeps it, and the memory of what was reported.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{Patch, PatchParams};
use serde_json::Value;
use sidecar_runtime::api_error::{api_error_text, is_forbidden};

use super::Shared;
use crate::translate::filter::{Monitored, claim_uid};
use crate::translate::health::{Condition, report};
use crate::translate::patch::HealthStatusPatch;

impl Shared {
    /// Reports `now` on the claim of `monitored`, as [`report`] decides from what was reported before.
    pub(super) async fn report(&self, monitored: &Monitored, now: Vec<Condition>) {
        let Some(claim) = self.stores.claim(monitored) else {
            tracing::debug!(claim = %monitored.claim_key(), "claim not found; not reported");
            return;
        };
        let uid = claim_uid(&claim);
        let previous = self.reported.lock().unwrap_or_else(|p| p.into_inner()).get(&uid).cloned();
        let writing = self.status_writes.lock().unwrap_or_else(|p| p.into_inner()).allowed();
        let planned = report(previous.as_deref(), &now, writing, &sidecar_runtime::time::now());
        if let Some(event) = &planned.event {
            self.events.record(claim.as_ref(), event).await;
        }
        if let Some(patch) = &planned.status
            && !self.write_health_status(&claim, patch).await
        {
            // Not written: the next check tries again.
            return;
        }
        self.reported.lock().unwrap_or_else(|p| p.into_inner()).insert(uid, now);
    }

    /// Patches the claim's `status.healthStatus`; whether the write went through (a dropped field or a 403 counts as
    /// through: writes are off from then on).
    async fn write_health_status(&self, claim: &PersistentVolumeClaim, patch: &HealthStatusPatch) -> bool {
        let namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
        let name = claim.metadata.name.as_deref().unwrap_or_default();
        let answer = self.merge_patch_status(namespace, name, patch.merge_patch()).await;
        let mut writes = self.status_writes.lock().unwrap_or_else(|p| p.into_inner());
        let before = *writes;
        let written = match &answer {
            Ok(stored) => {
                *writes = writes.after_answer(patch, stored);
                true
            }
            Err(error) => {
                *writes = writes.after_refusal(is_forbidden(error));
                if before == *writes {
                    tracing::warn!(claim = %format!("{namespace}/{name}"), error = %api_error_text(error), "failed to write status.healthStatus");
                }
                !writes.allowed()
            }
        };
        if before.allowed() && !writes.allowed() {
            tracing::info!(
                "the API server does not keep claims' status.healthStatus (CSIVolumeHealth off, or no persistentvolumeclaims/status in the role); reporting events only"
            );
        }
        written
    }

    async fn merge_patch_status(&self, namespace: &str, name: &str, body: Value) -> Result<Value, kube::Error> {
        let url = format!("/api/v1/namespaces/{namespace}/persistentvolumeclaims");
        let request = kube::core::Request::new(url)
            .patch_subresource("status", name, &PatchParams::default(), &Patch::Merge(&body))
            .map_err(kube::Error::BuildRequest)?;
        self.client.request::<Value>(request).await
    }

    /// Drops what was reported on a deleted claim.
    pub(super) fn forget(&self, uid: &str) {
        self.reported.lock().unwrap_or_else(|p| p.into_inner()).remove(uid);
    }
}
