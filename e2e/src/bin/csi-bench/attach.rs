//! `attach`: N VolumeAttachments, one per PV (backend volumes and PVs made before the sidecar starts), created at
//! once as kube-controller-manager's attach-detach controller creates them; done when each is attached.
//! `attach_ceiling`: a bare client makes the three writes an attacher makes per VolumeAttachment (the PV's
//! finalizer, the VolumeAttachment's finalizer and node-ID annotation, its status `attached`) under the same limits
//! and concurrency.
//!
//! `attach_during_detach_burst`: D VolumeAttachments, written as an attacher leaves them once attached (and their
//! volumes published), are deleted at once while the driver takes BENCH_BURST_UNPUBLISH_MS per detach; right after,
//! A new ones are created. What is measured is the new ones' attach latency (p99) while the detaches are queued
//! (upstream's one queue puts them behind every detach; ours attaches from a queue of its own), and when the last
//! detach finished (`detach_s`). Its CPU and API requests per object count the detaches' work too. Sizes:
//! BENCH_BURST_DETACHES, BENCH_BURST_ATTACHES (and their `_AT_DEFAULT_LIMITS`), BENCH_BURST_UNPUBLISH_MS (1 s: a
//! cloud disk's detach takes seconds).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::report::Run;
use anyhow::Context;
use csi_sidecars_e2e::processes::scenario::{PLUGIN_NODE_ID, Process};
use csi_sidecars_e2e::worlds::attacher::AttacherWorld;
use futures::StreamExt;
use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::bound::{backend_volume, block_capability, plugin_client};
use crate::limiter::bare_client;
use crate::measure::{Measure, Watched, latencies};
use crate::progress;
use crate::sidecar::{self, Kind, Limits, Side};
use crate::tracker::{CREATORS, Tracker, timeout_for};

/// The shape of `attach_during_detach_burst`.
#[derive(Clone, Copy, Debug)]
pub struct Burst {
    pub detaches: usize,
    pub attaches: usize,
    pub unpublish_ms: u64,
}

/// A VolumeAttachment of the world (named `<namespace>-…`) and whether it is attached.
fn attached(va: &VolumeAttachment, namespace: &str) -> Option<(String, bool)> {
    let name = va.metadata.name.clone()?;
    let done = va.status.as_ref().is_some_and(|s| s.attached);
    name.starts_with(&format!("{namespace}-")).then_some((name, done))
}

/// A world whose plugin holds many volumes and logs little (its request log would cost the plugin more than the
/// attacher's work), its node registered, and `count` PVs with backend volumes; their names.
async fn world(prefix: &str, count: usize) -> anyhow::Result<(AttacherWorld, Vec<(String, String)>)> {
    let mut world = AttacherWorld::with_plugin_args(prefix, &["--capacity=100Ti", "-v=1"]).await;
    world.register_node().await;
    let client = plugin_client(&world.socket).await?;
    let ns = world.ns().to_string();
    let volume_ids: Vec<anyhow::Result<String>> = futures::stream::iter(0..count)
        .map(|i| backend_volume(&client, format!("{ns}-v-{i:05}")))
        .buffered(32)
        .collect()
        .await;
    let mut volumes = Vec::new();
    for (i, volume_id) in volume_ids.into_iter().enumerate() {
        volumes.push((format!("{ns}-v-{i:05}"), volume_id?));
    }
    let pvs = world.pvs();
    // Block PVs, as the backend volumes are made (`backend_volume`): the plugin refuses to publish a block volume
    // for a mount.
    let block = |mut pv: PersistentVolume| {
        pv.spec.get_or_insert_with(Default::default).volume_mode = Some("Block".into());
        pv
    };
    let objects: Vec<_> = volumes.iter().map(|(name, id)| block(world.csi_volume_object(name, id, None))).collect();
    let created: Vec<anyhow::Result<()>> = futures::stream::iter(objects)
        .map(|pv| {
            let pvs = pvs.clone();
            async move { pvs.create(&PostParams::default(), &pv).await.map(drop).context("create PV") }
        })
        .buffer_unordered(CREATORS)
        .collect()
        .await;
    created.into_iter().collect::<anyhow::Result<()>>()?;
    world.volumes.extend(volumes.iter().map(|(name, _)| name.clone()));
    Ok((world, volumes))
}

/// Creates a VolumeAttachment per PV (`<pv>-a`), CREATORS at a time; when each create was answered.
async fn create_attachments(world: &mut AttacherWorld, pvs: &[String]) -> anyhow::Result<HashMap<String, Instant>> {
    let api = world.attachments();
    let objects: Vec<_> = pvs.iter().map(|pv| world.attachment_object(&format!("{pv}-a"), pv, &[])).collect();
    world.attachments.extend(objects.iter().filter_map(|va| va.metadata.name.clone()));
    let answers: Vec<anyhow::Result<(String, Instant)>> = futures::stream::iter(objects)
        .map(|va| {
            let api = api.clone();
            async move {
                let created = api.create(&PostParams::default(), &va).await.context("create VolumeAttachment")?;
                Ok((created.metadata.name.unwrap_or_default(), Instant::now()))
            }
        })
        .buffer_unordered(CREATORS)
        .collect()
        .await;
    answers.into_iter().collect()
}

