//! A queue of VolumeSnapshots whose restoring claim was deleted: the last pending restore from a snapshot may have
//! gone, so its source protection may come off now rather than at the next orphan sweep.

use std::sync::Arc;

use sidecar_runtime::Outcome;

use super::Shared;
use crate::translate::data_source::DataSource;

/// Removes the snapshot's source protection unless a pending claim still restores from it. Never retried: the
/// sweep ([`super::snapshot_sweep`]) removes what is left.
pub(super) async fn release_snapshot(shared: Arc<Shared>, snapshot: DataSource) -> Outcome {
    shared.release_snapshot(&snapshot, None).await;
    Outcome::Done
}
