//! The quiet period: faults off, every process up; the world is observed until every invariant holds or the
//! time runs out, and the observation is what the last line reports.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use csi_sidecars_e2e::chaos::invariants::{
    Change, ClaimView, Findings, Observation, SnapshotView, VolumeView, quantity_bytes,
};
use csi_sidecars_e2e::processes::scenario::binary;
use csi_sidecars_e2e::worlds::provisioner::JOURNAL_ENTRY_PREFIX;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::{Api, Resource, ResourceExt};
use snapshot_api::{VolumeGroupSnapshot, VolumeGroupSnapshotContent, VolumeSnapshot};

use crate::world::{ProgressEvery, World};

const POLL_EVERY: Duration = Duration::from_secs(2);

/// What the run expects to find.
#[derive(Debug, Default)]
pub struct Expected {
    pub survivors: BTreeSet<String>,
    pub changes: BTreeMap<String, Change>,
    /// Whether VolumeSnapshotContents and VolumeGroupSnapshotContents exist to be listed (the snapshot CRDs are
    /// installed).
    pub snapshots: bool,
    pub surviving_snapshots: BTreeSet<String>,
    pub surviving_groups: BTreeMap<String, usize>,
    pub deleted_groups: BTreeSet<String>,
    pub deleted_snapshots: BTreeSet<String>,
}

