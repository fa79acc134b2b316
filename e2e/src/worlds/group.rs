//! What the group snapshot scenarios (tests/group_snapshots*.rs) share: the snapshot sidecars started as
//! ServiceAccounts with upstream's rules (group snapshots on, their default), group snapshot classes and groups of a
//! test's namespace, member names computed independently of the code under test, and the plugin's view of its
//! group snapshots through csictl.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use snapshot_api::{VolumeGroupSnapshot, VolumeGroupSnapshotClass, VolumeGroupSnapshotContent, VolumeSnapshot};

use crate::processes::rbac::{Rules, Sidecar, SidecarIdentity};
use crate::processes::scenario::Process;
use crate::processes::sidecar_mode::sidecar_command;
use crate::wait::wait_for;
use crate::worlds::provisioner::{ProvisionerWorld as World, TIMEOUT, claim};

pub const IN_GROUP: &str = "snapshot.storage.kubernetes.io/volumesnapshot-in-group-protection";
pub const GROUP_BOUND: &str = "groupsnapshot.storage.kubernetes.io/volumegroupsnapshot-bound-protection";
/// The group gate set explicitly (GA and on by default since external-snapshotter v8.7.0; setting it is warned about).
pub const GATE: &str = "--feature-gates=CSIVolumeGroupSnapshot=true";
/// Group snapshots off: what a csi-snapshotter beside a csi-group-snapshotter of the same driver is given, so that
/// one group loop serves the driver's group contents.
pub const GATE_OFF: &str = "--feature-gates=CSIVolumeGroupSnapshot=false";

/// A sidecar of the snapshot pair as a ServiceAccount with upstream's rules, with its default flags: group snapshots
/// on. The process comes first so that it stops before the identity's bindings go.
pub async fn start(world: &mut World, sidecar: Sidecar, name: &str) -> (Process, SidecarIdentity) {
    start_with(world, sidecar, name, &[]).await
}

/// [`start`] with flags of its own.
pub async fn start_with(world: &mut World, sidecar: Sidecar, name: &str, extra: &[&str]) -> (Process, SidecarIdentity) {
    // csi-group-snapshotter has csi-snapshotter's rules, under an account of its own beside it.
    let identity =
        SidecarIdentity::with_rules(&world.client, world.ns(), name, Rules::of(sidecar), world.scenario.dir()).await;
    let args = sidecar_args(world, &identity, name, extra);
    let (program, args) = sidecar_command(name, args);
    let process = world.scenario.start(name, &program, &args);
    (process, identity)
}

/// The flags of the snapshot binary `name` running as `identity`, then `extra` (for a restart under the same
/// identity, started with a log name of its own).
pub fn sidecar_args(world: &World, identity: &SidecarIdentity, name: &str, extra: &[&str]) -> Vec<String> {
    let mut args = vec![
        identity.kubeconfig_flag(),
        "--retry-interval-start=200ms".to_string(),
        "--retry-interval-max=2s".to_string(),
        "-v=5".to_string(),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    if name != "snapshot-controller" {
        args.push(format!("--csi-address={}", world.socket.display()));
    }
    args
}

/// The group snapshots of one test's namespace, with a class of the world's driver that goes when this does.
pub struct Groups<'a> {
    pub world: &'a World,
    pub class: String,
}

