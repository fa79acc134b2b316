//! `modify`: N Bound block claims of VolumeAttributesClass "silver" (made before the resizer starts) all switched to
//! "gold" at once; done when the claim's status says gold is current and nothing is in progress. `modify_ceiling`: a
//! bare client does the three writes KEP-3751 asks of a resizer (the claim status `modifyVolumeStatus` InProgress
//! toward gold, before the driver is called; the PV's `spec.volumeAttributesClassName`; the claim status: gold
//! current, `modifyVolumeStatus` cleared) under the same limits and concurrency.

use crate::report::Run;
use anyhow::Context;
use csi_sidecars_e2e::worlds::resizer::ResizerWorld;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::bound::{ClaimSet, bound_claims, edit_claims};
use crate::expand::edit_round;
use crate::limiter::bare_client;
use crate::progress;
use crate::sidecar::{Kind, Limits, Side};

/// The world's two classes: the claims start at silver and are moved to gold.
async fn classes(world: &mut ResizerWorld) -> (String, String) {
    let silver = world.create_attribute_class("silver", &[("iops", "1000")]).await;
    let gold = world.create_attribute_class("gold", &[("iops", "5000"), ("throughput", "50MiB/s")]).await;
    (silver, gold)
}

/// A claim is done once its current class is its spec's (gold) with nothing in progress.
fn modified(claim: &PersistentVolumeClaim, _namespace: &str) -> Option<(String, bool)> {
    let wanted = claim.spec.as_ref()?.volume_attributes_class_name.as_deref()?;
    let status = claim.status.as_ref()?;
    let done = wanted.ends_with("-gold")
        && status.current_volume_attributes_class_name.as_deref() == Some(wanted)
        && status.modify_volume_status.is_none();
    Some((claim.metadata.name.clone()?, done))
}

fn claims(count: usize, silver: String) -> ClaimSet {
    ClaimSet { count, backend: true, attribute_class: Some(silver), ..Default::default() }
}

/// One round of `modify` for `side` at `limits`.
pub async fn modify(side: Side, limits: &Limits, count: usize) -> anyhow::Result<Run> {
    let mut world = crate::bound::world("bench-modify").await;
    let (silver, gold) = classes(&mut world).await;
    let names = bound_claims(&mut world, &claims(count, silver)).await?;
    progress(&format!("  {count} Bound silver claims ready"));
    let edit = json!({"spec": {"volumeAttributesClassName": gold}});
    edit_round(&mut world, names, side, limits, edit, modified).await
}

/// One round of `modify_ceiling` at `limits`: the claims ask for gold (no resizer runs), the bare client finishes
/// each.
pub async fn ceiling(limits: &Limits, count: usize) -> anyhow::Result<Run> {
    let mut world = crate::bound::world("bench-modify-ceiling").await;
    let (silver, gold) = classes(&mut world).await;
    let names = bound_claims(&mut world, &claims(count, silver)).await?;
    edit_claims(&world.claims(), names.clone(), json!({"spec": {"volumeAttributesClassName": gold}})).await?;
    let (pvs, claims) = (world.pvs(), world.claims());
    let ns = world.ns().to_string();
    let run = bare_client(names, limits, limits.concurrency(Kind::Resizer), |name, limiter| {
        let (pvs, claims, pv, gold) = (pvs.clone(), claims.clone(), format!("{ns}-{name}"), gold.clone());
        async move {
            limiter.acquire().await;
            let pending = json!({"status": {"modifyVolumeStatus": {"targetVolumeAttributesClassName": gold, "status": "InProgress"}}});
            claims.patch_status(&name, &PatchParams::default(), &Patch::Merge(pending)).await.context("in progress")?;
            limiter.acquire().await;
            let class = json!({"spec": {"volumeAttributesClassName": gold}});
            pvs.patch(&pv, &PatchParams::default(), &Patch::Merge(class)).await.context("PV class")?;
            limiter.acquire().await;
            let status = json!({"status": {"currentVolumeAttributesClassName": gold, "modifyVolumeStatus": null}});
            claims.patch_status(&name, &PatchParams::default(), &Patch::Merge(status)).await.context("claim status")?;
            Ok(())
        }
    })
    .await?;
    progress(&format!("  {count} modifications written in {:.1} s", run.seconds));
    Ok(run)
}
