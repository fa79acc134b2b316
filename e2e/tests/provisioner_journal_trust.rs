//! The in-flight journal is untrusted input (docs/architecture.md#in-flight-journal): upstream's leader-election Role
//! lets whoever holds Lease verbs in the provisioner's namespace write the journal's Lease. Each test forges an entry
//! as such an identity would (only the leader-election Role's Lease verbs, nothing on claims, PVs or Secrets), then
//! starts the provisioner: the entry is rejected with a Warning on the Lease, and nothing it names is read or deleted.
//!
//! - An entry of a made-up claim naming the volume of a Bound claim: the Bound claim's volume stays.
//! - An entry of a made-up claim in another namespace, whose class reads the provisioner Secret from the claim's
//!   namespace (`${pvc.namespace}`): that namespace's Secret is never read, and no volume is made for it.

use std::collections::BTreeMap;

use csi_sidecars_e2e::control_plane::audit::requests_of;
use csi_sidecars_e2e::control_plane::namespace::TestNamespace;
use csi_sidecars_e2e::processes::rbac::{Rules, Sidecar, SidecarIdentity};
use csi_sidecars_e2e::wait::eventually;
use csi_sidecars_e2e::worlds::provisioner::{JOURNAL_ENTRY_PREFIX, ProvisionerWorld as World, TIMEOUT};
use k8s_openapi::ByteString;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};

/// The event reason of a rejected journal entry.
const REJECTED: &str = "InFlightEntryRejected";

/// A claim UID no claim has.
fn made_up_uid() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    let (a, b) = (hasher.finish(), hasher.finish().rotate_left(17) ^ 0x5bd1_e995);
    format!("{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}", a >> 32, a & 0xffff, b & 0xfff, (b >> 12) & 0xfff, b >> 16)
}

/// An identity holding exactly the leader-election Role upstream's RBAC gives every sidecar of the driver.
async fn forger(world: &World) -> kube::Client {
    let rules = Rules { cluster: Vec::new(), namespaced: Rules::of(Sidecar::Elector).namespaced };
    let identity: SidecarIdentity = world.identity_with("journal-forger", rules).await;
    let kubeconfig = kube::config::Kubeconfig::read_from(identity.kubeconfig()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await.unwrap();
    kube::Client::try_from(config).unwrap()
}

/// Adds `entry` under `uid` to the journal's Lease as the forger (get and update: the Role grants no patch),
/// creating the Lease when no provisioner has yet.
async fn forge(world: &World, forger: &kube::Client, uid: &str, entry: serde_json::Value) {
    let leases: Api<Lease> = Api::namespaced(forger.clone(), world.ns());
    let key = format!("{JOURNAL_ENTRY_PREFIX}{uid}");
    match leases.get_opt(&world.journal_name()).await.unwrap() {
        Some(mut lease) => {
            lease.metadata.annotations.get_or_insert_with(BTreeMap::new).insert(key, entry.to_string());
            leases.replace(&world.journal_name(), &PostParams::default(), &lease).await.unwrap();
        }
        None => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(world.journal_name()),
                    annotations: Some(BTreeMap::from([(key, entry.to_string())])),
                    ..Default::default()
                },
                spec: None,
            };
            leases.create(&PostParams::default(), &lease).await.unwrap();
        }
    }
}

/// The entry a provisioner would write for a claim `namespace/name` of `class`, plus `volume_id` when given.
fn entry(namespace: &str, name: &str, uid: &str, class: &str, volume_id: Option<&str>) -> serde_json::Value {
    let mut entry = serde_json::json!({
        "namespace": namespace,
        "name": name,
        "uid": uid,
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Mi"}},
            "storageClassName": class,
        },
    });
    if let Some(id) = volume_id {
        entry["volumeId"] = id.into();
    }
    entry
}

/// Waits until the provisioner has dealt with the entry: it is gone from the journal (a provisioner that trusted it
/// erases it too, once it has acted on it).
async fn dealt_with(world: &World, uid: &str) {
    eventually("the forged entry left the journal", TIMEOUT, || async { !world.journal().await.contains_key(uid) })
        .await;
}

/// The Warning on the journal's Lease naming the entry.
async fn rejected(world: &World, uid: &str) {
    world.event(&world.journal_name(), REJECTED, uid).await;
}

#[tokio::test]
async fn a_forged_entry_naming_a_bound_claims_volume_deletes_nothing() {
    let mut world = World::new("journal-forged-volume", &[]).await;
    let class = world.class("forged-volume", &[], "Delete").await;
    let mut provisioner = world.start_provisioner("csi-provisioner", &[]);
    world.claim("victim", &class, None, "ReadWriteOnce").await;
    let pv = world.bound("victim").await;
    let handle = world.volumes().get(&pv).await.unwrap().spec.unwrap().csi.unwrap().volume_handle;
    assert_eq!(world.plugin_volumes(), vec![handle.clone()]);
    provisioner.kill9();

    let forger = forger(&world).await;
    let uid = made_up_uid();
    forge(&world, &forger, &uid, entry(world.ns(), "ghost", &uid, &class, Some(&handle))).await;
    let _restarted = world.start_provisioner("csi-provisioner-restarted", &[]);

    dealt_with(&world, &uid).await;
    assert_eq!(world.plugin_volumes(), vec![handle], "the Bound claim's volume is still there");
    let claim = world.claims().get("victim").await.unwrap();
    assert_eq!(claim.status.and_then(|s| s.phase).as_deref(), Some("Bound"));
    rejected(&world, &uid).await;
}

#[tokio::test]
async fn a_forged_entry_of_another_namespace_reads_no_secret_there() {
    let mut world = World::new("journal-forged-secret", &[]).await;
    let other = TestNamespace::create(&world.client, "journal-forged-other").await;
    let secret_name = format!("creds-{}", &made_up_uid()[..8]);
    let secret = Secret {
        metadata: ObjectMeta { name: Some(secret_name.clone()), ..Default::default() },
        data: Some(BTreeMap::from([("password".to_string(), ByteString(b"not-for-the-forger".to_vec()))])),
        ..Default::default()
    };
    Api::<Secret>::namespaced(world.client.clone(), other.name())
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let parameters = [
        ("csi.storage.k8s.io/provisioner-secret-name", secret_name.as_str()),
        ("csi.storage.k8s.io/provisioner-secret-namespace", "${pvc.namespace}"),
    ];
    let class = world.class("forged-secret", &parameters, "Delete").await;

    let forger = forger(&world).await;
    let uid = made_up_uid();
    forge(&world, &forger, &uid, entry(other.name(), "ghost", &uid, &class, None)).await;
    let _provisioner = world.start_provisioner("csi-provisioner", &[]);

    dealt_with(&world, &uid).await;
    let reads: Vec<_> = requests_of(world.identity.username())
        .into_iter()
        .filter(|r| r.resource == "secrets" && r.name == secret_name)
        .collect();
    assert!(reads.is_empty(), "the provisioner read the other namespace's Secret: {reads:?}");
    assert!(world.plugin_volumes().is_empty(), "no volume was made for the forged entry");
    rejected(&world, &uid).await;
}
