//! `expand`: N Bound block claims (backend volume, PV, claim; made before the sidecar starts; block, so no node
//! expansion is needed and the claim is done once the controller side is) all asked to grow from 1Gi
//! to 2Gi at once; done when the claim's status shows 2Gi. `expand_ceiling`: a bare client does the two writes that
//! finish an expansion (PV capacity, claim status capacity) under the same limits and concurrency.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use anyhow::Context;
use csi_sidecars_e2e::audit::{requests_of, work_requests};
use csi_sidecars_e2e::bench::{ProcSample, Run};
use csi_sidecars_e2e::resizer_world::ResizerWorld;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, ObjectReference, PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeSpec, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::limiter::Limiter;
use crate::sidecar::{self, Kind, Limits, Side};
use crate::tracker::{CREATORS, Tracker, bound, timeout_for};
use crate::{counts_by_kind, progress};

const GROWN: &str = "2Gi";

fn size(quantity: &str) -> BTreeMap<String, Quantity> {
    BTreeMap::from([("storage".to_string(), Quantity(quantity.into()))])
}

fn grown(claim: &PersistentVolumeClaim, _namespace: &str) -> Option<(String, bool)> {
    let capacity = claim.status.as_ref()?.capacity.as_ref()?.get("storage")?;
    Some((claim.metadata.name.clone()?, capacity.0 == GROWN))
}

