//! The worker for a driver that attaches nothing (no controller service, or no PUBLISH_UNPUBLISH_VOLUME): each
//! VolumeAttachment of the driver is marked attached without a call, and a deleted one needs nothing (it carries no
//! finalizer of ours) (external-attacher pkg/controller/trivial_handler.go).

use std::sync::Arc;

use sidecar_runtime::Outcome;
use sidecar_runtime::api_error::api_error_text;

use super::Shared;
use crate::translate::{attach, filter};

pub(super) async fn sync(shared: Arc<Shared>, name: String) -> Outcome {
    let Some(attachment) = shared.attachment(&name) else { return Outcome::Done };
    if !filter::for_driver(&attachment, &shared.options.driver) {
        return Outcome::Done;
    }
    let Some(patch) = attach::attached_without_driver(&attachment) else { return Outcome::Done };
    match shared.patch_status(&attachment, &patch).await {
        Ok(_) => {
            tracing::info!(attachment = %name, "marked attached (the driver attaches nothing)");
            Outcome::Done
        }
        Err(err) => {
            tracing::warn!(attachment = %name, error = %api_error_text(&err), "failed to mark as attached");
            Outcome::Retry
        }
    }
}
