//! `provision`: N Immediate claims at once, the sidecar makes their PVs; then all deleted. `ceiling`: a bare client
//! writes the same PVs (pre-bound, same fields) under the same client limits and concurrency.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use crate::report::{ProcSample, Run};
use anyhow::Context;
use csi_sidecars_e2e::control_plane::audit::{requests_of, work_requests};
use csi_sidecars_e2e::worlds::provisioner::{ProvisionerWorld, claim, plugin_volumes};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, ObjectReference, PersistentVolume, PersistentVolumeClaim, PersistentVolumeSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{DeleteParams, ListParams, ObjectMeta, PostParams};

use crate::limiter::Limiter;
use crate::measure::latencies;
use crate::sidecar::{self, Kind, Limits, Side};
use crate::tracker::{CREATORS, Tracker, bound, timeout_for};
use crate::{counts_by_kind, progress};

/// The claim a PV is for, and whether it exists (a PV seen at all is done).
fn pv_of(pv: &PersistentVolume, namespace: &str) -> Option<(String, bool)> {
    let claim = pv.spec.as_ref()?.claim_ref.as_ref()?;
    (claim.namespace.as_deref() == Some(namespace)).then(|| (claim.name.clone().unwrap_or_default(), true))
}

/// Creates `count` claims of `class`, CREATORS at a time; returns when each create was answered.
async fn create_claims(
    world: &ProvisionerWorld,
    class: &str,
    count: usize,
) -> anyhow::Result<HashMap<String, Instant>> {
    let claims = world.claims();
    let answers: Vec<anyhow::Result<(String, Instant)>> = futures::stream::iter(0..count)
        .map(|i| {
            let claims = claims.clone();
            let object = claim(&format!("c-{i:05}"), class, None, "ReadWriteOnce");
            async move {
                let created = claims.create(&PostParams::default(), &object).await.context("create claim")?;
                Ok((created.metadata.name.unwrap_or_default(), Instant::now()))
            }
        })
        .buffer_unordered(CREATORS)
        .collect()
        .await;
    answers.into_iter().collect()
}

/// One round of `provision` for `side` at `limits`.
pub async fn provision(side: Side, limits: &Limits, count: usize) -> anyhow::Result<Run> {
    let mut world = ProvisionerWorld::new("bench-provision", &[]).await;
    let class = world.class("bench", &[], "Delete").await;
    let user = world.identity.username().to_string();
    let process = sidecar::start_ready(&mut world, side, Kind::Provisioner, limits).await?;
    let ns = world.ns().to_string();
    let pvs = Tracker::start(world.volumes(), &ns, pv_of).await;
    let claims = Tracker::start(world.claims(), &ns, bound).await;
    let before_requests = sidecar::quiet(&user, Duration::from_secs(10)).await;
    let cpu_before = ProcSample::of(process.pid()).context("sidecar gone before the work")?;

    let t0 = Instant::now();
    let created = create_claims(&world, &class, count).await?;
    progress(&format!("  {count} claims created in {:.1} s", t0.elapsed().as_secs_f64()));
    let last_pv = pvs.all_done(count, "PVs created", timeout_for(count)).await?;
    let seconds = last_pv.duration_since(t0).as_secs_f64();
    progress(&format!("  every PV exists after {seconds:.1} s"));
    let last_bound = claims.all_done(count, "claims Bound", timeout_for(count)).await?;
    let bound_s = last_bound.duration_since(t0).as_secs_f64();
    let provisioned_requests = sidecar::quiet(&user, Duration::from_secs(60)).await;
    let cpu_after = ProcSample::of(process.pid()).context("sidecar gone after provisioning")?;
    let requests = requests_of(&user);
    let provisioning = work_requests(&requests[before_requests..provisioned_requests]);

    let t_delete = Instant::now();
    world.claims().delete_collection(&DeleteParams::default(), &ListParams::default()).await?;
    all_gone(&pvs, &world.socket, count).await?;
    let delete_s = t_delete.elapsed().as_secs_f64();
    let deleted_requests = sidecar::quiet(&user, Duration::from_secs(30)).await;
    let deletion: usize = work_requests(&requests_of(&user)[provisioned_requests..deleted_requests]).values().sum();
    let peak = ProcSample::of(process.pid()).map(|s| s.peak_rss_kib);
    progress(&format!("  bound after {bound_s:.1} s, all deleted in {delete_s:.1} s"));

    Ok(Run {
        objects: count,
        seconds,
        latencies_ms: latencies(&created, &pvs.done()),
        cpu_ms: Some(cpu_after.cpu_ms_since(&cpu_before, crate::ticks())),
        peak_rss_kib: peak,
        api_requests: counts_by_kind(&provisioning),
        details: BTreeMap::from([
            ("bound_s".to_string(), bound_s),
            ("delete_s".to_string(), delete_s),
            ("delete_requests_per_object".to_string(), deletion as f64 / count as f64),
        ]),
    })
}

