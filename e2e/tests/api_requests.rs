//! How many API requests the sidecars spend per object, counted from the control plane's audit log of the sidecar's
//! ServiceAccount: every request the API server answered, by verb and resource, leaving out Lease renewals and the
//! watches' lists. At upstream's default client limits (5 requests/s, burst 10) this is what bounds throughput, so
//! each test prints its table (docs/architecture.md#api-requests-per-object) and fails if a change adds requests.

use std::collections::BTreeMap;
use std::time::Duration;

use csi_sidecars_e2e::control_plane::audit::{Request, request_count_of, requests_of, work_requests};
use csi_sidecars_e2e::wait::eventually;
use csi_sidecars_e2e::worlds::provisioner::{ProvisionerWorld, TIMEOUT};
use csi_sidecars_e2e::worlds::resizer::ResizerWorld;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;

const CLAIMS: usize = 10;
/// Enough claims at once for the in-flight journal's group commit to show (one write covers every claim starting
/// together).
const PROVISIONING_CLAIMS: usize = 30;
/// Longer than the journal's removal delay (3 s): its last write may trail the claims' binding by that much.
const QUIET: Duration = Duration::from_secs(4);

/// The requests `username` made after the first `since`, by (verb, resource), and their total per object.
fn per_object(what: &str, username: &str, since: usize, objects: usize) -> (BTreeMap<(String, String), usize>, f64) {
    let requests: Vec<Request> = requests_of(username).into_iter().skip(since).collect();
    let counts = work_requests(&requests);
    let total: usize = counts.values().sum();
    let per = total as f64 / objects as f64;
    println!("{what}: {per:.2} requests per object ({total} for {objects})");
    for ((verb, resource), count) in &counts {
        println!("  {verb:>8} {resource:<45} {:.2}", *count as f64 / objects as f64);
    }
    (counts, per)
}

/// Waits until `username` has made no request for [`QUIET`] (events are sent in the background, behind the rate
/// limiter, and trailing writes such as the journal's removals may follow the state a test waits for).
async fn quiet(username: &str) {
    let mut last = usize::MAX;
    let mut quiet_since = std::time::Instant::now();
    let deadline = std::time::Instant::now() + TIMEOUT;
    loop {
        let now = work_requests(&requests_of(username)).values().sum::<usize>();
        if now != last {
            last = now;
            quiet_since = std::time::Instant::now();
        } else if quiet_since.elapsed() >= QUIET {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{username} never went quiet");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn provisioning_and_deletion_requests_per_claim() {
    let mut world = ProvisionerWorld::new("api-requests", &[]).await;
    let class = world.class("count", &[], "Delete").await;
    let provisioner = world.start_provisioner("csi-provisioner", &[]);
    let user = world.identity.username().to_string();
    quiet(&user).await;
    // Its caches were filled by streaming watch-lists (a watch with sendInitialEvents per kind), not by paged lists:
    // at 5 requests/s a list of 10,000 claims in pages of 500 took 7.5 s.
    let lists: Vec<String> = requests_of(&user).into_iter().filter(|r| r.verb == "list").map(|r| r.resource).collect();
    assert!(lists.is_empty(), "the provisioner listed {lists:?}");

    let before = request_count_of(&user);
    for i in 0..PROVISIONING_CLAIMS {
        world.claim(&format!("data-{i}"), &class, None, "ReadWriteOnce").await;
    }
    for i in 0..PROVISIONING_CLAIMS {
        world.bound(&format!("data-{i}")).await;
    }
    quiet(&user).await;
    let (counts, per_claim) = per_object("provisioning", &user, before, PROVISIONING_CLAIMS);
    assert_eq!(
        counts.get(&("create".into(), "persistentvolumes".into())),
        Some(&PROVISIONING_CLAIMS),
        "one PV per claim"
    );
    let claim_writes = counts
        .iter()
        .filter(|((verb, resource), _)| {
            resource == "persistentvolumeclaims" && matches!(verb.as_str(), "update" | "patch")
        })
        .count();
    assert_eq!(claim_writes, 0, "no claim is written: the journal replaced the finalizer");
    // PV create and the Provisioning / ProvisioningSucceeded events: 3, as upstream, plus the in-flight journal's
    // share (a few writes for all the claims together).
    assert!(per_claim <= 3.3, "provisioning costs {per_claim:.2} requests per claim");
    assert!(world.journal().await.is_empty(), "every journal entry is gone once the claims are bound");
    // How the journal grouped the claims: one line per write.
    for line in provisioner.log().lines().filter(|l| l.contains("journal written")) {
        println!("  {}", line.split_once("journal written").map_or(line, |(_, rest)| rest).trim());
    }

    let before = request_count_of(&user);
    world.claims().delete_collection(&DeleteParams::default(), &ListParams::default()).await.unwrap();
    let volumes = world.volumes();
    let ns = world.ns().to_string();
    eventually("every PV deleted", TIMEOUT, || async {
        let pvs = volumes.list(&ListParams::default()).await.unwrap().items;
        !pvs.iter().any(|pv| {
            pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()).and_then(|r| r.namespace.as_deref()) == Some(&ns)
        })
    })
    .await;
    world.no_plugin_volumes_left().await;
    quiet(&user).await;
    let (_, per_claim) = per_object("deletion", &user, before, PROVISIONING_CLAIMS);
    // The PV delete and the finalizer patch: 2, as upstream.
    assert!(per_claim <= 2.5, "deletion costs {per_claim:.2} requests per claim");
}

#[tokio::test]
async fn expansion_requests_per_claim() {
    let mut world = ResizerWorld::new("api-requests-rsz", &[]).await;
    let _resizer = world.start_resizer("csi-resizer", &[]);
    let user = world.identity.username().to_string();
    for i in 0..CLAIMS {
        world.bound_claim(&format!("data-{i}"), true, None).await;
    }
    quiet(&user).await;

    let before = request_count_of(&user);
    let grow = json!({"spec": {"resources": {"requests": {"storage": "2Gi"}}}});
    for i in 0..CLAIMS {
        world.claims().patch(&format!("data-{i}"), &PatchParams::default(), &Patch::Merge(&grow)).await.unwrap();
    }
    let volumes = world.pvs();
    let ns = world.ns().to_string();
    eventually("every volume expanded", TIMEOUT, || async {
        let items = volumes.list(&ListParams::default()).await.unwrap().items;
        let ours: Vec<_> = items
            .iter()
            .filter(|pv| {
                pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()).and_then(|r| r.namespace.as_deref()) == Some(&ns)
            })
            .collect();
        ours.len() == CLAIMS
            && ours.iter().all(|pv| {
                pv.spec
                    .as_ref()
                    .and_then(|s| s.capacity.as_ref())
                    .and_then(|c| c.get("storage"))
                    .is_some_and(|q| q.0 == "2Gi")
            })
    })
    .await;
    quiet(&user).await;
    let (_, per_claim) = per_object("expansion", &user, before, CLAIMS);
    // The claim's status before and after the call, the PV's size, and the Resizing / resize events.
    assert!(per_claim <= 5.2, "expansion costs {per_claim:.2} requests per claim");
}