impl Groups<'_> {
    pub fn groups(&self) -> Api<VolumeGroupSnapshot> {
        Api::namespaced(self.world.client.clone(), self.world.ns())
    }

    pub fn snapshots(&self) -> Api<VolumeSnapshot> {
        Api::namespaced(self.world.client.clone(), self.world.ns())
    }

    pub fn contents(&self) -> Api<VolumeGroupSnapshotContent> {
        Api::all(self.world.client.clone())
    }

    /// The driver's default VolumeGroupSnapshotClass, policy Delete, named after the namespace.
    pub async fn default_class(world: &World) -> Groups<'_> {
        Self::class(world, "group", "Delete", true).await
    }

    /// A VolumeGroupSnapshotClass `<namespace>-<suffix>` of the world's driver.
    pub async fn class<'w>(world: &'w World, suffix: &str, policy: &str, default: bool) -> Groups<'w> {
        let class = format!("{}-{suffix}", world.ns());
        let annotations =
            if default { json!({"groupsnapshot.storage.kubernetes.io/is-default-class": "true"}) } else { json!({}) };
        let object: VolumeGroupSnapshotClass = serde_json::from_value(json!({
            "apiVersion": "groupsnapshot.storage.k8s.io/v1",
            "kind": "VolumeGroupSnapshotClass",
            "metadata": {"name": class, "annotations": annotations},
            "driver": world.driver,
            "deletionPolicy": policy,
        }))
        .unwrap();
        Api::<VolumeGroupSnapshotClass>::all(world.client.clone())
            .create(&PostParams::default(), &object)
            .await
            .unwrap();
        Groups { world, class }
    }

    /// A group snapshot of the claims `selector` picks, with the driver's default class.
    pub async fn group(&self, name: &str, selector: serde_json::Value) -> VolumeGroupSnapshot {
        self.create(name, json!({"source": {"selector": selector}})).await
    }

    /// A group snapshot of the claims `selector` picks, with this class.
    pub async fn group_of_class(&self, name: &str, selector: serde_json::Value) -> VolumeGroupSnapshot {
        self.create(name, json!({"source": {"selector": selector}, "volumeGroupSnapshotClassName": self.class})).await
    }

    /// A group snapshot with this spec.
    pub async fn create(&self, name: &str, spec: serde_json::Value) -> VolumeGroupSnapshot {
        let object: VolumeGroupSnapshot = serde_json::from_value(json!({
            "apiVersion": "groupsnapshot.storage.k8s.io/v1",
            "kind": "VolumeGroupSnapshot",
            "metadata": {"name": name},
            "spec": spec,
        }))
        .unwrap();
        self.groups().create(&PostParams::default(), &object).await.unwrap()
    }

    pub async fn ready(&self, name: &str) -> VolumeGroupSnapshot {
        let api = self.groups();
        wait_for(&format!("group snapshot {name} ready"), TIMEOUT, || async {
            api.get(name).await.ok().filter(|g| g.status.as_ref().and_then(|s| s.ready_to_use) == Some(true))
        })
        .await
    }

    /// The VolumeSnapshots owned by the group, once there are `count` of them and all are ready.
    pub async fn ready_members(&self, group: &VolumeGroupSnapshot, count: usize) -> Vec<VolumeSnapshot> {
        let uid = group.uid().unwrap();
        let api = self.snapshots();
        wait_for(&format!("{count} ready members of {}", group.name_any()), TIMEOUT, || async {
            let members: Vec<VolumeSnapshot> = api
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .into_iter()
                .filter(|s| s.owner_references().iter().any(|o| o.uid == uid))
                .collect();
            let ready = members.iter().all(|s| s.status.as_ref().and_then(|s| s.ready_to_use) == Some(true));
            (members.len() == count && ready).then_some(members)
        })
        .await
    }

    /// Waits until the group snapshot is gone.
    pub async fn gone(&self, name: &str) {
        let api = self.groups();
        crate::wait::eventually(&format!("group snapshot {name} is gone"), TIMEOUT, || async {
            matches!(api.get_opt(name).await, Ok(None))
        })
        .await;
    }
}

impl Drop for Groups<'_> {
    fn drop(&mut self) {
        let class = self.class.clone();
        crate::control_plane::cluster::clean_up(move |client| async move {
            let _ = Api::<VolumeGroupSnapshotClass>::all(client).delete(&class, &DeleteParams::default()).await;
        });
    }
}

/// A claim of the world's storage class, with labels.
pub async fn labelled_claim(world: &World, name: &str, class: &str, labels: &[(&str, &str)]) {
    let mut object: PersistentVolumeClaim = claim(name, class, None, "ReadWriteOnce");
    object.metadata.labels = Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
    world.claim_object(object).await;
}

/// `snapshot-` and the hex SHA-256 of the group UID followed by the volume handle, computed by `sha256sum` so that
/// the check does not rely on the code under test.
pub fn member_name(group_uid: &str, volume_handle: &str) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run sha256sum");
    child.stdin.take().unwrap().write_all(format!("{group_uid}{volume_handle}").as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    let hex = String::from_utf8(output.stdout).unwrap();
    format!("snapshot-{}", hex.split_whitespace().next().unwrap())
}

/// The plugin's snapshots (ListSnapshots through csictl), each a JSON row with `snapshot_id`, `source_volume_id`
/// and `group_snapshot_id`.
pub fn plugin_snapshots(world: &World) -> Vec<serde_json::Value> {
    world.csictl(&["list-snapshots"]).as_array().cloned().unwrap_or_default()
}

/// How many of the plugin's snapshots belong to one storage group snapshot.
pub fn plugin_group_members(world: &World, group_snapshot_id: &str) -> usize {
    plugin_snapshots(world).iter().filter(|r| r["group_snapshot_id"] == group_snapshot_id).count()
}
