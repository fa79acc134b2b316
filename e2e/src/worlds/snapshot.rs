//! VolumeSnapshots in an e2e world: classes, snapshots and contents of the world's driver, and snapshot-controller
//! and csi-snapshotter started as ServiceAccounts with upstream's rules.
//!
//! snapshot-controller watches every namespace: the tests of one test binary that start it must take turns (a static
//! mutex in that binary), or each controller acts on the other test's snapshots.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Event, ObjectReference};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use snapshot_api::{
    DeletionPolicy, VolumeSnapshot, VolumeSnapshotClass, VolumeSnapshotContent, VolumeSnapshotContentSource,
    VolumeSnapshotContentSpec, VolumeSnapshotSource, VolumeSnapshotSpec,
};

use crate::processes::rbac::{Sidecar, SidecarIdentity};
use crate::processes::scenario::{Process, binary};
use crate::processes::sidecar_mode::sidecar_command;
use crate::wait::{eventually, wait_for};
use crate::worlds::provisioner::{ProvisionerWorld as World, TIMEOUT};

const DEFAULT_CLASS: &str = "snapshot.storage.kubernetes.io/is-default-class";

pub struct Snapshots<'a> {
    pub world: &'a World,
    classes: Vec<String>,
}

impl<'a> Snapshots<'a> {
    pub fn new(world: &'a World) -> Snapshots<'a> {
        Snapshots { world, classes: Vec::new() }
    }

    pub fn snapshots(&self) -> Api<VolumeSnapshot> {
        Api::namespaced(self.world.client.clone(), self.world.ns())
    }

    pub fn contents(&self) -> Api<VolumeSnapshotContent> {
        Api::all(self.world.client.clone())
    }

    /// A VolumeSnapshotClass of the test's driver, named after the namespace.
    pub async fn class(&mut self, suffix: &str, policy: DeletionPolicy, default: bool) -> String {
        let name = format!("{}-{suffix}", self.world.ns());
        let mut annotations = BTreeMap::new();
        if default {
            annotations.insert(DEFAULT_CLASS.to_string(), "true".to_string());
        }
        let class: VolumeSnapshotClass = serde_json::from_value(json!({
            "apiVersion": "snapshot.storage.k8s.io/v1",
            "kind": "VolumeSnapshotClass",
            "metadata": {"name": name, "annotations": annotations},
            "driver": self.world.driver,
            "deletionPolicy": policy,
        }))
        .unwrap();
        Api::<VolumeSnapshotClass>::all(self.world.client.clone())
            .create(&PostParams::default(), &class)
            .await
            .unwrap();
        self.classes.push(name.clone());
        name
    }

    /// Waits for an event with `reason` whose message contains `text`, on the snapshot or on the content bound to
    /// it (the sidecar reports on the content).
    pub async fn wait_event(&self, snapshot: &str, reason: &str, text: &str) {
        let events: Api<Event> = Api::all(self.world.client.clone());
        let snapshots = self.snapshots();
        eventually(&format!("{reason} event about snapshot {snapshot} mentioning {text:?}"), TIMEOUT, || async {
            let content = snapshots.get(snapshot).await.ok().and_then(|s| bound_to(&s));
            let mut objects = vec![snapshot.to_string()];
            objects.extend(content);
            for object in objects {
                let params = ListParams::default().fields(&format!("involvedObject.name={object},reason={reason}"));
                let listed = events.list(&params).await.map(|l| l.items).unwrap_or_default();
                if listed.iter().any(|e| e.message.as_deref().is_some_and(|m| m.contains(text))) {
                    return true;
                }
            }
            false
        })
        .await;
    }

    /// A Delete class of the test's driver with `parameters`.
    pub async fn class_with(&mut self, suffix: &str, parameters: &[(&str, &str)]) -> String {
        let name = self.class(suffix, DeletionPolicy::Delete, false).await;
        let parameters: BTreeMap<&str, &str> = parameters.iter().copied().collect();
        let patch = json!({"parameters": parameters});
        Api::<VolumeSnapshotClass>::all(self.world.client.clone())
            .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .unwrap();
        name
    }

    pub async fn delete_class(&mut self, name: &str) {
        let _ = Api::<VolumeSnapshotClass>::all(self.world.client.clone()).delete(name, &DeleteParams::default()).await;
        self.classes.retain(|c| c != name);
    }

    pub async fn snapshot_of_claim(&self, name: &str, claim: &str, class: Option<&str>) -> VolumeSnapshot {
        let source = VolumeSnapshotSource { persistent_volume_claim_name: Some(claim.into()), ..Default::default() };
        let spec = VolumeSnapshotSpec { source, volume_snapshot_class_name: class.map(str::to_string) };
        self.snapshots().create(&PostParams::default(), &VolumeSnapshot::new(name, spec)).await.unwrap()
    }

    pub async fn snapshot_of_content(&self, name: &str, content: &str) -> VolumeSnapshot {
        let source = VolumeSnapshotSource { volume_snapshot_content_name: Some(content.into()), ..Default::default() };
        let spec = VolumeSnapshotSpec { source, volume_snapshot_class_name: None };
        self.snapshots().create(&PostParams::default(), &VolumeSnapshot::new(name, spec)).await.unwrap()
    }

    /// A pre-provisioned content for `handle`, pointing at snapshot `snapshot` of the test namespace (no UID yet).
    pub async fn preprovisioned_content(&self, name: &str, snapshot: &str, handle: &str) -> String {
        let name = format!("{}-{name}", self.world.ns());
        let content = VolumeSnapshotContent::new(
            &name,
            VolumeSnapshotContentSpec {
                volume_snapshot_ref: ObjectReference {
                    name: Some(snapshot.into()),
                    namespace: Some(self.world.ns().into()),
                    ..Default::default()
                },
                deletion_policy: DeletionPolicy::Retain,
                driver: self.world.driver.clone(),
                volume_snapshot_class_name: None,
                source: VolumeSnapshotContentSource { volume_handle: None, snapshot_handle: Some(handle.into()) },
                source_volume_mode: None,
            },
        );
        self.contents().create(&PostParams::default(), &content).await.unwrap();
        name
    }

    /// What csi-snapshotter writes once the driver cut the snapshot.
    pub async fn cut(&self, content: &str, handle: &str, size: i64) {
        let status = json!({"status": {
            "snapshotHandle": handle, "readyToUse": true, "restoreSize": size, "creationTime": 1_800_000_000_000_000_000i64,
        }});
        self.contents().patch_status(content, &PatchParams::default(), &Patch::Merge(status)).await.unwrap();
    }

    /// What csi-snapshotter does once it deleted the storage snapshot: its finalizer comes off.
    pub async fn release_content(&self, content: &str) {
        let patch = json!({"metadata": {"finalizers": null}});
        let _ = self.contents().patch(content, &PatchParams::default(), &Patch::Merge(patch)).await;
    }

    pub async fn wait_snapshot(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&VolumeSnapshot) -> bool,
    ) -> VolumeSnapshot {
        let api = self.snapshots();
        wait_for(&format!("snapshot {name}: {what}"), TIMEOUT, || async {
            api.get(name).await.ok().filter(|s| check(s))
        })
        .await
    }

