//! Switching back to upstream's csi-provisioner image: the documented steps
//! (docs/operations.md#switching-back-to-upstream) clear the provisioning-protection finalizer, which only our
//! provisioner adds and removes (as the in-flight journal's fallback), from claims that were in flight when ours
//! stopped, so that none is left undeletable; and they find the volumes of the claims the in-flight journal lists, then
//! delete the journal's Lease.

use csi_sidecars_e2e::wait::eventually;
use csi_sidecars_e2e::worlds::provisioner::{
    PROVISIONING_FINALIZER, ProvisionerWorld as World, TIMEOUT, has_finalizer,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};

/// The documented step, through the API: every claim that still carries the finalizer is written back without it
/// (an update, as `kubectl replace` does; read again and retried when the claim changed meanwhile, as
/// docs/operations.md says). Returns the claims it cleared.
async fn clear_leftover_finalizers(claims: &Api<PersistentVolumeClaim>) -> Vec<String> {
    let mut cleared = Vec::new();
    for claim in claims.list(&ListParams::default()).await.unwrap().items {
        let name = claim.metadata.name.clone().unwrap_or_default();
        for attempt in 1.. {
            let mut claim = claims.get(&name).await.unwrap();
            let Some(finalizers) = claim.metadata.finalizers.as_mut() else { break };
            let before = finalizers.len();
            finalizers.retain(|f| f != PROVISIONING_FINALIZER);
            if finalizers.len() == before {
                break;
            }
            match claims.replace(&name, &PostParams::default(), &claim).await {
                Ok(_) => {
                    cleared.push(name.clone());
                    break;
                }
                Err(kube::Error::Api(status)) if status.code == 409 && attempt < 5 => continue,
                Err(err) => panic!("clearing {name}: {err}"),
            }
        }
    }
    cleared
}

#[tokio::test]
async fn a_claim_in_flight_when_our_provisioner_stops_can_be_deleted_after_the_documented_step() {
    let faults = tempfile::NamedTempFile::new().unwrap();
    // The volume is created at once but the answer comes late: the provisioner stops with the claim in flight.
    std::fs::write(faults.path(), r#"{"CreateVolume": {"after_work": true, "latency_ms": 5000}}"#).unwrap();
    let fault_flag = format!("--fault-config={}", faults.path().display());
    let mut world = World::new("switch-back", &[fault_flag.as_str()]).await;
    let class = world.class("switch", &[], "Delete").await;
    // Its journal in a namespace its Role does not cover: the claim gets the fallback finalizer.
    let mut provisioner = world.start_provisioner("csi-provisioner", &["--leader-election-namespace=default"]);
    world.claim("in-flight", &class, None, "ReadWriteOnce").await;
    eventually("the claim is in flight", TIMEOUT, || async {
        let claim = world.claims().get("in-flight").await.unwrap();
        has_finalizer(&claim.metadata, PROVISIONING_FINALIZER) && world.plugin_volumes().len() == 1
    })
    .await;
    provisioner.kill9();

    // Upstream's provisioner does not know the finalizer: without the step, a deleted claim stays Terminating.
    world.claims().delete("in-flight", &DeleteParams::default()).await.unwrap();
    let stuck = world.claims().get("in-flight").await.unwrap();
    assert!(stuck.metadata.deletion_timestamp.is_some() && has_finalizer(&stuck.metadata, PROVISIONING_FINALIZER));

    assert_eq!(clear_leftover_finalizers(&world.claims()).await, ["in-flight"]);
    eventually("the claim is gone", TIMEOUT, || async { world.claims().get_opt("in-flight").await.unwrap().is_none() })
        .await;
    // The step's second half: the volume the driver made for the deleted claim is named `pvc-<claim UID>`, and is
    // deleted by hand (ours would have deleted it; upstream's cannot know). CreateVolume is idempotent by name, so
    // asking under that name finds it.
    let leftover = world.plugin_volumes();
    assert_eq!(leftover.len(), 1, "the in-flight volume is what docs/operations.md tells to look for");
    let name = format!("pvc-{}", stuck.metadata.uid.unwrap());
    let found = world.csictl(&["create-volume", &name, "--size", "1Mi"]);
    assert_eq!(found["volume_id"].as_str(), Some(leftover[0].as_str()), "the leftover volume is {name}");
    world.csictl(&["delete-volume", &leftover[0]]);
    world.no_plugin_volumes_left().await;
}

#[tokio::test]
async fn the_volume_of_a_claim_in_the_journal_is_found_by_the_documented_step() {
    let faults = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(faults.path(), r#"{"CreateVolume": {"after_work": true, "latency_ms": 5000}}"#).unwrap();
    let fault_flag = format!("--fault-config={}", faults.path().display());
    let mut world = World::new("switch-back-journal", &[fault_flag.as_str()]).await;
    let class = world.class("switch", &[], "Delete").await;
    let mut provisioner = world.start_provisioner("csi-provisioner", &[]);
    world.claim("in-flight", &class, None, "ReadWriteOnce").await;
    eventually("the claim is in flight", TIMEOUT, || async {
        !world.journal().await.is_empty() && world.plugin_volumes().len() == 1
    })
    .await;
    provisioner.kill9();

    // No finalizer: the claim goes at once, whoever runs next.
    let claim = world.claims().get("in-flight").await.unwrap();
    assert!(!has_finalizer(&claim.metadata, PROVISIONING_FINALIZER));
    world.claims().delete("in-flight", &DeleteParams::default()).await.unwrap();
    eventually("the claim is gone", TIMEOUT, || async { world.claims().get_opt("in-flight").await.unwrap().is_none() })
        .await;

    // The step: every entry of the journal names a claim UID; its volume is `pvc-<UID>`, found by CreateVolume
    // under that name (idempotent) and deleted by hand; then the Lease goes.
    let journal = world.journal().await;
    assert_eq!(journal.keys().collect::<Vec<_>>(), [claim.metadata.uid.as_ref().unwrap()]);
    let leftover = world.plugin_volumes();
    for uid in journal.keys() {
        let found = world.csictl(&["create-volume", &format!("pvc-{uid}"), "--size", "1Mi"]);
        assert_eq!(found["volume_id"].as_str(), Some(leftover[0].as_str()), "the leftover volume is pvc-{uid}");
        world.csictl(&["delete-volume", &leftover[0]]);
    }
    world.no_plugin_volumes_left().await;
    let leases: Api<Lease> = Api::namespaced(world.client.clone(), world.ns());
    leases.delete(&world.journal_name(), &DeleteParams::default()).await.unwrap();
    assert!(world.journal().await.is_empty());
}
