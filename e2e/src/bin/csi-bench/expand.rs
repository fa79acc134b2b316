//! `expand`: N Bound block claims (backend volume, PV, claim; made before the sidecar starts; block, so no node
//! expansion is needed and the claim is done once the controller side is) all asked to grow from 1Gi
//! to 2Gi at once; done when the claim's status shows 2Gi. `expand_ceiling`: a bare client does the three writes the
//! resize protocol asks of a resizer (KEP-1790: the claim status marked `ControllerResizeInProgress` with the size
//! allocated, before the driver is called, so that a restart knows an expansion was under way; the PV capacity; the
//! claim status capacity, the mark cleared) under the same limits and concurrency.

use std::time::Instant;

use crate::report::Run;
use anyhow::Context;
use csi_sidecars_e2e::worlds::resizer::ResizerWorld;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::bound::{ClaimSet, bound_claims, edit_claims};
use crate::limiter::bare_client;
use crate::measure::{Measure, Watched, latencies};
use crate::progress;
use crate::sidecar::{self, Kind, Limits, Side};
use crate::tracker::{Judge, Tracker, timeout_for};

const GROWN: &str = "2Gi";

fn grown(claim: &PersistentVolumeClaim, _namespace: &str) -> Option<(String, bool)> {
    let capacity = claim.status.as_ref()?.capacity.as_ref()?.get("storage")?;
    Some((claim.metadata.name.clone()?, capacity.0 == GROWN))
}

fn claims(count: usize) -> ClaimSet {
    ClaimSet { count, backend: true, ..Default::default() }
}

/// One round of `expand` for `side` at `limits`.
pub async fn expand(side: Side, limits: &Limits, count: usize) -> anyhow::Result<Run> {
    let mut world = crate::bound::world("bench-expand").await;
    let names = bound_claims(&mut world, &claims(count)).await?;
    progress(&format!("  {count} Bound claims ready"));
    let edit = json!({"spec": {"resources": {"requests": {"storage": GROWN}}}});
    edit_round(&mut world, names, side, limits, edit, grown).await
}

/// The resizer of `side` started among the world's Bound claims `names`; every claim edited with `edit` at once,
/// and measured until `judge` says each is done.
pub async fn edit_round(
    world: &mut ResizerWorld,
    names: Vec<String>,
    side: Side,
    limits: &Limits,
    edit: serde_json::Value,
    judge: Judge<PersistentVolumeClaim>,
) -> anyhow::Result<Run> {
    let count = names.len();
    let username = world.identity.username().to_string();
    let process = sidecar::start_ready(world, side, Kind::Resizer, limits).await?;
    let ns = world.ns().to_string();
    let done = Tracker::start(world.claims(), &ns, judge).await;
    let measure = Measure::before(vec![Watched { process: &process, username }]).await?;

    let t0 = Instant::now();
    let asked = edit_claims(&world.claims(), names, edit).await?;
    let last = done.all_done(count, "claims done", timeout_for(count)).await?;
    let seconds = last.duration_since(t0).as_secs_f64();
    progress(&format!("  every claim done after {seconds:.1} s"));
    measure.after(count, seconds, latencies(&asked, &done.done())).await
}

/// One round of `expand_ceiling` at `limits`.
pub async fn ceiling(limits: &Limits, count: usize) -> anyhow::Result<Run> {
    let mut world = crate::bound::world("bench-expand-ceiling").await;
    let names = bound_claims(&mut world, &claims(count)).await?;
    let (pvs, claims) = (world.pvs(), world.claims());
    let ns = world.ns().to_string();
    let run = bare_client(names, limits, limits.concurrency(Kind::Resizer), |name, limiter| {
        let (pvs, claims, pv) = (pvs.clone(), claims.clone(), format!("{ns}-{name}"));
        async move {
            limiter.acquire().await;
            let resizing = json!({"status": {
                "allocatedResources": {"storage": GROWN},
                "allocatedResourceStatuses": {"storage": "ControllerResizeInProgress"},
            }});
            claims.patch_status(&name, &PatchParams::default(), &Patch::Merge(resizing)).await.context("resizing")?;
            limiter.acquire().await;
            let capacity = json!({"spec": {"capacity": {"storage": GROWN}}});
            pvs.patch(&pv, &PatchParams::default(), &Patch::Merge(capacity)).await.context("grow PV")?;
            limiter.acquire().await;
            let status = json!({"status": {"capacity": {"storage": GROWN}, "allocatedResourceStatuses": null}});
            claims.patch_status(&name, &PatchParams::default(), &Patch::Merge(status)).await.context("claim status")?;
            Ok(())
        }
    })
    .await?;
    progress(&format!("  {count} expansions written in {:.1} s", run.seconds));
    Ok(run)
}
