//! How csi-snapshotter's write values ([`crate::translate::sidecar::patch`]) and events reach the API server, and
//! the Secrets read live for a call: the shared context's own helpers, which the worker ([`super::sync`]) uses.

use std::collections::HashMap;

use kube::Api;
use kube::api::{Patch, PatchParams};
use sidecar_runtime::api_error::{api_error_text as api_text, is_conflict, is_not_found};
use sidecar_runtime::secrets::secret_data;
use sidecar_runtime::{Outcome, PlannedEvent};
use snapshot_api::VolumeSnapshotContent;

use super::Shared;
use crate::translate::sidecar::content::content_name;
use crate::translate::sidecar::patch::{ContentPatch, ContentStatusPatch};
use crate::translate::sidecar::secrets::SecretRef;

impl Shared {
    fn contents(&self) -> Api<VolumeSnapshotContent> {
        Api::all(self.client.clone())
    }

    /// Writes `patch` to the content's metadata; returns the content as stored.
    pub(super) async fn patch_content(
        &self,
        content: &VolumeSnapshotContent,
        patch: &ContentPatch,
    ) -> Result<VolumeSnapshotContent, kube::Error> {
        let name = content_name(content);
        self.contents().patch(&name, &PatchParams::default(), &Patch::Merge(patch.merge_patch())).await
    }

    /// Writes `patch` through the content's `status` subresource; returns the content as stored.
    pub(super) async fn patch_status(
        &self,
        content: &VolumeSnapshotContent,
        patch: &ContentStatusPatch,
    ) -> Result<VolumeSnapshotContent, kube::Error> {
        let name = content_name(content);
        self.contents().patch_status(&name, &PatchParams::default(), &Patch::Merge(patch.merge_patch())).await
    }

    pub(super) async fn publish(&self, content: &VolumeSnapshotContent, event: &PlannedEvent) {
        self.events.record(content, event).await;
    }

    /// The data of the referenced Secret, read live (as upstream: no Secret cache, so the sidecar needs `get` on
    /// Secrets only when a class names one). The error names the Secret, never its data.
    pub(super) async fn secret_data(&self, reference: Option<&SecretRef>) -> Result<HashMap<String, String>, String> {
        let Some(reference) = reference else { return Ok(HashMap::new()) };
        secret_data(&self.client, &reference.namespace, &reference.name).await.map_err(|e| {
            format!("error getting secret {} in namespace {}: {}", reference.name, reference.namespace, api_text(&e))
        })
    }
}

/// A write that failed: retried with backoff. A Conflict means a newer content is on its way, so it is not
/// worth a warning; a content that is gone needs nothing more.
pub(super) fn write_failed(name: &str, what: &str, error: &kube::Error) -> Outcome {
    if is_not_found(error) {
        return Outcome::Done;
    }
    if !is_conflict(error) {
        tracing::warn!(content = name, %error, "{what} failed");
    }
    Outcome::Retry
}
