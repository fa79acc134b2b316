//! csi-provisioner under RBAC rules with one verb taken away: the failure names what is forbidden, reaches the user
//! as an event on the claim, stalls nothing else, and heals once the verb is granted again (no restart).
//!
//! Every other e2e test runs the sidecars with upstream's full rules (e2e/rbac/*.yaml); these take one verb away
//! with `Rules::without`.

use csi_sidecars_e2e::processes::rbac::{Rules, Sidecar};
use csi_sidecars_e2e::wait::eventually;
use csi_sidecars_e2e::worlds::provisioner::{ProvisionerWorld as World, TIMEOUT};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};

const SECRET_NAME: &str = "csi.storage.k8s.io/provisioner-secret-name";
const SECRET_NAMESPACE: &str = "csi.storage.k8s.io/provisioner-secret-namespace";

#[tokio::test]
async fn a_secret_the_provisioner_may_not_read_fails_its_claim_by_name_and_other_classes_are_served() {
    let mut world = World::new("rbac-secret", &[]).await;
    let ns = world.ns().to_string();
    world.secret("credentials", "password", "not-to-be-read").await;
    let guarded = world.class("guarded", &[(SECRET_NAME, "credentials"), (SECRET_NAMESPACE, &ns)], "Delete").await;
    let open = world.class("open", &[], "Delete").await;
    let rules = Rules::of(Sidecar::Provisioner).without("", "secrets", "get");
    let identity = world.identity_with("csi-provisioner-no-secrets", rules).await;
    let _provisioner = world.start_provisioner_as("csi-provisioner", &identity, &[]);

    world.claim("guarded", &guarded, None, "ReadWriteOnce").await;
    world.claim("open", &open, None, "ReadWriteOnce").await;
    world.bound("open").await;
    // The API server's Forbidden text names the verb, the resource and the identity; the event passes it on.
    let event = world.event("guarded", "ProvisioningFailed", r#"cannot get resource "secrets""#).await;
    let message = event.message.unwrap_or_default();
    assert!(message.contains("error getting secret credentials"), "{message}");
    assert!(message.contains("csi-provisioner-no-secrets"), "names the identity: {message}");
    let claim = world.claims().get("guarded").await.unwrap();
    assert_eq!(claim.status.and_then(|s| s.phase).as_deref(), Some("Pending"));
    assert_eq!(world.plugin_volumes().len(), 1, "only the open claim's volume was created");
}

#[tokio::test]
async fn a_forbidden_volume_create_is_reported_by_name_and_heals_once_granted() {
    let mut world = World::new("rbac-pv", &[]).await;
    let class = world.class("plain", &[], "Delete").await;
    let rules = Rules::of(Sidecar::Provisioner).without("", "persistentvolumes", "create");
    let identity = world.identity_with("csi-provisioner-no-pv-create", rules).await;
    let _provisioner = world.start_provisioner_as("csi-provisioner", &identity, &[]);

    world.claim("data", &class, None, "ReadWriteOnce").await;
    let event = world.event("data", "ProvisioningFailed", r#"cannot create resource "persistentvolumes""#).await;
    assert!(event.message.unwrap_or_default().contains("error saving volume"), "names the step that failed");

    // Granting the verb back is enough: the claim is retried with the volume the driver already made.
    let granted = serde_json::json!({"rules": Rules::of(Sidecar::Provisioner).cluster});
    Api::<ClusterRole>::all(world.client.clone())
        .patch(identity.cluster_role(), &PatchParams::default(), &Patch::Merge(&granted))
        .await
        .unwrap();
    world.bound("data").await;
    assert_eq!(world.plugin_volumes().len(), 1, "the retries made no second volume");
}

/// A PV create that keeps failing: the claim gets an event naming the failure on every try, the retries reuse the
/// one volume the driver made (CreateVolume is idempotent by name), and once the claim is deleted that volume is
/// deleted too. external-provisioner likewise saves indefinitely, from an in-memory queue lost on a restart
/// (sig-storage-lib-external-provisioner `CreateProvisionedPVLimiter`); the library's default store, which it does not
/// use, deletes the volume after a few failed saves.
#[tokio::test]
async fn a_volume_whose_pv_cannot_be_saved_is_kept_for_its_claim_and_deleted_with_it() {
    let mut world = World::new("rbac-pv-keeps-failing", &[]).await;
    let class = world.class("plain", &[], "Delete").await;
    let rules = Rules::of(Sidecar::Provisioner).without("", "persistentvolumes", "create");
    let identity = world.identity_with("csi-provisioner-no-pv-create", rules).await;
    let _provisioner = world.start_provisioner_as("csi-provisioner", &identity, &[]);

    world.claim("data", &class, None, "ReadWriteOnce").await;
    world.event("data", "ProvisioningFailed", "error saving volume").await;
    eventually("the PV create failed again and was reported again", TIMEOUT, || async {
        world.events_of("data").await.iter().any(|e| {
            e.reason.as_deref() == Some("ProvisioningFailed")
                && e.message.as_deref().is_some_and(|m| m.contains("error saving volume"))
                && e.count.unwrap_or(1) >= 2
        })
    })
    .await;
    assert_eq!(world.plugin_volumes().len(), 1, "the retries made no second volume");

    world.claims().delete("data", &DeleteParams::default()).await.unwrap();
    eventually("the claim is gone", TIMEOUT, || async { world.claims().get_opt("data").await.unwrap().is_none() })
        .await;
    world.no_plugin_volumes_left().await;
}
