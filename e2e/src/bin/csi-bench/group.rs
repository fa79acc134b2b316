//! `group`: G VolumeGroupSnapshots of M Bound block claims each (a label per group; made before the sidecars start),
//! created at once; done when each group is readyToUse (its M member VolumeSnapshots made and ready). Both sides run
//! snapshot-controller and csi-snapshotter with `--feature-gates=CSIVolumeGroupSnapshot=true` (ours as the e2e
//! group tests start them); an object is a group. `group_ceiling`: a bare client does, per group, the writes that
//! make it ready: create the group content and set its status, per member create a content and a snapshot and set
//! the snapshot's status, then the group's status (3 M + 3 writes), under the same limits and concurrency.

use std::collections::HashMap;
use std::time::Instant;

use crate::report::Run;
use anyhow::Context;
use csi_sidecars_e2e::worlds::group::GATE;
use csi_sidecars_e2e::worlds::resizer::ResizerWorld;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use snapshot_api::VolumeSnapshotContent;
use snapshot_api::{VolumeGroupSnapshot, VolumeGroupSnapshotClass, VolumeGroupSnapshotContent, VolumeSnapshot};

use crate::bound::{ClaimSet, GROUP_LABEL};
use crate::limiter::bare_client;
use crate::measure::{Measure, latencies};
use crate::sidecar::{Kind, Limits, Side};
use crate::snapshot::{Identities, Pair, Round, remove_all, snapshot_world};
use crate::tracker::now;
use crate::tracker::{Tracker, create_all, timeout_for};
use crate::{Step, progress};

/// Groups of one round, and members per group.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub groups: usize,
    pub members: usize,
}

/// The claims (labelled by group) and the world's VolumeGroupSnapshotClass.
async fn group_world(
    prefix: &str,
    shape: Shape,
) -> anyhow::Result<(csi_sidecars_e2e::worlds::resizer::ResizerWorld, String)> {
    let set = ClaimSet {
        count: shape.groups * shape.members,
        backend: true,
        group_size: shape.members,
        ..Default::default()
    };
    let (world, _) = snapshot_world(prefix, &set).await?;
    let class: VolumeGroupSnapshotClass = serde_json::from_value(json!({
        "apiVersion": "groupsnapshot.storage.k8s.io/v1",
        "kind": "VolumeGroupSnapshotClass",
        "metadata": {"name": world.ns()},
        "driver": world.driver,
        "deletionPolicy": "Delete",
    }))?;
    Api::<VolumeGroupSnapshotClass>::all(world.client.clone()).create(&PostParams::default(), &class).await?;
    let name = world.ns().to_string();
    Ok((world, name))
}

fn ready(group: &VolumeGroupSnapshot, _namespace: &str) -> Option<(String, bool)> {
    let ready = group.status.as_ref().and_then(|s| s.ready_to_use) == Some(true);
    Some((group.name_any(), ready))
}

/// Creates group `g-<i>` of every label at once; each as stored and when its create was answered.
async fn create_groups(
    api: &Api<VolumeGroupSnapshot>,
    groups: usize,
    class: &str,
) -> anyhow::Result<Vec<(VolumeGroupSnapshot, Instant)>> {
    let objects = (0..groups)
        .map(|i| {
            Ok(serde_json::from_value(json!({
                "apiVersion": "groupsnapshot.storage.k8s.io/v1",
                "kind": "VolumeGroupSnapshot",
                "metadata": {"name": format!("g-{i}")},
                "spec": {
                    "source": {"selector": {"matchLabels": {GROUP_LABEL: format!("g-{i}")}}},
                    "volumeGroupSnapshotClassName": class,
                },
            }))?)
        })
        .collect::<anyhow::Result<_>>()?;
    create_all(api, objects).await
}

/// One round of `group_ceiling` and `group` for both `sides` at `limits`, in one world (see [`Round`]).
pub async fn round(limits: &Limits, shape: Shape, sides: [Side; 2], step: Step) -> Round {
    let (mut world, class) = match group_world("bench-group", shape).await {
        Ok(made) => made,
        Err(err) => return Round::failed(&err, sides),
    };
    progress(&format!("  {} Bound claims ready", shape.groups * shape.members));
    let identities = Identities::create(&world).await;
    step.announce("ceiling");
    let ceiling = ceiling(&world, &class, limits, shape).await;
    let mut runs = Vec::new();
    for side in sides {
        step.announce(side.name());
        runs.push((side, group(&mut world, &identities, &class, side, limits, shape).await));
    }
    Round { ceiling, sides: runs }
}

/// `group` for `side`: every group at once, until each is ready.
async fn group(
    world: &mut ResizerWorld,
    identities: &Identities,
    class: &str,
    side: Side,
    limits: &Limits,
    shape: Shape,
) -> anyhow::Result<Run> {
    let pair = Pair::start(world, identities, side, limits, &[GATE]).await?;
    let ns = world.ns().to_string();
    let api: Api<VolumeGroupSnapshot> = Api::namespaced(world.client.clone(), &ns);
    let done = Tracker::start(api.clone(), &ns, ready).await;
    let measure = Measure::before(pair.watched()).await?;

    let t0 = Instant::now();
    let created = create_groups(&api, shape.groups, class).await?;
    let asked: HashMap<String, Instant> = created.into_iter().map(|(g, at)| (g.name_any(), at)).collect();
    let last = done.all_done(shape.groups, "groups ready", timeout_for(shape.groups * shape.members)).await?;
    let seconds = last.duration_since(t0).as_secs_f64();
    progress(&format!("  every group ready after {seconds:.1} s"));
    let mut run = measure.after(shape.groups, seconds, latencies(&asked, &done.done())).await;
    if let Ok(run) = &mut run {
        run.details.insert("members_per_group".to_string(), shape.members as f64);
    }
    drop(pair);
    remove_all(&world.client, &ns).await;
    run
}

