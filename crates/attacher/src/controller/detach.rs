//! The detach worker: one deleted VolumeAttachment of this driver, detached in the order
//! [`crate::translate::detach`] documents.

use std::sync::Arc;

use k8s_openapi::api::storage::v1::VolumeAttachment;
use sidecar_runtime::Outcome;
use sidecar_runtime::api_error::{api_error_text, is_not_found};
use sidecar_runtime::time::now;

use super::Shared;
use super::holding::Holding;
use crate::translate::detach;
use crate::translate::filter::{self, Direction};
use crate::translate::node::node_id;
use crate::translate::request::unpublish_request;
use crate::translate::volume::{self, CsiVolume, Source};

pub(super) async fn sync(shared: Arc<Shared>, name: String) -> Outcome {
    let Some(_held) = Holding::hold(&shared, &name, Direction::Detach) else { return Outcome::Done };
    let Some(attachment) = shared.attachment(&name) else { return Outcome::Done };
    let driver = shared.options.driver.as_str();
    let deleted = filter::direction(&attachment) == Direction::Detach;
    if !filter::for_driver(&attachment, driver) || !deleted {
        return Outcome::Done;
    }
    if !detach::needed(&attachment, driver, shared.take_forced(&name)) {
        tracing::trace!(attachment = %name, "already detached");
        return Outcome::Done;
    }
    tracing::info!(attachment = %name, node = %attachment.spec.node_name, "detaching");
    match unpublish(&shared, &attachment).await {
        Ok(()) => {
            tracing::info!(attachment = %name, "detached");
            Outcome::Done
        }
        Err((latest, message)) => {
            tracing::warn!(attachment = %name, error = %message, "failed to detach");
            let patch = detach::failed(message, now());
            if let Err(err) = shared.patch_status(&latest, &patch).await {
                tracing::warn!(attachment = %name, error = %api_error_text(&err), "failed to save the detach error");
            }
            Outcome::Retry
        }
    }
}

/// Steps 2 to 6; the error with the VolumeAttachment as last written.
async fn unpublish(shared: &Shared, attachment: &VolumeAttachment) -> Result<(), (VolumeAttachment, String)> {
    let driver = shared.options.driver.as_str();
    let fail = |attachment: &VolumeAttachment, message: String| (attachment.clone(), message);
    let csi_volume = csi_volume(shared, attachment).map_err(|m| fail(attachment, m))?;
    let secrets = shared.publish_secrets(&csi_volume).await.map_err(|m| fail(attachment, m))?;
    let node_name = &attachment.spec.node_name;
    let csi_node = shared.stores.csi_node(node_name);
    let node = node_id(csi_node.as_deref(), node_name, driver, Some(attachment)).map_err(|m| fail(attachment, m))?;
    let request = unpublish_request(&csi_volume, &node, secrets);
    if let Err(err) = shared.csi_for(&csi_volume).controller_unpublish_volume(request).await {
        return Err(fail(attachment, err.go_text()));
    }
    let mut latest = attachment.clone();
    if let Some(removal) = detach::finalizer_removal(&latest, driver) {
        latest = shared
            .patch_metadata(&latest, &removal)
            .await
            .map_err(|e| fail(attachment, detach::mark_failed(&api_error_text(&e))))?;
    }
    if gone(&latest) {
        return Ok(());
    }
    match detach::detached(&latest) {
        Some(patch) => match shared.patch_status(&latest, &patch).await {
            Ok(_) => Ok(()),
            // Without finalizers the API server deleted it at once: detached.
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(fail(&latest, detach::mark_failed(&api_error_text(&e)))),
        },
        None => Ok(()),
    }
}

/// A deleted object whose last finalizer went no longer exists: its status is not written (upstream writes it and
/// gets NotFound).
fn gone(attachment: &VolumeAttachment) -> bool {
    attachment.metadata.deletion_timestamp.is_some()
        && attachment.metadata.finalizers.as_ref().is_none_or(Vec::is_empty)
}

/// The PV from the cache (it cannot go while it carries the attacher's finalizer) or the inline volume, in its CSI
/// form.
fn csi_volume(shared: &Shared, attachment: &VolumeAttachment) -> Result<CsiVolume, String> {
    match volume::source(attachment)? {
        Source::Inline(spec) => volume::of_inline(spec),
        Source::Volume(name) => {
            let pv = shared.stores.volume(name).ok_or_else(|| volume::volume_not_found(name))?;
            volume::of_volume(&pv)
        }
    }
}