/// Waits until the tracked PVs of `count` deleted claims are gone, and every backend volume of the plugin at
/// `socket` with them.
pub async fn all_gone(pvs: &Tracker, socket: &std::path::Path, count: usize) -> anyhow::Result<()> {
    pvs.none_left("PVs deleted", timeout_for(count)).await?;
    let deadline = Instant::now() + timeout_for(count);
    while !plugin_volumes(socket).is_empty() {
        anyhow::ensure!(Instant::now() < deadline, "backend volumes left after deletion");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(())
}

/// A PV as a provisioner writes it for `claim`: pre-bound, CSI source of the world's driver, the class's policy.
fn provisioned_pv(world: &ProvisionerWorld, class: &str, claim: &PersistentVolumeClaim) -> PersistentVolume {
    let name = claim.metadata.name.clone().unwrap_or_default();
    let uid = claim.metadata.uid.clone().unwrap_or_default();
    PersistentVolume {
        metadata: ObjectMeta {
            name: Some(format!("pvc-{uid}")),
            annotations: Some(BTreeMap::from([("pv.kubernetes.io/provisioned-by".to_string(), world.driver.clone())])),
            ..Default::default()
        },
        spec: Some(PersistentVolumeSpec {
            capacity: Some(BTreeMap::from([("storage".to_string(), Quantity("1Mi".into()))])),
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            storage_class_name: Some(class.to_string()),
            persistent_volume_reclaim_policy: Some("Retain".into()),
            volume_mode: Some("Filesystem".into()),
            claim_ref: Some(ObjectReference {
                kind: Some("PersistentVolumeClaim".into()),
                api_version: Some("v1".into()),
                namespace: Some(world.ns().to_string()),
                name: Some(name.clone()),
                uid: Some(uid.clone()),
                resource_version: claim.metadata.resource_version.clone(),
                ..Default::default()
            }),
            csi: Some(CSIPersistentVolumeSource {
                driver: world.driver.clone(),
                volume_handle: format!("bench-{uid}"),
                volume_attributes: Some(BTreeMap::from([(
                    "storage.kubernetes.io/csiProvisionerIdentity".to_string(),
                    "bench".to_string(),
                )])),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// One round of `ceiling` at `limits`: the claims exist and wait (no sidecar runs); the bare client writes
/// their PVs with the sidecar's concurrency and client limits.
pub async fn ceiling(limits: &Limits, count: usize) -> anyhow::Result<Run> {
    let mut world = ProvisionerWorld::new("bench-ceiling", &[]).await;
    let class = world.class("bench", &[], "Retain").await;
    create_claims(&world, &class, count).await?;
    let claims = world.claims().list(&ListParams::default()).await?.items;
    let limiter = Limiter::new(limits.qps, limits.burst);
    let volumes = world.volumes();
    let t0 = Instant::now();
    let answers: Vec<anyhow::Result<f64>> = futures::stream::iter(claims.iter())
        .map(|claim| {
            let pv = provisioned_pv(&world, &class, claim);
            let (limiter, volumes) = (&limiter, volumes.clone());
            async move {
                limiter.acquire().await;
                volumes.create(&PostParams::default(), &pv).await.context("create PV")?;
                Ok(t0.elapsed().as_secs_f64() * 1000.0)
            }
        })
        .buffer_unordered(limits.concurrency(Kind::Provisioner))
        .collect()
        .await;
    let seconds = t0.elapsed().as_secs_f64();
    let latencies_ms = answers.into_iter().collect::<anyhow::Result<Vec<f64>>>()?;
    progress(&format!("  {count} PVs written in {seconds:.1} s"));
    world.claims().delete_collection(&DeleteParams::default(), &ListParams::default()).await?;
    Ok(Run { objects: count, seconds, latencies_ms, ..Default::default() })
}
