//! What a check does on the claim: the event, the `status.healthStatus` merge patch (JSON, the field being newer than
//! this workspace's k8s-openapi) while the API server keeps it, and the memory of what was reported.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::Value;
use sidecar_runtime::api_error::{api_error_text, is_forbidden};

use super::Shared;
use crate::translate::filter::{Monitored, claim_uid};
use crate::translate::health::{Condition, report};
use crate::translate::patch::{HealthStatusPatch, carried_conditions};

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

    /// Remembers the conditions every claim carries in `status.healthStatus` (one paged list of claims, as JSON:
    /// the watch caches' claims have no such field), so that a claim an earlier leader reported abnormal is cleared
    /// and gets its recovery event once healthy. A server without the field leaves nothing to remember.
    pub(super) async fn remember_carried(&self) {
        let mut continue_token: Option<String> = None;
        let mut remembered = 0usize;
        loop {
            let mut params = ListParams::default().limit(500);
            if let Some(token) = continue_token.take() {
                params = params.continue_token(&token);
            }
            let page = match self.list_claims(&params).await {
                Ok(page) => page,
                Err(error) => {
                    tracing::warn!(error = %api_error_text(&error), "failed to list claims' status.healthStatus");
                    return;
                }
            };
            let items = page.get("items").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
            let mut reported = self.reported.lock().unwrap_or_else(|p| p.into_inner());
            for claim in items {
                let uid = claim.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default();
                if let Some(conditions) = carried_conditions(claim).filter(|c| !c.is_empty() && !uid.is_empty()) {
                    reported.entry(uid.to_string()).or_insert(conditions);
                    remembered += 1;
                }
            }
            drop(reported);
            continue_token =
                page.pointer("/metadata/continue").and_then(Value::as_str).filter(|t| !t.is_empty()).map(String::from);
            if continue_token.is_none() {
                break;
            }
        }
        tracing::debug!(claims = remembered, "claims carrying health conditions");
    }

    async fn list_claims(&self, params: &ListParams) -> Result<Value, kube::Error> {
        let request = kube::core::Request::new("/api/v1/persistentvolumeclaims")
            .list(params)
            .map_err(kube::Error::BuildRequest)?;
        self.client.request::<Value>(request).await
    }

    /// Drops what was reported on a deleted claim.
    pub(super) fn forget(&self, uid: &str) {
        self.reported.lock().unwrap_or_else(|p| p.into_inner()).remove(uid);
    }
}
