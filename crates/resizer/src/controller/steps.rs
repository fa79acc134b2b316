//! Carries out a [`Plan`] of [`crate::translate::steps`]: its writes, events, memory changes and logs, in order,
//! stopping at the first write that fails. A failed write is reported here, once for every plan.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use sidecar_runtime::Outcome;
use sidecar_runtime::api_error::is_conflict;

use super::{ClaimKey, Shared};
use crate::translate::steps::{Log, LogLevel, Plan, Step, Then, WriteFailure};

/// The claim and its PV as the sync's writes left them.
pub(super) struct Objects {
    pub claim: PersistentVolumeClaim,
    pub volume: PersistentVolume,
}

/// Carries out `plan`'s steps for the claim of `key`, applying memory changes with `remember`; returns what follows
/// them, or a retry with backoff once a write failed.
pub(super) async fn carry_out<M, C>(
    shared: &Shared,
    key: &ClaimKey,
    objects: &mut Objects,
    plan: Plan<M, C>,
    remember: impl Fn(M),
) -> Then<C> {
    for step in plan.steps {
        match step {
            Step::Remember(change) => remember(change),
            Step::PatchClaim { patch, adopt, failure } => match shared.patch_claim(&objects.claim, &patch).await {
                Ok(written) if adopt => objects.claim = written,
                Ok(_) => {}
                Err(error) => return write_failed(shared, key, &objects.claim, &failure, &error).await,
            },
            Step::PatchVolume { patch, failure } => match shared.patch_volume(&objects.volume, &patch).await {
                Ok(written) => objects.volume = written,
                Err(error) => return write_failed(shared, key, &objects.claim, &failure, &error).await,
            },
            Step::Event(event) => shared.publish(&objects.claim, &event).await,
            Step::Log(line) => log(key, &line),
        }
    }
    plan.then
}

/// Reports a failed write as `failure` says; the claim is retried with backoff.
async fn write_failed<C>(
    shared: &Shared,
    key: &ClaimKey,
    claim: &PersistentVolumeClaim,
    failure: &WriteFailure,
    error: &kube::Error,
) -> Then<C> {
    let report = failure.report(&error.to_string(), is_conflict(error));
    if let Some(warning) = report.warning {
        tracing::warn!(claim = %key, "{warning}");
    }
    if let Some(event) = report.event {
        shared.publish(claim, &event).await;
    }
    Then::Finish(Outcome::Retry)
}

fn log(key: &ClaimKey, line: &Log) {
    let text = &line.text;
    match line.level {
        LogLevel::Trace => tracing::trace!(claim = %key, "{text}"),
        LogLevel::Info => tracing::info!(claim = %key, "{text}"),
        LogLevel::Warn => tracing::warn!(claim = %key, "{text}"),
    }
}