    pub async fn gone(&self, name: &str) {
        let api = self.snapshots();
        eventually(&format!("snapshot {name} is gone"), TIMEOUT, || async {
            matches!(api.get_opt(name).await, Ok(None))
        })
        .await;
    }
}

impl Drop for Snapshots<'_> {
    fn drop(&mut self) {
        let classes = std::mem::take(&mut self.classes);
        let namespace = self.world.ns().to_string();
        crate::control_plane::cluster::clean_up(move |client| async move {
            for class in classes {
                let _ = Api::<VolumeSnapshotClass>::all(client.clone()).delete(&class, &DeleteParams::default()).await;
            }
            // Contents are cluster-scoped: ours point at the test namespace.
            let contents: Api<VolumeSnapshotContent> = Api::all(client);
            if let Ok(list) = contents.list(&Default::default()).await {
                for content in list.items {
                    if content.spec.volume_snapshot_ref.namespace.as_deref() == Some(namespace.as_str()) {
                        let name = content.name_any();
                        let patch = json!({"metadata": {"finalizers": null}});
                        let _ = contents.patch(&name, &PatchParams::default(), &Patch::Merge(patch)).await;
                        let _ = contents.delete(&name, &DeleteParams::default()).await;
                    }
                }
            }
        });
    }
}

pub fn ready(snapshot: &VolumeSnapshot) -> bool {
    snapshot.status.as_ref().and_then(|s| s.ready_to_use) == Some(true)
}

pub fn bound_to(snapshot: &VolumeSnapshot) -> Option<String> {
    snapshot.status.as_ref()?.bound_volume_snapshot_content_name.clone()
}

/// Starts snapshot-controller as a ServiceAccount with upstream's rules. The process comes first so that it stops
/// before the identity's bindings go (a tuple drops its fields in order).
pub async fn start_snapshot_controller(world: &mut World, metrics_port: u16) -> (Process, SidecarIdentity) {
    start_snapshot_controller_with(world, metrics_port, &[]).await
}

/// [`start_snapshot_controller`] with `extra` flags (e.g. `--enable-distributed-snapshotting`).
pub async fn start_snapshot_controller_with(
    world: &mut World,
    metrics_port: u16,
    extra: &[&str],
) -> (Process, SidecarIdentity) {
    let identity =
        SidecarIdentity::create(&world.client, world.ns(), Sidecar::SnapshotController, world.scenario.dir()).await;
    let mut args = vec![
        identity.kubeconfig_flag(),
        format!("--http-endpoint=127.0.0.1:{metrics_port}"),
        "--retry-interval-start=200ms".to_string(),
        "--retry-interval-max=2s".to_string(),
        "-v=5".to_string(),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    let process = world.scenario.start("snapshot-controller", &binary("snapshot-controller"), &args);
    (process, identity)
}

/// Starts csi-snapshotter beside the world's plugin as a ServiceAccount with upstream's rules.
pub async fn start_csi_snapshotter(world: &mut World) -> (Process, SidecarIdentity) {
    let identity = SidecarIdentity::create(&world.client, world.ns(), Sidecar::Snapshotter, world.scenario.dir()).await;
    let args = vec![
        format!("--csi-address={}", world.socket.display()),
        identity.kubeconfig_flag(),
        "--retry-interval-start=200ms".to_string(),
        "--retry-interval-max=2s".to_string(),
        "-v=5".to_string(),
    ];
    let (program, args) = sidecar_command("csi-snapshotter", args);
    let process = world.scenario.start("csi-snapshotter", &program, &args);
    (process, identity)
}
