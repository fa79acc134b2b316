//! VolumeAttributesClasses through csi-provisioner and csi-resizer, as real processes under upstream's RBAC: a
//! ResourceQuota per class (KEP-3751's administrator quota: the cluster's resourcequota controller counts claims of
//! a class, the API server refuses one too many), and a driver without MODIFY_VOLUME, which cannot take a class.

use std::collections::BTreeMap;

use csi_sidecars_e2e::processes::rbac::{Sidecar, SidecarIdentity};
use csi_sidecars_e2e::processes::scenario::Process;
use csi_sidecars_e2e::processes::sidecar_mode::sidecar_command;
use csi_sidecars_e2e::wait::{eventually, wait_for};
use csi_sidecars_e2e::worlds::provisioner::{ProvisionerWorld as World, TIMEOUT, claim, plugin_volume_contexts};
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, ResourceQuota, ResourceQuotaSpec, ScopeSelector, ScopedResourceSelectorRequirement,
};
use k8s_openapi::api::storage::v1::VolumeAttributesClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::Api;
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;

const IOPS: &str = "hostpath.csi.k8s.io/iops";

/// VolumeAttributesClasses `<namespace>-<suffix>` of the world's driver, each with an `iops` parameter; deleted
/// when dropped.
struct AttributeClasses {
    names: Vec<String>,
}

impl AttributeClasses {
    async fn create(world: &World, classes: &[(&str, &str)]) -> AttributeClasses {
        let api: Api<VolumeAttributesClass> = Api::all(world.client.clone());
        let mut names = Vec::new();
        for (suffix, iops) in classes {
            let name = format!("{}-{suffix}", world.ns());
            let class = VolumeAttributesClass {
                metadata: ObjectMeta { name: Some(name.clone()), ..Default::default() },
                driver_name: world.driver.clone(),
                parameters: Some(BTreeMap::from([("iops".to_string(), iops.to_string())])),
            };
            api.create(&PostParams::default(), &class).await.unwrap();
            names.push(name);
        }
        AttributeClasses { names }
    }
}

impl Drop for AttributeClasses {
    fn drop(&mut self) {
        let names = std::mem::take(&mut self.names);
        csi_sidecars_e2e::control_plane::cluster::clean_up(move |client| async move {
            let api: Api<VolumeAttributesClass> = Api::all(client);
            for name in names {
                let _ = api.delete(&name, &DeleteParams::default()).await;
            }
        });
    }
}

/// csi-resizer beside the world's plugin, as a ServiceAccount with upstream's rules. The process comes first so
/// that it stops before the identity's bindings go.
async fn start_resizer(world: &mut World) -> (Process, SidecarIdentity) {
    let identity = SidecarIdentity::create(&world.client, world.ns(), Sidecar::Resizer, world.scenario.dir()).await;
    let args = vec![
        format!("--csi-address={}", world.socket.display()),
        identity.kubeconfig_flag(),
        "--retry-interval-start=500ms".to_string(),
        "--retry-interval-max=5s".to_string(),
        "-v=5".to_string(),
    ];
    let (program, args) = sidecar_command("csi-resizer", args);
    (world.scenario.start("csi-resizer", &program, &args), identity)
}

