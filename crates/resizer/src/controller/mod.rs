//! The I/O half of the resizer: watch caches, one work queue keyed by claim, the driver calls and the writes. Every
//! rule lives in the pure modules ([`crate::translate::expansion`], [`crate::translate::modification`]); this module only reads the caches,
//! hands plain values to them and carries out what they say, in the documented order.
//!
//! Expansion and modification of a claim run in the same sync of the same queue key, one after the other, so they
//! never race (deliberate difference from upstream, which runs two controllers on two queues).

mod expand;
mod memory;
mod metrics;
mod modify;
mod stores;
mod written;

use sidecar_runtime::watch::CacheProvider;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use csi_client::CsiClient;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Api;
use kube::api::{Patch, PatchParams};
use sidecar_runtime::{EventRecorder, Outcome, QueueMetrics, RetryPolicy, WorkQueue};
use tokio_util::sync::CancellationToken;

pub use metrics::ResizerMetrics;

use crate::translate::claim::claim_key;
use crate::translate::expansion::decide::ExpansionConfig;
use crate::translate::modification::decide::ModificationConfig;
use crate::translate::names::EVENT_COMPONENT;
use crate::translate::patch::{ClaimStatusPatch, VolumePatch};
use crate::translate::secret_ref::SecretRef;
use memory::Memory;
use sidecar_runtime::PlannedEvent;
use stores::{Feeds, Stores};
use written::Written;

/// The queue key of a claim: `namespace/name`, as upstream.
pub type ClaimKey = String;

/// What the controller does and how.
#[derive(Clone, Debug)]
pub struct Options {
    pub workers: usize,
    pub retry: RetryPolicy,
    pub resync_period: Duration,
    /// `None`: the driver cannot expand (or expansion is off).
    pub expansion: Option<ExpansionConfig>,
    /// `None`: the driver cannot modify, or the VolumeAttributesClass gate is off.
    pub modification: Option<ModificationConfig>,
    /// `--handle-volume-inuse-error`: watch Pods.
    pub handle_volume_inuse_error: bool,
}

/// The events' source component: `external-resizer <driver>`, as upstream.
pub fn event_component(driver_name: &str) -> String {
    format!("{EVENT_COMPONENT} {driver_name}")
}

pub struct Controller {
    shared: Arc<Shared>,
    feeds: Feeds,
}

pub(crate) struct Shared {
    client: kube::Client,
    csi: CsiClient,
    events: EventRecorder,
    options: Options,
    stores: Stores,
    queue: WorkQueue<ClaimKey>,
    memory: Memory,
    metrics: ResizerMetrics,
    /// Claims (by key) and PVs (by name) as our writes left them, until the caches catch up.
    written_claims: Written<PersistentVolumeClaim>,
    written_volumes: Written<PersistentVolume>,
}

impl Controller {
    pub fn new(
        client: kube::Client,
        caches: &CacheProvider,
        csi: CsiClient,
        events: EventRecorder,
        options: Options,
        queue_metrics: Option<&QueueMetrics>,
        metrics: ResizerMetrics,
    ) -> Controller {
        let queue = WorkQueue::with_optional_metrics("resizer", options.retry, queue_metrics);
        let (stores, feeds) = Stores::new(caches, options.modification.is_some(), options.handle_volume_inuse_error);
        let memory = Memory::new(options.retry.max);
        let (written_claims, written_volumes) = (Written::default(), Written::default());
        let shared =
            Shared { client, csi, events, options, stores, queue, memory, metrics, written_claims, written_volumes };
        Controller { shared: Arc::new(shared), feeds }
    }

