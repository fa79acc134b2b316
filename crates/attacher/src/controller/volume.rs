//! The PV worker: the attacher's finalizer leaves a PV that is being deleted (or no longer handed to this driver)
//! once no VolumeAttachment names it, as [`crate::translate::volume_finalizer`] decides.

use std::sync::Arc;

use sidecar_runtime::Outcome;
use sidecar_runtime::api_error::api_error_text;

use super::Shared;
use crate::translate::volume_finalizer::removal;

pub(super) async fn sync(shared: Arc<Shared>, name: String) -> Outcome {
    let Some(volume) = shared.stores.volume(&name) else { return Outcome::Done };
    let attachments = shared.stores.attachments.state();
    let Some(patch) = removal(&volume, &shared.options.driver, attachments.iter().map(|va| va.as_ref())) else {
        return Outcome::Done;
    };
    match shared.patch_volume_finalizer(&volume, &patch).await {
        Ok(_) => {
            tracing::info!(volume = %name, "removed the finalizer from the PersistentVolume");
            Outcome::Done
        }
        Err(err) => {
            tracing::warn!(volume = %name, error = %api_error_text(&err), "failed to remove the PersistentVolume finalizer");
            Outcome::Retry
        }
    }
}