/// A ResourceQuota `name` of at most `claims` claims whose class (spec, current or target) is `class`.
fn class_quota(name: &str, class: &str, claims: &str) -> ResourceQuota {
    ResourceQuota {
        metadata: ObjectMeta { name: Some(name.into()), ..Default::default() },
        spec: Some(ResourceQuotaSpec {
            hard: Some(BTreeMap::from([("persistentvolumeclaims".to_string(), Quantity(claims.into()))])),
            scope_selector: Some(ScopeSelector {
                match_expressions: Some(vec![ScopedResourceSelectorRequirement {
                    scope_name: "VolumeAttributesClass".into(),
                    operator: "In".into(),
                    values: Some(vec![class.into()]),
                }]),
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Waits until the resourcequota controller reports `used` claims for the quota.
async fn quota_used(quotas: &Api<ResourceQuota>, name: &str, used: &str) {
    eventually(&format!("quota {name} uses {used} claims"), TIMEOUT, || async {
        let Ok(quota) = quotas.get(name).await else { return false };
        let counted = quota.status.and_then(|s| s.used).and_then(|u| u.get("persistentvolumeclaims").cloned());
        counted.is_some_and(|q| q.0 == used)
    })
    .await;
}

fn with_class(name: &str, storage_class: &str, attribute_class: &str) -> PersistentVolumeClaim {
    let mut object = claim(name, storage_class, None, "ReadWriteOnce");
    object.spec.as_mut().unwrap().volume_attributes_class_name = Some(attribute_class.into());
    object
}

/// The API server's refusal of a write over quota: 403, naming the quota.
fn assert_over_quota<T: std::fmt::Debug>(result: Result<T, kube::Error>, quota: &str, what: &str) {
    match result {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 403, "{what}: {status:?}");
            assert!(status.message.contains(&format!("exceeded quota: {quota}")), "{what}: {}", status.message);
        }
        other => panic!("{what} was not refused by the quota: {other:?}"),
    }
}

/// The administrator allows one gold claim per namespace. The provisioner makes the first with gold's
/// parameters; a second gold claim, and a silver claim moved to gold, are refused while the first exists (the seed's
/// user story: "the request is rejected"). Once the first is gone the resourcequota controller frees its place, the
/// silver claim moves to gold through csi-resizer, and the quotas follow the resizer's status writes: during the
/// modification the claim counts for both classes, after it for gold alone.
#[tokio::test]
async fn a_quota_per_attribute_class_limits_claims_through_provisioning_and_modification() {
    let mut world = World::new("vac-quota", &[]).await;
    let storage_class = world.class("data", &[], "Delete").await;
    let classes = AttributeClasses::create(&world, &[("silver", "1000"), ("gold", "5000")]).await;
    let (silver, gold) = (classes.names[0].clone(), classes.names[1].clone());
    let quotas: Api<ResourceQuota> = Api::namespaced(world.client.clone(), world.ns());
    quotas.create(&PostParams::default(), &class_quota("gold-claims", &gold, "1")).await.unwrap();
    quotas.create(&PostParams::default(), &class_quota("silver-claims", &silver, "5")).await.unwrap();
    // The admission plugin refuses every claim until the controller has computed the quota's usage.
    quota_used(&quotas, "gold-claims", "0").await;
    quota_used(&quotas, "silver-claims", "0").await;
    let _provisioner = world.start_provisioner("csi-provisioner", &[]);
    let _resizer = start_resizer(&mut world).await;

    let claims = world.claims();
    claims.create(&PostParams::default(), &with_class("first", &storage_class, &gold)).await.unwrap();
    let first_volume = world.bound("first").await;
    let handle = world.volumes().get(&first_volume).await.unwrap().spec.unwrap().csi.unwrap().volume_handle;
    quota_used(&quotas, "gold-claims", "1").await;
    let contexts = plugin_volume_contexts(&world.socket);
    assert_eq!(contexts.len(), 1, "{contexts:?}");
    assert_eq!(contexts[0][IOPS], "5000", "created with gold's parameters: {contexts:?}");

    let second_gold = claims.create(&PostParams::default(), &with_class("second", &storage_class, &gold)).await;
    assert_over_quota(second_gold, "gold-claims", "a second gold claim");
    claims.create(&PostParams::default(), &with_class("second", &storage_class, &silver)).await.unwrap();
    world.bound("second").await;
    quota_used(&quotas, "silver-claims", "1").await;
    let to_gold = json!({"spec": {"volumeAttributesClassName": gold}});
    let moved = claims.patch("second", &PatchParams::default(), &Patch::Merge(&to_gold)).await;
    assert_over_quota(moved, "gold-claims", "silver moved to gold");
    let second = claims.get("second").await.unwrap();
    assert_eq!(second.spec.unwrap().volume_attributes_class_name.as_deref(), Some(silver.as_str()));

    claims.delete("first", &DeleteParams::default()).await.unwrap();
    eventually("the first claim's volume is deleted", TIMEOUT, || async { !world.plugin_volumes().contains(&handle) })
        .await;
    quota_used(&quotas, "gold-claims", "0").await;

    claims.patch("second", &PatchParams::default(), &Patch::Merge(&to_gold)).await.unwrap();
    let second = wait_for("second claim: gold current, nothing in progress", TIMEOUT, || async {
        let claim = claims.get("second").await.ok()?;
        let status = claim.status.clone()?;
        let done = status.current_volume_attributes_class_name.as_deref() == Some(gold.as_str())
            && status.modify_volume_status.is_none();
        done.then_some(claim)
    })
    .await;
    let contexts = plugin_volume_contexts(&world.socket);
    assert_eq!(contexts.len(), 1, "{contexts:?}");
    assert_eq!(contexts[0][IOPS], "5000", "modified to gold's parameters: {contexts:?}");
    assert_eq!(second.spec.unwrap().volume_attributes_class_name.as_deref(), Some(gold.as_str()));
    quota_used(&quotas, "gold-claims", "1").await;
    // Silver is no longer the claim's current class once the resizer has written the status.
    quota_used(&quotas, "silver-claims", "0").await;
    let third = claims.create(&PostParams::default(), &with_class("third", &storage_class, &gold)).await;
    assert_over_quota(third, "gold-claims", "a gold claim beside the modified one");
}

/// A driver without MODIFY_VOLUME (the hostpath plugin accepting no mutable parameter) cannot take a class: the
/// claim that names one gets a ProvisioningFailed event saying so and no volume, while a claim without a class of
/// the same StorageClass is provisioned.
#[tokio::test]
async fn a_driver_without_modify_volume_refuses_claims_with_a_class() {
    let mut world = World::new("vac-unmodifiable", &["--accepted-mutable-parameters="]).await;
    let capabilities = world.csictl(&["capabilities"]);
    assert!(!capabilities.to_string().contains("MODIFY_VOLUME"), "the plugin must not offer it: {capabilities}");
    let storage_class = world.class("data", &[], "Delete").await;
    let classes = AttributeClasses::create(&world, &[("gold", "5000")]).await;
    let _provisioner = world.start_provisioner("csi-provisioner", &[]);

    world.claim_object(with_class("fast", &storage_class, &classes.names[0])).await;
    world.claim("plain", &storage_class, None, "ReadWriteOnce").await;
    world.bound("plain").await;
    world
        .event(
            "fast",
            "ProvisioningFailed",
            "CSI driver does not support VolumeAttributesClass: controller MODIFY_VOLUME capability is not reported",
        )
        .await;
    assert_eq!(world.plugin_volumes().len(), 1, "only the plain claim has a volume");
    let fast = world.claims().get("fast").await.unwrap();
    assert_eq!(fast.status.and_then(|s| s.phase).as_deref(), Some("Pending"));
}