    /// Watches, waits for complete caches, then works until `stop` fires; returns once running syncs finished.
    pub async fn run(self, stop: CancellationToken) {
        let shared = self.shared;
        let watches = stores::watches(&shared, self.feeds);
        watches
            .serve(&stop, || async {
                let handler_shared = shared.clone();
                let resync_shared = shared.clone();
                // Upstream's informer resync: every claim is looked at again every `--resync-period`.
                let claims = move || resync_shared.stores.claims.state().iter().map(|c| claim_key(c)).collect();
                shared
                    .queue
                    .run_with_resync(shared.options.workers, stop.clone(), shared.options.resync_period, claims, {
                        move |key| {
                            let shared = handler_shared.clone();
                            async move { shared.sync(&key).await }
                        }
                    })
                    .await;
            })
            .await;
    }
}

impl Shared {
    /// One sync of a claim: expansion, then modification, with the claim as the first left it.
    async fn sync(&self, key: &ClaimKey) -> Outcome {
        let Some(claim) = self.written_claims.newest(key, self.stores.claim(key)) else { return Outcome::Done };
        let volume_name = crate::translate::claim::bound_volume_name(&claim).to_string();
        if volume_name.is_empty() {
            return Outcome::Done;
        }
        let Some(volume) = self.written_volumes.newest(&volume_name, self.stores.volume(&volume_name)) else {
            // Item 8: the PV may not be in the cache yet.
            tracing::debug!(claim = %key, volume = %volume_name, "volume not in the cache yet, retrying");
            return Outcome::Retry;
        };
        let mut claim = (*claim).clone();
        let mut volume = (*volume).clone();
        let mut outcome = Outcome::Done;
        if let Some(config) = &self.options.expansion {
            let (expanded, latest_claim, latest_volume) = self.expand(key, config, claim, volume).await;
            outcome = outcome.most_urgent(expanded);
            claim = latest_claim;
            volume = latest_volume;
        }
        if let Some(config) = &self.options.modification {
            outcome = outcome.most_urgent(self.modify(key, config, claim, volume).await);
        }
        outcome
    }

    fn now() -> Time {
        Time(k8s_openapi::jiff::Timestamp::now())
    }

    async fn publish(&self, claim: &PersistentVolumeClaim, event: &PlannedEvent) {
        self.events.record(claim, event).await;
    }

    /// Writes `patch` through the claim's `status` subresource; returns the claim as stored.
    async fn patch_claim(
        &self,
        claim: &PersistentVolumeClaim,
        patch: &ClaimStatusPatch,
    ) -> Result<PersistentVolumeClaim, kube::Error> {
        if patch.is_empty() {
            return Ok(claim.clone());
        }
        let namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), namespace);
        let name = crate::translate::claim::claim_name(claim);
        let patched =
            api.patch_status(name, &PatchParams::default(), &Patch::Strategic(patch.strategic_merge_patch())).await?;
        self.written_claims.record(claim_key(&patched), patched.clone());
        Ok(patched)
    }

    async fn patch_volume(
        &self,
        volume: &PersistentVolume,
        patch: &VolumePatch,
    ) -> Result<PersistentVolume, kube::Error> {
        if patch.is_empty() {
            return Ok(volume.clone());
        }
        let api: Api<PersistentVolume> = Api::all(self.client.clone());
        let name = crate::translate::claim::volume_name(volume);
        let patched =
            api.patch(name, &PatchParams::default(), &Patch::Strategic(patch.strategic_merge_patch())).await?;
        self.written_volumes.record(name.to_string(), patched.clone());
        Ok(patched)
    }

    /// A live GET of the Secret (as upstream, no cache). Values are never logged. The error names the Secret in
    /// client-go's words (`secrets "x" not found`), never the Debug form of the API's answer.
    async fn secret_data(&self, reference: Option<SecretRef>) -> Result<HashMap<String, String>, String> {
        let Some(reference) = reference else { return Ok(HashMap::new()) };
        sidecar_runtime::secrets::secret_data(&self.client, &reference.namespace, &reference.name)
            .await
            .map_err(|e| reference.read_error(sidecar_runtime::api_error::api_error_text(&e)))
    }
}

fn is_conflict(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 409)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_source_names_the_driver() {
        assert_eq!(event_component("hostpath.csi.k8s.io"), "external-resizer hostpath.csi.k8s.io");
    }
}