/// The writes of one group ready, as a bare client makes them.
struct Writes {
    groups: Api<VolumeGroupSnapshot>,
    group_contents: Api<VolumeGroupSnapshotContent>,
    snapshots: Api<VolumeSnapshot>,
    contents: Api<VolumeSnapshotContent>,
    namespace: String,
    driver: String,
    class: String,
    members: usize,
}

impl Writes {
    fn object<K: serde::de::DeserializeOwned>(value: serde_json::Value) -> anyhow::Result<K> {
        Ok(serde_json::from_value(value)?)
    }

    async fn run(&self, group: VolumeGroupSnapshot, limiter: &crate::limiter::Limiter) -> anyhow::Result<()> {
        let (ns, name, uid) = (&self.namespace, group.name_any(), group.uid().unwrap_or_default());
        let handles: Vec<String> = (0..self.members).map(|m| format!("{ns}-{name}-{m}")).collect();
        let content_name = format!("groupsnapcontent-{uid}");
        let content: VolumeGroupSnapshotContent = Self::object(json!({
            "apiVersion": "groupsnapshot.storage.k8s.io/v1",
            "kind": "VolumeGroupSnapshotContent",
            "metadata": {"name": content_name},
            "spec": {
                "volumeGroupSnapshotRef": {"namespace": ns, "name": name, "uid": uid},
                "deletionPolicy": "Delete",
                "driver": self.driver,
                "volumeGroupSnapshotClassName": self.class,
                "source": {"volumeHandles": handles},
            },
        }))?;
        limiter.acquire().await;
        self.group_contents.create(&PostParams::default(), &content).await.context("create group content")?;
        limiter.acquire().await;
        let status = json!({"status": {
            "volumeGroupSnapshotHandle": format!("bench-{uid}"), "readyToUse": true, "creationTime": now(),
        }});
        self.group_contents.patch_status(&content_name, &PatchParams::default(), &Patch::Merge(status)).await?;
        for (m, handle) in handles.iter().enumerate() {
            let (member, member_content) = (format!("{name}-m{m}"), format!("{content_name}-m{m}"));
            let content: VolumeSnapshotContent = Self::object(json!({
                "apiVersion": "snapshot.storage.k8s.io/v1",
                "kind": "VolumeSnapshotContent",
                "metadata": {"name": member_content},
                "spec": {
                    "volumeSnapshotRef": {"namespace": ns, "name": member},
                    "deletionPolicy": "Delete",
                    "driver": self.driver,
                    "source": {"snapshotHandle": format!("bench-{handle}")},
                },
            }))?;
            limiter.acquire().await;
            self.contents.create(&PostParams::default(), &content).await.context("create member content")?;
            let snapshot: VolumeSnapshot = Self::object(json!({
                "apiVersion": "snapshot.storage.k8s.io/v1",
                "kind": "VolumeSnapshot",
                "metadata": {"name": member},
                "spec": {"source": {"volumeSnapshotContentName": member_content}},
            }))?;
            limiter.acquire().await;
            self.snapshots.create(&PostParams::default(), &snapshot).await.context("create member")?;
            limiter.acquire().await;
            let status = json!({"status": {
                "boundVolumeSnapshotContentName": member_content, "readyToUse": true, "creationTime": now(),
                "volumeGroupSnapshotName": name,
            }});
            self.snapshots.patch_status(&member, &PatchParams::default(), &Patch::Merge(status)).await?;
        }
        limiter.acquire().await;
        let status = json!({"status": {
            "boundVolumeGroupSnapshotContentName": content_name, "readyToUse": true, "creationTime": now(),
        }});
        self.groups
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
            .await
            .context("group status")?;
        Ok(())
    }
}

/// `group_ceiling` at `limits`: no sidecar runs; the groups are created, and the bare client makes each ready.
async fn ceiling(world: &ResizerWorld, class: &str, limits: &Limits, shape: Shape) -> anyhow::Result<Run> {
    let ns = world.ns().to_string();
    let groups: Api<VolumeGroupSnapshot> = Api::namespaced(world.client.clone(), &ns);
    let created: Vec<VolumeGroupSnapshot> =
        create_groups(&groups, shape.groups, class).await?.into_iter().map(|(g, _)| g).collect();
    let writes = Writes {
        groups,
        group_contents: Api::all(world.client.clone()),
        snapshots: Api::namespaced(world.client.clone(), &ns),
        contents: Api::all(world.client.clone()),
        namespace: ns.clone(),
        driver: world.driver.clone(),
        class: class.to_string(),
        members: shape.members,
    };
    let writes = &writes;
    let mut run = bare_client(created, limits, limits.concurrency(Kind::Snapshotter), |group, limiter| async move {
        writes.run(group, &limiter).await
    })
    .await?;
    run.details.insert("members_per_group".to_string(), shape.members as f64);
    progress(&format!("  {} groups made ready in {:.1} s", shape.groups, run.seconds));
    remove_all(&world.client, &ns).await;
    Ok(run)
}
