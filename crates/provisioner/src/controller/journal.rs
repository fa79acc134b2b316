//! The in-flight journal's two parts of the loop: its writer, and the claims of its entries queued once it is read,
//! so that entries of claims deleted while no provisioner ran are recovered (see [`super::in_flight`]).

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::{ClaimKey, Shared};
use crate::translate::in_flight_entry::InFlightEntry;

/// Writes the journal until `done`, which fires only after every worker has returned: workers still draining after
/// the stop may record claims.
pub(super) async fn write_journal(shared: Arc<Shared>, done: CancellationToken) {
    shared.journal.run(shared.client.clone(), done).await;
}

/// Once the journal has been read, every entry's claim is queued.
pub(super) async fn queue_journal_entries(shared: Arc<Shared>, stop: CancellationToken) {
    tokio::select! {
        _ = queue_entries(&shared) => {}
        _ = stop.cancelled() => {}
    }
}

async fn queue_entries(shared: &Shared) {
    shared.journal.loaded().await;
    for (uid, text) in shared.journal.entries() {
        // An unreadable entry is queued too, under no claim's name: its sync rejects it.
        let (namespace, name) = InFlightEntry::parse(&text).map(|e| (e.namespace, e.name)).unwrap_or_default();
        shared.claims.add(ClaimKey { uid, namespace, name });
    }
}
