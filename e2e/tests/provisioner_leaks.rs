//! Sequences that leak a volume in upstream's csi-provisioner, driven against ours: each ends with the plugin's
//! ListVolumes empty and the in-flight journal empty.
//!
//! - external-provisioner#1469: CreateVolume answers for a claim deleted meanwhile, and the PV create meets a PV of
//!   the same name that does not hold the new volume (the claim's earlier PV, its volume deleted already and the
//!   object still being deleted). Upstream takes the `409 AlreadyExists` for success and the new volume leaks.
//! - The same, but the provisioner is killed before it learns the answer: recovery meets that PV too.
//! - A CreateVolume that timed out (having made the volume), then RESOURCE_EXHAUSTED, then the claim deleted:
//!   upstream forgets the claim on RESOURCE_EXHAUSTED, and the volume of the first call leaks.

use std::collections::BTreeMap;

use csi_sidecars_e2e::wait::eventually;
use csi_sidecars_e2e::worlds::provisioner::{ProvisionerWorld as World, TIMEOUT};
use k8s_openapi::api::core::v1::{CSIPersistentVolumeSource, ObjectReference, PersistentVolume, PersistentVolumeSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};

/// The test's own finalizer: it holds the claim's earlier PV in the middle of its deletion.
const HOLD: &str = "e2e.csi.test/hold";

/// A fault file the test rewrites, and the plugin flag that names it.
struct Faults {
    file: tempfile::NamedTempFile,
}

impl Faults {
    fn new(config: &str) -> Faults {
        let faults = Faults { file: tempfile::NamedTempFile::new().unwrap() };
        faults.set(config);
        faults
    }

    fn flag(&self) -> String {
        format!("--fault-config={}", self.file.path().display())
    }

    fn set(&self, config: &str) {
        std::fs::write(self.file.path(), config).unwrap();
    }
}

/// The claim's earlier PV as external-provisioner#1469 leaves it: named after the claim, bound to it, naming a
/// volume already deleted, and being deleted (held by the test's finalizer until it lets go).
async fn earlier_volume_being_deleted(world: &World, claim: &str, uid: &str) -> String {
    let name = format!("pvc-{uid}");
    let pv = PersistentVolume {
        metadata: ObjectMeta { name: Some(name.clone()), finalizers: Some(vec![HOLD.into()]), ..Default::default() },
        spec: Some(PersistentVolumeSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            capacity: Some(BTreeMap::from([("storage".to_string(), Quantity("1Mi".into()))])),
            claim_ref: Some(ObjectReference {
                kind: Some("PersistentVolumeClaim".into()),
                api_version: Some("v1".into()),
                namespace: Some(world.ns().into()),
                name: Some(claim.into()),
                uid: Some(uid.into()),
                ..Default::default()
            }),
            csi: Some(CSIPersistentVolumeSource {
                driver: world.driver.clone(),
                volume_handle: "volume-deleted-before".into(),
                ..Default::default()
            }),
            persistent_volume_reclaim_policy: Some("Delete".into()),
            ..Default::default()
        }),
        status: None,
    };
    world.volumes().create(&PostParams::default(), &pv).await.unwrap();
    world.volumes().delete(&name, &DeleteParams::default()).await.unwrap();
    name
}

async fn let_go(world: &World, pv: &str) {
    let patch = serde_json::json!({"metadata": {"finalizers": null}});
    let _ = world.volumes().patch(pv, &PatchParams::default(), &Patch::Merge(patch)).await;
}

async fn delete_claim(world: &World, name: &str) {
    world.claims().delete(name, &DeleteParams::default()).await.unwrap();
    eventually("the claim is gone", TIMEOUT, || async { world.claims().get_opt(name).await.unwrap().is_none() }).await;
}

async fn uid_of(world: &World, claim: &str) -> String {
    world.claims().get(claim).await.unwrap().metadata.uid.unwrap()
}

