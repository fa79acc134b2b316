//! `--node-deployment`, Immediate binding: the race between the instances for a claim without a selected node
//! (external-provisioner pkg/controller/controller.go, `becomeOwner`). Each instance waits a jittered, growing
//! delay, checks that its node has the capacity, then writes its node into the claim; the winner is whoever's Update
//! goes through, and everyone else sees that node in its cache and lets the claim go.

use std::time::{Duration, Instant};

use csi_client::capabilities::ControllerCapability;
use csi_client::proto::GetCapacityRequest;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::StorageClass;
use sidecar_runtime::Outcome;
use sidecar_runtime::api_error::{api_error_text, is_conflict, is_not_found};

use super::{ClaimKey, Shared, claim_path, prepare};
use crate::translate::node_deployment::{
    Contest, NodeDeployment, capacity_sufficient, capacity_topologies, claim_selecting, contest, ownership_delay,
};

/// How a wait for the claim ended.
enum Waited {
    /// Still open when the delay ran out: try to take it (the latest cached copy).
    Open(std::sync::Arc<PersistentVolumeClaim>),
    /// Decided without us: deleted, bound, or taken by another node (or by us, which the watch reports).
    Settled(&'static str),
    /// The provisioner is stopping.
    Stopping,
}

/// Waits, checks capacity, then tries to write this node into the claim. Returns once the claim is decided or
/// this instance gives up for now; a successful Update queues the claim again through its watch event, and that
/// run provisions it as a late-binding claim.
pub(super) async fn become_owner(
    shared: &Shared,
    key: &ClaimKey,
    class: &StorageClass,
    local: &NodeDeployment,
) -> Outcome {
    loop {
        let attempts = shared.memory.ownership_attempt(&key.uid);
        let delay = ownership_delay(local.base_delay, local.max_delay, attempts, jitter());
        tracing::debug!(claim = %key, ?delay, attempts, "will try to become the claim's owner");
        let claim = match wait_for_owner(shared, key, local, delay).await {
            Waited::Open(claim) => claim,
            Waited::Settled(why) => {
                tracing::debug!(claim = %key, why, "not becoming the claim's owner");
                shared.memory.forget_ownership(&key.uid);
                return Outcome::Done;
            }
            Waited::Stopping => return Outcome::Done,
        };
        if !enough_capacity(shared, &claim, class, local).await {
            tracing::info!(claim = %claim_path(&claim), node = %local.node_name,
                "not enough capacity on this node; leaving the claim to other nodes for now");
            // Capacity may be freed later, and other nodes may be full too: look again after the longest wait.
            return Outcome::RetryAfter(local.max_delay);
        }
        match shared.replace_claim(&claim_selecting(&claim, &local.node_name)).await {
            Ok(_) => {
                tracing::info!(claim = %claim_path(&claim), node = %local.node_name, "became the claim's owner");
                shared.memory.forget_ownership(&key.uid);
                return Outcome::Done;
            }
            Err(err) if is_conflict(&err) => {
                // Lost the race, or another writer changed the claim: wait longer and look again.
                tracing::debug!(claim = %claim_path(&claim), "conflict while taking the claim, trying again");
            }
            Err(err) if is_not_found(&err) => {
                shared.memory.forget_ownership(&key.uid);
                return Outcome::Done;
            }
            Err(err) => {
                tracing::warn!(claim = %claim_path(&claim), node = %local.node_name, error = %api_error_text(&err),
                    "selecting this node for the claim failed");
                return Outcome::Retry;
            }
        }
    }
}

/// Waits `delay`, looking at the cached claim every poll interval, and stops early once it is decided.
async fn wait_for_owner(shared: &Shared, key: &ClaimKey, local: &NodeDeployment, delay: Duration) -> Waited {
    let deadline = Instant::now() + delay;
    loop {
        let Some(claim) = shared.stores.claim(key) else { return Waited::Settled("the claim is gone") };
        match contest(&claim, &local.node_name) {
            Contest::Open => {}
            Contest::Taken(_) => return Waited::Settled("another node owns the claim"),
            Contest::Mine => return Waited::Settled("this node owns the claim already"),
            Contest::Bound => return Waited::Settled("the claim is bound"),
        }
        let now = Instant::now();
        if now >= deadline {
            return Waited::Open(claim);
        }
        let pause = local.poll_interval().min(deadline - now);
        tokio::select! {
            _ = shared.stop.cancelled() => return Waited::Stopping,
            _ = tokio::time::sleep(pause) => {}
        }
    }
}

/// GetCapacity for the request this node would send (upstream's `checkCapacity`). Without GET_CAPACITY, or when the check cannot
/// be made, the answer is yes: provisioning then reports the problem, as upstream prefers.
async fn enough_capacity(
    shared: &Shared,
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    local: &NodeDeployment,
) -> bool {
    if !shared.provisioner.has(ControllerCapability::GetCapacity) {
        return true;
    }
    let prepared = prepare::prepare(shared, claim, class, Some(&local.node_name)).await;
    shared.memory.forget_pin(claim.metadata.uid.as_deref().unwrap_or_default());
    let request = match prepared {
        Ok(prepared) => prepared.request,
        Err(refusal) => {
            tracing::info!(claim = %claim_path(claim), error = %refusal,
                "capacity check failed; trying to become the owner anyway");
            return true;
        }
    };
    let required = request.capacity_range.as_ref().map(|r| r.required_bytes).unwrap_or_default();
    let mut available = Vec::new();
    for topology in capacity_topologies(request.accessibility_requirements.as_ref()) {
        let query = GetCapacityRequest {
            volume_capabilities: request.volume_capabilities.clone(),
            parameters: request.parameters.clone(),
            accessible_topology: topology,
        };
        match shared.csi.get_capacity(query).await {
            Ok(answer) => available.push(answer.available_capacity),
            Err(err) => {
                tracing::info!(claim = %claim_path(claim), error = %err,
                    "GetCapacity failed; trying to become the owner anyway");
                return true;
            }
        }
    }
    capacity_sufficient(required, &available)
}

/// A number in [0, 1) from the standard library's randomly keyed hasher: enough to spread the instances' waits.
fn jitter() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    hasher.write_u128(now.as_nanos());
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_is_a_fraction_that_varies() {
        let samples: Vec<f64> = (0..64).map(|_| jitter()).collect();
        assert!(samples.iter().all(|j| (0.0..1.0).contains(j)), "{samples:?}");
        let distinct: std::collections::BTreeSet<u64> = samples.iter().map(|j| j.to_bits()).collect();
        assert!(distinct.len() > 32, "waits would not spread: {samples:?}");
    }
}