/// One round of `attach` for `side` at `limits`.
pub async fn attach(side: Side, limits: &Limits, count: usize) -> anyhow::Result<Run> {
    let (mut world, volumes) = world("bench-attach", count).await?;
    progress(&format!("  {count} PVs ready"));
    let username = world.identity.username().to_string();
    let process = sidecar::start_ready(&mut world.base, side, Kind::Attacher, limits).await?;
    let ns = world.ns().to_string();
    let done = Tracker::start(world.attachments(), &ns, attached).await;
    let measure = Measure::before(vec![Watched { process: &process, username }]).await?;

    let t0 = Instant::now();
    let pvs: Vec<String> = volumes.into_iter().map(|(name, _)| name).collect();
    let asked = create_attachments(&mut world, &pvs).await?;
    let last = done.all_done(count, "VolumeAttachments attached", timeout_for(count)).await?;
    let seconds = last.duration_since(t0).as_secs_f64();
    progress(&format!("  every VolumeAttachment attached after {seconds:.1} s"));
    measure.after(count, seconds, latencies(&asked, &done.done())).await
}

/// One round of `attach_ceiling` at `limits`.
pub async fn ceiling(limits: &Limits, count: usize) -> anyhow::Result<Run> {
    let (mut world, volumes) = world("bench-attach-ceiling", count).await?;
    let pvs: Vec<String> = volumes.into_iter().map(|(name, _)| name).collect();
    create_attachments(&mut world, &pvs).await?;
    let (pv_api, va_api) = (world.pvs(), world.attachments());
    let finalizer = format!("external-attacher/{}", world.driver.replace('.', "-"));
    let run = bare_client(pvs, limits, limits.concurrency(Kind::Attacher), |pv, limiter| {
        let (pv_api, va_api, finalizer) = (pv_api.clone(), va_api.clone(), finalizer.clone());
        async move {
            let params = PatchParams::default();
            limiter.acquire().await;
            add_finalizer(&pv_api, &pv, &finalizer).await?;
            limiter.acquire().await;
            let va = format!("{pv}-a");
            let metadata = json!({"metadata": {
                "finalizers": [finalizer],
                "annotations": {"csi.alpha.kubernetes.io/node-id": PLUGIN_NODE_ID},
            }});
            va_api.patch(&va, &params, &Patch::Merge(metadata)).await.context("VolumeAttachment finalizer")?;
            limiter.acquire().await;
            let status = json!({"status": {"attached": true}});
            va_api.patch_status(&va, &params, &Patch::Merge(status)).await.context("VolumeAttachment status")?;
            Ok(())
        }
    })
    .await?;
    progress(&format!("  {count} attachments written in {:.1} s", run.seconds));
    Ok(run)
}

/// Makes every PV's VolumeAttachment as an attacher leaves it once attached: published at the driver, the finalizers
/// on PV and VolumeAttachment, the node ID annotation, `attached` in the status.
async fn attached_already(world: &mut AttacherWorld, volumes: &[(String, String)]) -> anyhow::Result<Vec<String>> {
    let client = plugin_client(&world.socket).await?;
    let finalizer = format!("external-attacher/{}", world.driver.replace('.', "-"));
    let (pv_api, va_api) = (world.pvs(), world.attachments());
    let objects: Vec<_> = volumes
        .iter()
        .map(|(pv, id)| (id.clone(), world.attachment_object(&format!("{pv}-a"), pv, &[&finalizer])))
        .collect();
    let names: Vec<String> = objects.iter().filter_map(|(_, va)| va.metadata.name.clone()).collect();
    world.attachments.extend(names.clone());
    let written: Vec<anyhow::Result<()>> = futures::stream::iter(objects)
        .map(|(volume_id, mut va)| {
            let (client, pv_api, va_api, finalizer) =
                (client.clone(), pv_api.clone(), va_api.clone(), finalizer.clone());
            async move {
                let request = csi_client::proto::ControllerPublishVolumeRequest {
                    volume_id,
                    node_id: PLUGIN_NODE_ID.into(),
                    volume_capability: Some(block_capability()),
                    ..Default::default()
                };
                client.controller_publish_volume(request).await.context("publish")?;
                let pv = va.spec.source.persistent_volume_name.clone().unwrap_or_default();
                add_finalizer(&pv_api, &pv, &finalizer).await?;
                va.metadata.annotations =
                    Some([("csi.alpha.kubernetes.io/node-id".to_string(), PLUGIN_NODE_ID.to_string())].into());
                let name = va.metadata.name.clone().unwrap_or_default();
                va_api.create(&PostParams::default(), &va).await.context("create VolumeAttachment")?;
                let status = json!({"status": {"attached": true}});
                va_api.patch_status(&name, &PatchParams::default(), &Patch::Merge(status)).await.context("status")?;
                Ok(())
            }
        })
        .buffer_unordered(CREATORS)
        .collect()
        .await;
    written.into_iter().collect::<anyhow::Result<()>>()?;
    Ok(names)
}

