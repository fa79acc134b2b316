//! Bound block claims made before a sidecar starts, as a user's static provisioning would: a backend volume made
//! through one connection to the plugin (or none, for claims nobody will act on), a PV naming it and a claim
//! pre-bound to that PV, CREATORS at a time; done once kube-controller-manager has bound every claim. The scenarios of the resizer and of the snapshot sidecars
//! start from these.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use anyhow::Context;
use csi_client::proto::{self, volume_capability};
use csi_client::{CsiClient, Endpoint, OperationMetrics, connect};
use csi_sidecars_e2e::worlds::resizer::ResizerWorld;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, ObjectReference, PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeSpec, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::Api;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};

use crate::tracker::{CREATORS, Tracker, timeout_for};

/// The label that puts a claim in a group (`group` scenario): `g-<n>`.
pub const GROUP_LABEL: &str = "bench.csi-sidecars/group";

/// What the claims look like.
#[derive(Debug, Clone, Default)]
pub struct ClaimSet {
    pub count: usize,
    /// Backend volumes made with csictl; without, the PVs name volumes nobody will touch (`idle`).
    pub backend: bool,
    /// The VolumeAttributesClass of the PVs and claims (`modify` starts from one).
    pub attribute_class: Option<String>,
    /// Claims per group label (0: no label).
    pub group_size: usize,
}

/// A world for Bound claims: its plugin's capacity raised from the default 100Gi, which 100 claims of 1Gi grown to
/// 2Gi (or 50 and their snapshots) would exhaust.
pub async fn world(prefix: &str) -> ResizerWorld {
    ResizerWorld::new(prefix, &["--capacity=100Ti"]).await
}

/// The name of claim `i`.
pub fn claim_name(i: usize) -> String {
    format!("c-{i:05}")
}

pub fn storage(quantity: &str) -> BTreeMap<String, Quantity> {
    BTreeMap::from([("storage".to_string(), Quantity(quantity.into()))])
}

/// A claim is done once Bound with its class current (kube-controller-manager copies the PV's class when binding).
fn bound_with_class(claim: &PersistentVolumeClaim, _namespace: &str) -> Option<(String, bool)> {
    let status = claim.status.as_ref()?;
    let wanted = claim.spec.as_ref()?.volume_attributes_class_name.as_ref();
    let done =
        status.phase.as_deref() == Some("Bound") && status.current_volume_attributes_class_name.as_ref() == wanted;
    Some((claim.metadata.name.clone()?, done))
}