/// `count` Bound claims of 1Gi, with backend volumes if `backend` (else the PVs name volumes nobody will touch);
/// their names.
pub async fn bound_claims(world: &mut ResizerWorld, count: usize, backend: bool) -> anyhow::Result<Vec<String>> {
    let ns = world.ns().to_string();
    let bound = Tracker::start(world.claims(), &ns, bound).await;
    let mut objects = Vec::new();
    for i in 0..count {
        let name = format!("c-{i:05}");
        let volume_id = if backend {
            let created = world.csictl(&["create-volume", &format!("{ns}-{name}"), "--size", "1Gi", "--block"]);
            created["volume_id"].as_str().context("volume id")?.to_string()
        } else {
            format!("idle-{name}")
        };
        objects.push((name, volume_id));
    }
    let (pvs, claims) = (world.pvs(), world.claims());
    let driver = world.driver.clone();
    let answers: Vec<anyhow::Result<String>> = futures::stream::iter(objects)
        .map(|(name, volume_id)| {
            let pv_name = format!("{ns}-{name}");
            let pv = PersistentVolume {
                metadata: ObjectMeta { name: Some(pv_name.clone()), ..Default::default() },
                spec: Some(PersistentVolumeSpec {
                    capacity: Some(size("1Gi")),
                    access_modes: Some(vec!["ReadWriteOnce".into()]),
                    storage_class_name: Some(ns.clone()),
                    persistent_volume_reclaim_policy: Some("Retain".into()),
                    volume_mode: Some("Block".into()),
                    claim_ref: Some(ObjectReference {
                        namespace: Some(ns.clone()),
                        name: Some(name.clone()),
                        ..Default::default()
                    }),
                    csi: Some(CSIPersistentVolumeSource {
                        driver: driver.clone(),
                        volume_handle: volume_id,
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            };
            let claim = PersistentVolumeClaim {
                metadata: ObjectMeta { name: Some(name.clone()), ..Default::default() },
                spec: Some(PersistentVolumeClaimSpec {
                    access_modes: Some(vec!["ReadWriteOnce".into()]),
                    storage_class_name: Some(ns.clone()),
                    volume_name: Some(pv_name),
                    volume_mode: Some("Block".into()),
                    resources: Some(VolumeResourceRequirements { requests: Some(size("1Gi")), ..Default::default() }),
                    ..Default::default()
                }),
                ..Default::default()
            };
            let (pvs, claims) = (pvs.clone(), claims.clone());
            async move {
                pvs.create(&PostParams::default(), &pv).await.context("create PV")?;
                claims.create(&PostParams::default(), &claim).await.context("create claim")?;
                Ok(pv.metadata.name.unwrap_or_default())
            }
        })
        .buffer_unordered(CREATORS)
        .collect()
        .await;
    let names: Vec<String> = answers.into_iter().collect::<anyhow::Result<_>>()?;
    world.volumes.extend(names);
    bound.all_done(count, "claims Bound", timeout_for(count)).await?;
    Ok((0..count).map(|i| format!("c-{i:05}")).collect())
}

/// One round of `expand` for `side` at `limits`.
pub async fn expand(side: Side, limits: &Limits, count: usize) -> anyhow::Result<Run> {
    let mut world = ResizerWorld::new("bench-expand", &[]).await;
    let names = bound_claims(&mut world, count, true).await?;
    progress(&format!("  {count} Bound claims ready"));
    let user = world.identity.username().to_string();
    let process = sidecar::start_ready(&mut world, side, Kind::Resizer, limits).await?;
    let ns = world.ns().to_string();
    let done = Tracker::start(world.claims(), &ns, grown).await;
    let before_requests = sidecar::quiet(&user, Duration::from_secs(10)).await;
    let cpu_before = ProcSample::of(process.pid()).context("sidecar gone before the work")?;

    let claims = world.claims();
    let t0 = Instant::now();
    let asked: Vec<anyhow::Result<(String, Instant)>> = futures::stream::iter(names)
        .map(|name| {
            let claims = claims.clone();
            async move {
                let patch = json!({"spec": {"resources": {"requests": {"storage": GROWN}}}});
                claims.patch(&name, &PatchParams::default(), &Patch::Merge(patch)).await.context("grow claim")?;
                Ok((name, Instant::now()))
            }
        })
        .buffer_unordered(CREATORS)
        .collect()
        .await;
    let asked: HashMap<String, Instant> = asked.into_iter().collect::<anyhow::Result<_>>()?;
    let last = done.all_done(count, "claims grown", timeout_for(count)).await?;
    let seconds = last.duration_since(t0).as_secs_f64();
    let after_requests = sidecar::quiet(&user, Duration::from_secs(60)).await;
    let cpu_after = ProcSample::of(process.pid()).context("sidecar gone after the work")?;
    let requests = work_requests(&requests_of(&user)[before_requests..after_requests]);
    progress(&format!("  every claim grown after {seconds:.1} s"));
    let finished = done.done();
    let latencies_ms = asked
        .iter()
        .filter_map(|(name, at)| finished.get(name).map(|d| d.saturating_duration_since(*at).as_secs_f64() * 1000.0))
        .collect();
    Ok(Run {
        objects: count,
        seconds,
        latencies_ms,
        cpu_ms: Some(cpu_after.cpu_ms_since(&cpu_before, crate::ticks())),
        peak_rss_kib: ProcSample::of(process.pid()).map(|s| s.peak_rss_kib),
        api_requests: counts_by_kind(&requests),
        details: BTreeMap::new(),
    })
}

/// One round of `expand_ceiling` at `limits`.
pub async fn ceiling(limits: &Limits, count: usize) -> anyhow::Result<Run> {
    let mut world = ResizerWorld::new("bench-expand-ceiling", &[]).await;
    let names = bound_claims(&mut world, count, true).await?;
    let limiter = Limiter::new(limits.qps, limits.burst);
    let (pvs, claims) = (world.pvs(), world.claims());
    let ns = world.ns().to_string();
    let t0 = Instant::now();
    let answers: Vec<anyhow::Result<f64>> = futures::stream::iter(names)
        .map(|name| {
            let (limiter, pvs, claims, pv) = (&limiter, pvs.clone(), claims.clone(), format!("{ns}-{name}"));
            async move {
                limiter.acquire().await;
                let capacity = json!({"spec": {"capacity": {"storage": GROWN}}});
                pvs.patch(&pv, &PatchParams::default(), &Patch::Merge(capacity)).await.context("grow PV")?;
                limiter.acquire().await;
                let status = json!({"status": {"capacity": {"storage": GROWN}}});
                claims
                    .patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
                    .await
                    .context("claim status")?;
                Ok(t0.elapsed().as_secs_f64() * 1000.0)
            }
        })
        .buffer_unordered(limits.concurrency(Kind::Resizer))
        .collect()
        .await;
    let seconds = t0.elapsed().as_secs_f64();
    let latencies_ms = answers.into_iter().collect::<anyhow::Result<Vec<f64>>>()?;
    progress(&format!("  {count} expansions written in {seconds:.1} s"));
    Ok(Run { objects: count, seconds, latencies_ms, ..Default::default() })
}
