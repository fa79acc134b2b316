//! The resizer's worker entry: one sync of a claim is its expansion, then its modification, with the claim and PV as
//! the first left them.

use std::sync::Arc;

use sidecar_runtime::Outcome;

use super::steps::Objects;
use super::{ClaimKey, Shared, expand, modify};
use crate::translate::claim::bound_volume_name;

pub(super) async fn sync(shared: Arc<Shared>, key: ClaimKey) -> Outcome {
    let Some(claim) = shared.stores.claim(&key).map(|cached| shared.written_claims.newest(cached)) else {
        return Outcome::Done;
    };
    let volume_name = bound_volume_name(&claim).to_string();
    if volume_name.is_empty() {
        return Outcome::Done;
    }
    let Some(volume) = shared.stores.volume(&volume_name).map(|cached| shared.written_volumes.newest(cached)) else {
        // A claim can name its PV before the PV reaches the cache.
        tracing::debug!(claim = %key, volume = %volume_name, "volume not in the cache yet, retrying");
        return Outcome::Retry;
    };
    let mut objects = Objects { claim: (*claim).clone(), volume: (*volume).clone() };
    let mut outcome = Outcome::Done;
    if let Some(config) = &shared.options.expansion {
        let (expanded, latest) = expand::expand(&shared, &key, config, objects).await;
        outcome = outcome.most_urgent(expanded);
        objects = latest;
    }
    if let Some(config) = &shared.options.modification {
        outcome = outcome.most_urgent(modify::modify(&shared, &key, config, objects).await);
    }
    outcome
}
