//! The content worker: one VolumeSnapshotContent (by name) per run. It protects bound contents, tells csi-snapshotter
//! when their snapshot is being deleted, and wakes the snapshot when the content has news for it; it never deletes a
//! content ([`crate::translate::common::content_sync`]).

use std::sync::Arc;

use kube::ResourceExt;
use sidecar_runtime::Outcome;

use super::Shared;
use crate::translate::common::content_sync::{ContentSync, content_sync, referenced_snapshot_key};

/// One run of a content key.
pub(super) async fn sync_content(shared: Arc<Shared>, name: String) -> Outcome {
    let Some(content) = shared.stores.content(&name) else { return Outcome::Done };
    let snapshot_key = referenced_snapshot_key(&content);
    let snapshot = shared.stores.snapshot(&snapshot_key);
    let write = match content_sync(&content, snapshot.as_deref()) {
        ContentSync::Invalid { event, error } => {
            shared.record(&*content, &event).await;
            tracing::info!(content = %name, %error, "invalid content");
            return Outcome::Retry;
        }
        ContentSync::PreBound => return Outcome::Done,
        ContentSync::AddFinalizer(patch) => Some(patch),
        ContentSync::Bound { enqueue_snapshot, being_deleted } => {
            if enqueue_snapshot {
                shared.snapshots.add(snapshot_key);
            }
            being_deleted
        }
    };
    let Some(patch) = write else { return Outcome::Done };
    match shared.patch_content(&content, &patch).await {
        Ok(_) => Outcome::Done,
        Err(err) => {
            tracing::info!(content = %content.name_any(), error = %err, "content write failed, retrying");
            Outcome::Retry
        }
    }
}