/// Nothing leaked: the plugin holds no volume and the journal no entry.
async fn nothing_left(world: &World) {
    world.no_plugin_volumes_left().await;
    eventually("the journal is empty", TIMEOUT, || async { world.journal().await.is_empty() }).await;
}

#[tokio::test]
async fn a_pv_in_the_way_that_does_not_hold_the_new_volume_is_no_success() {
    // The volume is made at once; its answer comes 4 s later.
    let faults = Faults::new(r#"{"CreateVolume": {"latency_ms": 4000, "after_work": true}}"#);
    let mut world = World::new("prov-409", &[faults.flag().as_str()]).await;
    let class = world.class("race", &[], "Delete").await;
    let provisioner = world.start_provisioner("csi-provisioner", &[]);

    world.claim("raced", &class, None, "ReadWriteOnce").await;
    eventually("the driver made the volume", TIMEOUT, || async { world.plugin_volumes().len() == 1 }).await;
    let uid = uid_of(&world, "raced").await;
    let earlier = earlier_volume_being_deleted(&world, "raced", &uid).await;
    delete_claim(&world, "raced").await;

    // The PV create meets the earlier PV (409): the volume just made is not that PV's, so it goes.
    world.no_plugin_volumes_left().await;
    let log = provisioner.log();
    assert!(log.contains("already exists"), "the provisioner met the PV in the way:\n{log}");
    let_go(&world, &earlier).await;
    nothing_left(&world).await;
}

#[tokio::test]
async fn recovery_after_a_crash_meets_a_pv_in_the_way_and_deletes_the_volume() {
    let faults = Faults::new(r#"{"CreateVolume": {"code": "DeadlineExceeded", "after_work": true}}"#);
    let mut world = World::new("prov-409-crash", &[faults.flag().as_str()]).await;
    let class = world.class("crash", &[], "Delete").await;
    let mut provisioner = world.start_provisioner("csi-provisioner", &[]);

    world.claim("crashed", &class, None, "ReadWriteOnce").await;
    eventually("the driver made the volume", TIMEOUT, || async { world.plugin_volumes().len() == 1 }).await;
    let uid = uid_of(&world, "crashed").await;
    eventually("the claim is in the journal", TIMEOUT, || async { world.journal().await.contains_key(&uid) }).await;
    provisioner.kill9();
    let earlier = earlier_volume_being_deleted(&world, "crashed", &uid).await;
    delete_claim(&world, "crashed").await;

    // The restarted provisioner finds the entry of a deleted claim and a PV of its name that does not hold its
    // volume (being deleted): the volume is found by repeating CreateVolume, and deleted.
    faults.set("{}");
    let _restarted = world.start_provisioner("csi-provisioner-restarted", &[]);
    world.no_plugin_volumes_left().await;
    let_go(&world, &earlier).await;
    nothing_left(&world).await;
}

#[tokio::test]
async fn resource_exhausted_after_a_timeout_keeps_the_claim_in_flight() {
    let faults = Faults::new(r#"{"CreateVolume": {"code": "DeadlineExceeded", "after_work": true}}"#);
    let mut world = World::new("prov-exhausted-live", &[faults.flag().as_str()]).await;
    let class = world.class("exhausted", &[], "Delete").await;
    let _provisioner = world.start_provisioner("csi-provisioner", &[]);

    world.claim("exhausted", &class, None, "ReadWriteOnce").await;
    eventually("the timed-out call made the volume", TIMEOUT, || async { world.plugin_volumes().len() == 1 }).await;
    // The next attempt is answered RESOURCE_EXHAUSTED: a definite "no" to this call, nothing about the first one.
    faults.set(r#"{"CreateVolume": {"code": "ResourceExhausted"}}"#);
    world.event("exhausted", "ProvisioningFailed", "code = ResourceExhausted").await;
    let uid = uid_of(&world, "exhausted").await;
    assert!(world.journal().await.contains_key(&uid), "the claim stays in flight after RESOURCE_EXHAUSTED");
    delete_claim(&world, "exhausted").await;

    faults.set("{}");
    nothing_left(&world).await;
}