/// The attacher's finalizer appended to a PV's list (which kube-controller-manager's pv-protection already holds), as
/// a JSON patch, as the attacher sends it.
async fn add_finalizer(pvs: &kube::Api<PersistentVolume>, pv: &str, finalizer: &str) -> anyhow::Result<()> {
    let add: json_patch::Patch =
        serde_json::from_value(json!([{"op": "add", "path": "/metadata/finalizers/-", "value": finalizer}]))?;
    pvs.patch(pv, &PatchParams::default(), &Patch::<()>::Json(add)).await.context("PV finalizer")?;
    Ok(())
}

/// One round of `attach_during_detach_burst` for `side` at `limits`.
pub async fn during_detach_burst(side: Side, limits: &Limits, burst: Burst) -> anyhow::Result<Run> {
    let (mut world, volumes) = world("bench-burst", burst.detaches + burst.attaches).await?;
    let (old, new) = volumes.split_at(burst.detaches);
    let detaching = attached_already(&mut world, old).await?;
    progress(&format!("  {} VolumeAttachments attached, {} PVs ready", detaching.len(), new.len()));
    let username = world.identity.username().to_string();
    let process: Process = sidecar::start_ready(&mut world.base, side, Kind::Attacher, limits).await?;
    let ns = world.ns().to_string();
    let done = Tracker::start(world.attachments(), &ns, attached).await;
    let measure = Measure::before(vec![Watched { process: &process, username }]).await?;

    world.set_faults(json!({"ControllerUnpublishVolume": {"latency_ms": burst.unpublish_ms}}));
    let t0 = Instant::now();
    let va_api = world.attachments();
    let deleted: Vec<kube::Result<()>> = futures::stream::iter(detaching.clone())
        .map(|name| {
            let va_api = va_api.clone();
            async move { va_api.delete(&name, &DeleteParams::default()).await.map(drop) }
        })
        .buffer_unordered(CREATORS)
        .collect()
        .await;
    deleted.into_iter().collect::<kube::Result<()>>().context("delete VolumeAttachments")?;
    progress(&format!("  {} VolumeAttachments deleted in {:.1} s", detaching.len(), t0.elapsed().as_secs_f64()));
    let t_attach = Instant::now();
    let pvs: Vec<String> = new.iter().map(|(name, _)| name.clone()).collect();
    let asked = create_attachments(&mut world, &pvs).await?;
    let fresh: HashMap<String, Instant> = asked.clone();
    let last = wait_fresh(&done, &fresh, timeout_for(burst.detaches)).await?;
    let attach_s = last.duration_since(t_attach).as_secs_f64();
    progress(&format!("  {} new VolumeAttachments attached after {attach_s:.1} s", pvs.len()));
    let gone = gone_after(&world, &detaching, timeout_for(burst.detaches)).await?;
    let detach_s = gone.duration_since(t0).as_secs_f64();
    progress(&format!("  every detach done after {detach_s:.1} s"));
    world.set_faults(json!({}));
    let mut run = measure.after(pvs.len(), attach_s, latencies(&asked, &done.done())).await?;
    run.details.insert("detach_s".into(), detach_s);
    Ok(run)
}

/// Waits until every VolumeAttachment of `fresh` is attached; when the last one was.
async fn wait_fresh(done: &Tracker, fresh: &HashMap<String, Instant>, timeout: Duration) -> anyhow::Result<Instant> {
    let started = Instant::now();
    loop {
        let seen = done.done();
        let times: Vec<Instant> = fresh.keys().filter_map(|name| seen.get(name).copied()).collect();
        if times.len() == fresh.len() {
            return Ok(times.into_iter().max().unwrap_or(started));
        }
        anyhow::ensure!(
            started.elapsed() < timeout,
            "{} of {} new attachments after {timeout:?}",
            times.len(),
            fresh.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until none of `names` exists; when that was seen.
async fn gone_after(world: &AttacherWorld, names: &[String], timeout: Duration) -> anyhow::Result<Instant> {
    let started = Instant::now();
    let api = world.attachments();
    loop {
        let listed = api.list(&Default::default()).await?;
        let left =
            listed.items.iter().filter(|va| va.metadata.name.as_ref().is_some_and(|n| names.contains(n))).count();
        if left == 0 {
            return Ok(Instant::now());
        }
        anyhow::ensure!(started.elapsed() < timeout, "{left} detaches left after {timeout:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
