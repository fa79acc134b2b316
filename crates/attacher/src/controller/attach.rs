//! The attach worker: one VolumeAttachment of this driver, not being deleted, attached in the order
//! [`crate::translate::attach`] documents.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::storage::v1::VolumeAttachment;
use sidecar_runtime::Outcome;
use sidecar_runtime::api_error::api_error_text;
use sidecar_runtime::time::now;

use super::Shared;
use super::holding::Holding;
use crate::translate::attach;
use crate::translate::capabilities::Handling;
use crate::translate::filter::{self, Direction};
use crate::translate::node::node_id;
use crate::translate::request::{publish_request, volume_capability};
use crate::translate::volume::{self, CsiVolume, Source};

/// Why an attach stopped: the message for `status.attachError`, the gRPC code of a driver's answer, and the
/// VolumeAttachment as last written.
struct Failure {
    attachment: VolumeAttachment,
    message: String,
    code: Option<i32>,
}

pub(super) async fn sync(shared: Arc<Shared>, name: String) -> Outcome {
    let Some(_held) = Holding::hold(&shared, &name, Direction::Attach) else { return Outcome::Done };
    let Some(attachment) = shared.attachment(&name) else { return Outcome::Done };
    if !filter::for_driver(&attachment, &shared.options.driver) {
        return Outcome::Done;
    }
    if filter::direction(&attachment) == Direction::Detach {
        shared.detach.add(name);
        return Outcome::Done;
    }
    if !attach::needed(&attachment, shared.take_forced(&name)) {
        tracing::trace!(attachment = %name, "already attached");
        return Outcome::Done;
    }
    tracing::info!(attachment = %name, node = %attachment.spec.node_name, "attaching");
    match publish(&shared, (*attachment).clone()).await {
        Ok((attached, context)) => {
            let patch = attach::attached(&attached, context);
            if !patch.is_empty()
                && let Err(err) = shared.patch_status(&attached, &patch).await
            {
                tracing::warn!(attachment = %name, error = %api_error_text(&err), "failed to mark as attached");
                return Outcome::Retry;
            }
            tracing::info!(attachment = %name, "attached");
            Outcome::Done
        }
        Err(failure) => {
            tracing::warn!(attachment = %name, error = %failure.message, "failed to attach");
            let code = failure.code.filter(|_| shared.options.attach_error_code);
            let patch = attach::failed(failure.message, code, now());
            if let Err(err) = shared.patch_status(&failure.attachment, &patch).await {
                tracing::warn!(attachment = %name, error = %api_error_text(&err), "failed to save the attach error");
            }
            Outcome::Retry
        }
    }
}

/// Steps 2 to 8: returns the VolumeAttachment as last written and the publish context.
async fn publish(
    shared: &Shared,
    mut attachment: VolumeAttachment,
) -> Result<(VolumeAttachment, BTreeMap<String, String>), Failure> {
    let Handling::Publish { config, .. } = &shared.options.handling else {
        unreachable!("attach runs when publishing")
    };
    let driver = shared.options.driver.as_str();
    let fail = |attachment: &VolumeAttachment, message: String| Failure {
        attachment: attachment.clone(),
        message,
        code: None,
    };
    let csi_volume = match csi_volume(shared, &attachment).await {
        Ok(csi_volume) => csi_volume,
        Err(message) => return Err(fail(&attachment, message)),
    };
    let capability = volume_capability(&csi_volume.spec, config).map_err(|m| fail(&attachment, m))?;
    let secrets = shared.publish_secrets(&csi_volume).await.map_err(|m| fail(&attachment, m))?;
    let node_name = attachment.spec.node_name.clone();
    let csi_node = shared.stores.csi_node(&node_name);
    let node = node_id(csi_node.as_deref(), &node_name, driver, None).map_err(|m| fail(&attachment, m))?;
    let metadata = attach::metadata(&attachment, driver, &node);
    if !metadata.is_empty() {
        attachment = shared
            .patch_metadata(&attachment, &metadata)
            .await
            .map_err(|e| fail(&attachment, attach::metadata_failed(&api_error_text(&e))))?;
    }
    let request = publish_request(&csi_volume, &node, capability, config, secrets);
    match shared.csi_for(&csi_volume).controller_publish_volume(request).await {
        Ok(response) => Ok((attachment, response.publish_context.into_iter().collect())),
        Err(err) => Err(Failure { attachment, message: err.go_text(), code: Some(err.code() as i32) }),
    }
}

/// Steps 2 to 4: the PV (given the attacher's finalizer first) or the inline volume, in its CSI form.
async fn csi_volume(shared: &Shared, attachment: &VolumeAttachment) -> Result<CsiVolume, String> {
    match volume::source(attachment)? {
        Source::Inline(spec) => volume::of_inline(spec),
        Source::Volume(name) => {
            let pv = shared.stores.volume(name).ok_or_else(|| volume::volume_not_found(name))?;
            volume::refuse_deleted(&pv)?;
            let pv = match attach::volume_finalizer(&pv, &shared.options.driver) {
                Some(patch) => shared
                    .patch_volume_finalizer(&pv, &patch)
                    .await
                    .map_err(|e| attach::volume_finalizer_failed(&api_error_text(&e)))?,
                None => (*pv).clone(),
            };
            volume::of_volume(&pv)
        }
    }
}