/// Waits for the invariants; returns the last findings and when they first all held (None if they never did).
pub async fn quiesce(world: &World, expected: &Expected, timeout: Duration) -> (Findings, Option<Instant>) {
    let started = Instant::now();
    let mut progress = ProgressEvery::default();
    let mut findings = Findings::default();
    loop {
        match observe(world, expected).await {
            Ok(observation) => {
                findings = observation.findings();
                if findings.tally().clean() {
                    return (findings, Some(Instant::now()));
                }
                if progress.due() {
                    println!("{} quiet: not yet: {}", world.clock(), findings.tally());
                }
            }
            Err(error) => println!("{} quiet: cannot observe yet: {error:#}", world.clock()),
        }
        if started.elapsed() >= timeout {
            return (findings, None);
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

async fn observe(world: &World, expected: &Expected) -> anyhow::Result<Observation> {
    let backend_volumes = csictl(world, "list-volumes")?.iter().filter_map(|row| field(row, "volume_id")).collect();
    let snapshot_rows = csictl(world, "list-snapshots")?;
    let backend_snapshots = snapshot_rows.iter().filter_map(|row| field(row, "snapshot_id")).collect();
    let mut backend_groups: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for row in &snapshot_rows {
        if let (Some(group), Some(snapshot)) = (field(row, "group_snapshot_id"), field(row, "snapshot_id")) {
            backend_groups.entry(group).or_default().insert(snapshot);
        }
    }
    let pvs = Api::<PersistentVolume>::all(world.client.clone()).list(&Default::default()).await?;
    let volumes = pvs
        .items
        .into_iter()
        .filter_map(|pv| {
            let spec = pv.spec?;
            let csi = spec.csi.filter(|csi| csi.driver == world.driver)?;
            Some(VolumeView {
                name: pv.metadata.name.unwrap_or_default(),
                handle: csi.volume_handle,
                claim_uid: spec.claim_ref.and_then(|r| r.uid),
                phase: pv.status.and_then(|s| s.phase),
                reclaim_policy: spec.persistent_volume_reclaim_policy,
            })
        })
        .collect();
    let claims =
        Api::<PersistentVolumeClaim>::namespaced(world.client.clone(), world.ns()).list(&Default::default()).await?;
    let claims = claims
        .items
        .into_iter()
        .map(|claim| {
            let status = claim.status.unwrap_or_default();
            ClaimView {
                name: claim.metadata.name.unwrap_or_default(),
                uid: claim.metadata.uid.unwrap_or_default(),
                bound: status.phase.as_deref() == Some("Bound"),
                capacity_bytes: status.capacity.and_then(|c| c.get("storage").and_then(|q| quantity_bytes(&q.0))),
                current_class: status.current_volume_attributes_class_name,
            }
        })
        .collect();
    let mut observation = Observation {
        backend_volumes,
        backend_snapshots,
        backend_groups,
        volumes,
        claims,
        survivors: expected.survivors.clone(),
        changes: expected.changes.clone(),
        surviving_snapshots: expected.surviving_snapshots.clone(),
        surviving_groups: expected.surviving_groups.clone(),
        deleted_groups: expected.deleted_groups.clone(),
        deleted_snapshots: expected.deleted_snapshots.clone(),
        journal_entries: journal_entries(world).await?,
        calls: world.plugin_calls(),
        sidecar_of: world.sidecar_of.clone(),
        reused_pids: world.reused_pids.clone(),
        ..Observation::default()
    };
    if expected.snapshots {
        observation.snapshot_handles = snapshot_handles(world).await?;
        observation.group_handles = group_handles(world).await?;
        let snapshots = Api::<VolumeSnapshot>::namespaced(world.client.clone(), world.ns());
        observation.snapshots = snapshots.list(&Default::default()).await?.items.iter().map(snapshot_view).collect();
        let groups = Api::<VolumeGroupSnapshot>::namespaced(world.client.clone(), world.ns());
        observation.groups = groups.list(&Default::default()).await?.items.iter().map(group_view).collect();
    }
    Ok(observation)
}

/// Every entry of an in-flight journal in the run's namespace (where the provisioners keep their Leases), as
/// `<Lease>/<claim UID>`.
async fn journal_entries(world: &World) -> anyhow::Result<Vec<String>> {
    let leases = Api::<Lease>::namespaced(world.client.clone(), world.ns()).list(&Default::default()).await?;
    Ok(leases
        .items
        .iter()
        .flat_map(|lease| {
            let name = lease.name_any();
            lease
                .annotations()
                .keys()
                .filter_map(move |key| key.strip_prefix(JOURNAL_ENTRY_PREFIX).map(|uid| format!("{name}/{uid}")))
        })
        .collect())
}

fn snapshot_view(snapshot: &VolumeSnapshot) -> SnapshotView {
    let group_kind = VolumeGroupSnapshot::kind(&());
    SnapshotView {
        name: snapshot.name_any(),
        uid: snapshot.uid().unwrap_or_default(),
        ready: snapshot.status.as_ref().and_then(|s| s.ready_to_use) == Some(true),
        group_uid: snapshot.owner_references().iter().find(|o| o.kind == group_kind).map(|o| o.uid.clone()),
    }
}

fn group_view(group: &VolumeGroupSnapshot) -> SnapshotView {
    SnapshotView {
        name: group.name_any(),
        uid: group.uid().unwrap_or_default(),
        ready: group.status.as_ref().and_then(|s| s.ready_to_use) == Some(true),
        group_uid: None,
    }
}

/// The group snapshot handles of the driver's VolumeGroupSnapshotContents (status, or spec for pre-provisioned
/// ones).
async fn group_handles(world: &World) -> anyhow::Result<BTreeSet<String>> {
    let contents = Api::<VolumeGroupSnapshotContent>::all(world.client.clone()).list(&Default::default()).await?;
    Ok(contents
        .items
        .into_iter()
        .filter(|c| c.spec.driver == world.driver)
        .filter_map(|c| {
            let from_spec = c.spec.source.group_snapshot_handles.map(|h| h.volume_group_snapshot_handle);
            c.status.and_then(|s| s.volume_group_snapshot_handle).or(from_spec)
        })
        .collect())
}

/// The snapshot handles of the driver's VolumeSnapshotContents (status, or spec for pre-provisioned ones).
async fn snapshot_handles(world: &World) -> anyhow::Result<BTreeSet<String>> {
    let gvk = GroupVersionKind::gvk("snapshot.storage.k8s.io", "v1", "VolumeSnapshotContent");
    let api: Api<DynamicObject> = Api::all_with(world.client.clone(), &ApiResource::from_gvk(&gvk));
    let contents = api.list(&Default::default()).await?;
    Ok(contents
        .items
        .into_iter()
        .filter(|c| c.data["spec"]["driver"] == world.driver.as_str())
        .filter_map(|c| {
            let handle =
                c.data["status"]["snapshotHandle"].as_str().or(c.data["spec"]["source"]["snapshotHandle"].as_str());
            handle.map(str::to_string)
        })
        .collect())
}

/// Every row csictl lists from the plugin.
fn csictl(world: &World, verb: &str) -> anyhow::Result<Vec<serde_json::Value>> {
    let output = std::process::Command::new(binary("csictl"))
        .arg(format!("--endpoint=unix://{}", world.socket.display()))
        .args([verb, "-o", "json"])
        .output()
        .context("running csictl")?;
    if !output.status.success() {
        bail!("csictl {verb}: {}", String::from_utf8_lossy(&output.stderr).trim());
    }
    let rows: serde_json::Value = serde_json::from_slice(&output.stdout).context("csictl prints JSON")?;
    Ok(rows.as_array().cloned().unwrap_or_default())
}

/// A non-empty string field of a csictl row.
fn field(row: &serde_json::Value, name: &str) -> Option<String> {
    row[name].as_str().filter(|v| !v.is_empty()).map(str::to_string)
}