fn objects(
    world: &ResizerWorld,
    set: &ClaimSet,
    name: &str,
    volume_id: String,
) -> (PersistentVolume, PersistentVolumeClaim) {
    let ns = world.ns();
    let pv_name = format!("{ns}-{name}");
    let pv = PersistentVolume {
        metadata: ObjectMeta { name: Some(pv_name.clone()), ..Default::default() },
        spec: Some(PersistentVolumeSpec {
            capacity: Some(storage("1Gi")),
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            storage_class_name: Some(ns.to_string()),
            persistent_volume_reclaim_policy: Some("Retain".into()),
            volume_mode: Some("Block".into()),
            volume_attributes_class_name: set.attribute_class.clone(),
            claim_ref: Some(ObjectReference {
                namespace: Some(ns.to_string()),
                name: Some(name.to_string()),
                ..Default::default()
            }),
            csi: Some(CSIPersistentVolumeSource {
                driver: world.driver.clone(),
                volume_handle: volume_id,
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let index: usize = name.trim_start_matches("c-").parse().unwrap_or_default();
    let labels = (set.group_size > 0)
        .then(|| BTreeMap::from([(GROUP_LABEL.to_string(), format!("g-{}", index / set.group_size))]));
    let claim = PersistentVolumeClaim {
        metadata: ObjectMeta { name: Some(name.to_string()), labels, ..Default::default() },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            storage_class_name: Some(ns.to_string()),
            volume_name: Some(pv_name),
            volume_mode: Some("Block".into()),
            volume_attributes_class_name: set.attribute_class.clone(),
            resources: Some(VolumeResourceRequirements { requests: Some(storage("1Gi")), ..Default::default() }),
            ..Default::default()
        }),
        ..Default::default()
    };
    (pv, claim)
}

/// CreateVolume calls in flight at a time while making backend volumes (one connection to the plugin).
const BACKEND_CALLS: usize = 32;

/// One connection to the plugin at `socket`, as the bench's own client (not a sidecar's: no metrics of interest).
pub async fn plugin_client(socket: &std::path::Path) -> anyhow::Result<CsiClient> {
    let endpoint: Endpoint = socket.display().to_string().parse().context("plugin endpoint")?;
    let connection = connect(&endpoint, Duration::from_secs(30)).await.context("connect to the plugin")?;
    Ok(CsiClient::new(&connection, Duration::from_secs(30), OperationMetrics::default()))
}

/// Single-node writer, block: how the bench's backend volumes are made, and so how they are published.
pub fn block_capability() -> proto::VolumeCapability {
    proto::VolumeCapability {
        access_type: Some(volume_capability::AccessType::Block(volume_capability::BlockVolume {})),
        access_mode: Some(volume_capability::AccessMode {
            mode: volume_capability::access_mode::Mode::SingleNodeWriter as i32,
        }),
    }
}

/// A 1Gi single-node block volume named `name`; its id.
pub async fn backend_volume(client: &CsiClient, name: String) -> anyhow::Result<String> {
    let request = proto::CreateVolumeRequest {
        name: name.clone(),
        capacity_range: Some(proto::CapacityRange { required_bytes: 1 << 30, limit_bytes: 0 }),
        volume_capabilities: vec![block_capability()],
        ..Default::default()
    };
    let created = client.create_volume(request).await.with_context(|| format!("CreateVolume {name}"))?;
    Ok(created.volume.context("CreateVolume answered no volume")?.volume_id)
}

/// Makes the claims of `set` (1Gi, block) and waits until all are Bound; their names.
pub async fn bound_claims(world: &mut ResizerWorld, set: &ClaimSet) -> anyhow::Result<Vec<String>> {
    let ns = world.ns().to_string();
    let bound = Tracker::start(world.claims(), &ns, bound_with_class).await;
    let client = if set.backend { Some(plugin_client(&world.socket).await?) } else { None };
    let volume_ids: Vec<anyhow::Result<String>> = futures::stream::iter(0..set.count)
        .map(|i| {
            let (name, client) = (format!("{ns}-{}", claim_name(i)), client.clone());
            async move {
                match client {
                    Some(client) => backend_volume(&client, name).await,
                    None => Ok(format!("idle-{name}")),
                }
            }
        })
        .buffered(BACKEND_CALLS)
        .collect()
        .await;
    let mut pairs = Vec::new();
    for (i, volume_id) in volume_ids.into_iter().enumerate() {
        pairs.push(objects(world, set, &claim_name(i), volume_id?));
    }
    let (pvs, claims) = (world.pvs(), world.claims());
    let answers: Vec<anyhow::Result<String>> = futures::stream::iter(pairs)
        .map(|(pv, claim)| {
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
    bound.all_done(set.count, "claims Bound", timeout_for(set.count)).await?;
    Ok((0..set.count).map(claim_name).collect())
}

/// Makes the claims of `set` (no backend volumes: `idle`) as kube-controller-manager leaves them once bound, with its
/// PV binder paused meanwhile. The binder binds claims one at a time (one claim worker, three writes each): 10,000
/// pairs took it over two minutes. Written here CREATORS at a time, a pair is four writes (the claim, bound and marked
/// bind-completed; its status; the PV with the claim's UID; its status), and the binder, once resumed, finds nothing
/// to do.
pub async fn bound_claims_directly(world: &mut ResizerWorld, set: &ClaimSet) -> anyhow::Result<()> {
    anyhow::ensure!(!set.backend, "claims made directly have no backend volumes");
    let ns = world.ns().to_string();
    let pairs: Vec<_> =
        (0..set.count).map(|i| objects(world, set, &claim_name(i), format!("idle-{ns}-{}", claim_name(i)))).collect();
    let (pvs, claims) = (world.pvs(), world.claims());
    let paused = PausedBinder::pause()?;
    let answers: Vec<anyhow::Result<String>> = futures::stream::iter(pairs)
        .map(|(pv, claim)| write_bound(pvs.clone(), claims.clone(), pv, claim))
        .buffer_unordered(CREATORS)
        .collect()
        .await;
    drop(paused);
    let names: Vec<String> = answers.into_iter().collect::<anyhow::Result<_>>()?;
    world.volumes.extend(names);
    Ok(())
}

/// One claim and its PV, written bound; the PV's name.
async fn write_bound(
    pvs: Api<PersistentVolume>,
    claims: Api<PersistentVolumeClaim>,
    mut pv: PersistentVolume,
    mut claim: PersistentVolumeClaim,
) -> anyhow::Result<String> {
    let params = PostParams::default();
    let name = claim.metadata.name.clone().unwrap_or_default();
    claim.metadata.annotations =
        Some(BTreeMap::from([("pv.kubernetes.io/bind-completed".to_string(), "yes".to_string())]));
    let stored = claims.create(&params, &claim).await.context("create claim")?;
    let status = serde_json::json!({"status": {
        "phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"},
    }});
    claims.patch_status(&name, &PatchParams::default(), &Patch::Merge(status)).await.context("claim status")?;
    let pv_name = pv.metadata.name.clone().unwrap_or_default();
    if let Some(reference) = pv.spec.as_mut().and_then(|spec| spec.claim_ref.as_mut()) {
        reference.kind = Some("PersistentVolumeClaim".into());
        reference.api_version = Some("v1".into());
        reference.uid = stored.metadata.uid.clone();
        reference.resource_version = stored.metadata.resource_version.clone();
    }
    pvs.create(&params, &pv).await.context("create PV")?;
    let status = serde_json::json!({"status": {
        "phase": "Bound", "lastPhaseTransitionTime": crate::tracker::now(),
    }});
    pvs.patch_status(&pv_name, &PatchParams::default(), &Patch::Merge(status)).await.context("PV status")?;
    Ok(pv_name)
}

/// kube-controller-manager stopped (SIGSTOP) until dropped (SIGCONT): its watches resume, or it lists again.
struct PausedBinder {
    pid: String,
}

impl PausedBinder {
    fn pause() -> anyhow::Result<PausedBinder> {
        let kubeconfig = csi_sidecars_e2e::control_plane::cluster::Cluster::shared().kubeconfig();
        let file = kubeconfig.with_file_name("pids").join("kube-controller-manager.pid");
        let pid = std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
        let binder = PausedBinder { pid: pid.trim().to_string() };
        binder.signal("-STOP")?;
        Ok(binder)
    }

    fn signal(&self, signal: &str) -> anyhow::Result<()> {
        let status = std::process::Command::new("kill").args([signal, &self.pid]).status().context("running kill")?;
        anyhow::ensure!(status.success(), "kill {signal} {} failed", self.pid);
        Ok(())
    }
}

impl Drop for PausedBinder {
    fn drop(&mut self) {
        if let Err(err) = self.signal("-CONT") {
            crate::progress(&format!("kube-controller-manager could not be resumed: {err:#}"));
        }
    }
}

/// The user's edit of every claim (`patch`, a merge patch of the claim), CREATORS at a time; when each was answered.
pub async fn edit_claims(
    claims: &Api<PersistentVolumeClaim>,
    names: Vec<String>,
    patch: serde_json::Value,
) -> anyhow::Result<HashMap<String, Instant>> {
    let asked: Vec<anyhow::Result<(String, Instant)>> = futures::stream::iter(names)
        .map(|name| {
            let patch = Patch::Merge(patch.clone());
            async move {
                claims.patch(&name, &PatchParams::default(), &patch).await.context("edit claim")?;
                Ok((name, Instant::now()))
            }
        })
        .buffer_unordered(CREATORS)
        .collect()
        .await;
    asked.into_iter().collect()
}
