//! `csi-sidecars`: several sidecars in one process against the real control plane. One process provisions, expands
//! and snapshots a claim, serving every sidecar's metrics on one endpoint and leading each sidecar's own Lease (or,
//! with `--leader-election-shared`, one Lease for all); and a sidecar that loses its Lease takes the whole process
//! down with a message naming it.

use std::time::Duration;

use csi_sidecars_e2e::control_plane::cluster::Cluster;
use csi_sidecars_e2e::control_plane::snapshot_crds::install_snapshot_crds;
use csi_sidecars_e2e::http::{free_port, http_get};
use csi_sidecars_e2e::processes::rbac::{Rules, Sidecar, SidecarIdentity};
use csi_sidecars_e2e::processes::scenario::{Process, binary};
use csi_sidecars_e2e::wait::wait_for;
use csi_sidecars_e2e::worlds::provisioner::{ProvisionerWorld as World, TIMEOUT};
use csi_sidecars_e2e::worlds::snapshot::{Snapshots, ready, start_snapshot_controller};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use snapshot_api::DeletionPolicy;

/// The sanitized driver name, as the Lease names carry it.
fn lease_suffix(driver: &str) -> String {
    driver.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '-' }).collect()
}

/// Starts `csi-sidecars --sidecars=<sidecars>` beside the world's plugin, as `identity`, leading in the namespace.
fn start(world: &mut World, identity: &SidecarIdentity, sidecars: &str, port: u16, extra: &[&str]) -> Process {
    let mut args = vec![
        format!("--sidecars={sidecars}"),
        format!("--csi-address={}", world.socket.display()),
        identity.kubeconfig_flag(),
        "--leader-election".to_string(),
        format!("--leader-election-namespace={}", world.ns()),
        "--retry-interval-start=500ms".to_string(),
        "--retry-interval-max=5s".to_string(),
        "--provisioner.immediate-topology=false".to_string(),
        format!("--http-endpoint=127.0.0.1:{port}"),
        "-v=5".to_string(),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    let ns = world.ns().to_string();
    world.scenario.start_with_env("csi-sidecars", &binary("csi-sidecars"), &args, &[("POD_NAMESPACE", &ns)])
}

async fn lease_holder(client: &kube::Client, namespace: &str, name: &str) -> String {
    let leases: Api<Lease> = Api::namespaced(client.clone(), namespace);
    wait_for(&format!("Lease {name} held"), TIMEOUT, || async {
        let holder = leases.get(name).await.ok()?.spec?.holder_identity?;
        (!holder.is_empty()).then_some(holder)
    })
    .await
}

#[tokio::test]
async fn one_process_provisions_expands_and_snapshots_a_claim() {
    install_snapshot_crds(&Cluster::shared().client().await).await;
    let mut world = World::new("combined", &[]).await;
    let sidecars = [Sidecar::Provisioner, Sidecar::Resizer, Sidecar::Snapshotter];
    let identity = world.identity_with("csi-sidecars", Rules::union(&sidecars)).await;
    let _controller = start_snapshot_controller(&mut world, free_port()).await;
    let port = free_port();
    let _sidecars = start(&mut world, &identity, "provisioner,resizer,snapshotter", port, &[]);

    // Provision.
    let class = world.class("expandable", &[], "Delete").await;
    let expandable = json!({"allowVolumeExpansion": true});
    Api::<StorageClass>::all(world.client.clone())
        .patch(&class, &PatchParams::default(), &Patch::Merge(expandable))
        .await
        .unwrap();
    world.claim("data", &class, None, "ReadWriteOnce").await;
    let volume = world.bound("data").await;

    // Expand: the resizer sees the claim the provisioner bound, from the same cache.
    let bigger = json!({"spec": {"resources": {"requests": {"storage": "2Mi"}}}});
    world.claims().patch("data", &PatchParams::default(), &Patch::Merge(bigger)).await.unwrap();
    let volumes: Api<PersistentVolume> = Api::all(world.client.clone());
    wait_for("the volume expanded to 2Mi", TIMEOUT, || async {
        let pv = volumes.get(&volume).await.ok()?;
        let capacity = pv.spec?.capacity?.get("storage")?.0.clone();
        (capacity == "2Mi").then_some(())
    })
    .await;

    // Snapshot.
    let mut snapshots = Snapshots::new(&world);
    let snapshot_class = snapshots.class("combined", DeletionPolicy::Delete, false).await;
    snapshots.snapshot_of_claim("data-snap", "data", Some(&snapshot_class)).await;
    snapshots.wait_snapshot("data-snap", "ready to use", ready).await;
    drop(snapshots);

    // One /metrics for all three: each one's CSI calls and queues under the upstream names.
    let metrics = http_get(port, "/metrics").await;
    for method in ["CreateVolume", "ControllerExpandVolume", "CreateSnapshot"] {
        let series = format!("method_name=\"/csi.v1.Controller/{method}\"");
        assert!(metrics.contains(&series), "no {method} in csi_sidecar_operations_seconds:\n{metrics}");
    }
    assert_eq!(metrics.matches("# TYPE workqueue_depth ").count(), 1, "one family for every queue");
    for queue in ["claims", "volumes", "resizer"] {
        assert!(metrics.contains(&format!("workqueue_adds_total{{name=\"{queue}\"}}")), "no queue {queue}");
    }
    let health = http_get(port, "/healthz/leader-election").await;
    assert_eq!(health, "ok");

    // Each sidecar leads its own upstream Lease.
    let suffix = lease_suffix(&world.driver);
    for lease in [suffix.clone(), format!("external-resizer-{suffix}"), format!("external-snapshotter-leader-{suffix}")]
    {
        lease_holder(&world.client, world.ns(), &lease).await;
    }
    let claim: PersistentVolumeClaim = world.claims().get("data").await.unwrap();
    let capacity = claim.status.and_then(|s| s.capacity).unwrap_or_default();
    assert!(capacity.contains_key("storage"), "the claim reports a capacity: {capacity:?}");
}

#[tokio::test]
async fn a_sidecar_that_loses_its_lease_stops_the_whole_process_naming_it() {
    let mut world = World::new("combined-lost", &[]).await;
    let identity = world.identity_with("csi-sidecars", Rules::union(&[Sidecar::Provisioner, Sidecar::Resizer])).await;
    let fast = [
        "--leader-election-lease-duration=4s",
        "--leader-election-renew-deadline=2s",
        "--leader-election-retry-period=500ms",
    ];
    let mut process = start(&mut world, &identity, "provisioner,resizer", free_port(), &fast);
    let suffix = lease_suffix(&world.driver);
    let resizer_lease = format!("external-resizer-{suffix}");
    lease_holder(&world.client, world.ns(), &suffix).await;
    lease_holder(&world.client, world.ns(), &resizer_lease).await;

    // Another replica takes the resizer's Lease: the provisioner's is untouched, yet nothing may half-run.
    let leases: Api<Lease> = Api::namespaced(world.client.clone(), world.ns());
    let now = MicroTime(Timestamp::from_microsecond(Timestamp::now().as_microsecond()).unwrap());
    let taken = json!({"spec": {
        "holderIdentity": "another-replica", "renewTime": now, "acquireTime": now, "leaseDurationSeconds": 3600,
    }});
    leases.patch(&resizer_lease, &PatchParams::default(), &Patch::Merge(taken)).await.unwrap();

    let status = process.wait_exit(Duration::from_secs(30)).await;
    assert_eq!(status, 1, "exit status");
    let log = process.log();
    assert!(log.contains("sidecar resizer: leader election lost"), "the message names the sidecar:\n{log}");
}

#[tokio::test]
async fn with_a_shared_lease_one_lease_covers_every_sidecar() {
    let mut world = World::new("combined-shared", &[]).await;
    let identity = world.identity_with("csi-sidecars", Rules::union(&[Sidecar::Provisioner, Sidecar::Resizer])).await;
    let _process = start(&mut world, &identity, "provisioner,resizer", free_port(), &["--leader-election-shared"]);
    let suffix = lease_suffix(&world.driver);
    lease_holder(&world.client, world.ns(), &format!("csi-sidecars-{suffix}")).await;
    let class = world.class("shared", &[], "Delete").await;
    world.claim("data", &class, None, "ReadWriteOnce").await;
    world.bound("data").await;
    let leases: Api<Lease> = Api::namespaced(world.client.clone(), world.ns());
    for own in [suffix.clone(), format!("external-resizer-{suffix}")] {
        assert!(leases.get_opt(&own).await.unwrap().is_none(), "no Lease {own} of its own");
    }
}
