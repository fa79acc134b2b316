//! Leader election against the real control plane, with real processes
//! (`sidecar-runtime-elector`, the runtime with nothing but an elector and the
//! HTTP endpoint): exactly one of two electors leads; a killed leader is
//! replaced within the bound client-go's rules give; a Lease that a live
//! foreign holder keeps renewing is never taken; a released Lease is taken at
//! once. `/metrics` and `/healthz/leader-election` answer throughout.
//!
//! Durations are short (lease 6 s, renew deadline 4 s, retry 1 s) to keep the
//! tests quick. Expiry is judged by when an elector *observed* the last change
//! (client-go's rule, immune to clock skew), so after a leader dies a follower
//! needs up to one retry period (+20 % jitter) to see its last renewal, the
//! lease duration, and one more retry period to act:
//! `lease + 2 × 1.2 × retry`, plus slack for a loaded machine.

use std::time::{Duration, Instant};

use csi_sidecars_e2e::control_plane::cluster::Cluster;
use csi_sidecars_e2e::control_plane::namespace::TestNamespace;
use csi_sidecars_e2e::http::{free_port, try_http_get};
use csi_sidecars_e2e::processes::rbac::{Sidecar, SidecarIdentity};
use csi_sidecars_e2e::processes::scenario::{Process, Scenario, binary};
use csi_sidecars_e2e::wait::{eventually, wait_for};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{ListParams, ObjectMeta, PostParams};

const LOCK: &str = "e2e-elector";
const LEASE: Duration = Duration::from_secs(6);
const RETRY: Duration = Duration::from_secs(1);
const SLACK: Duration = Duration::from_secs(4);
const STARTUP: Duration = Duration::from_secs(60);

fn handover_bound() -> Duration {
    LEASE + RETRY.mul_f64(2.0 * 1.2) + SLACK
}

/// One elector process and the port of its HTTP endpoint.
struct Elector {
    process: Process,
    identity: String,
    port: u16,
}

impl Elector {
    fn leads(&self) -> bool {
        self.process.log().contains("started leading")
    }
}

/// The ServiceAccount the electors of a test run as: the Lease Role and the events rule of upstream's RBAC.
async fn elector_identity(client: &kube::Client, ns: &TestNamespace, scenario: &Scenario) -> SidecarIdentity {
    SidecarIdentity::create(client, ns.name(), Sidecar::Elector, scenario.dir()).await
}

fn start_elector(
    scenario: &mut Scenario,
    account: &SidecarIdentity,
    namespace: &str,
    identity: &str,
    extra: &[&str],
) -> Elector {
    let port = free_port();
    let mut args = vec![
        account.kubeconfig_flag(),
        "--leader-election".to_string(),
        format!("-leader-election-namespace={namespace}"),
        format!("--leader-election-lease-duration={}s", LEASE.as_secs()),
        "--leader-election-renew-deadline=4s".to_string(),
        format!("--leader-election-retry-period={}s", RETRY.as_secs()),
        format!("--http-endpoint=127.0.0.1:{port}"),
        format!("--lock-name={LOCK}"),
        format!("--identity={identity}"),
        "-v=4".to_string(),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    let process = scenario.start(identity, &binary("sidecar-runtime-elector"), &args);
    Elector { process, identity: identity.to_string(), port }
}

async fn holder(leases: &Api<Lease>) -> Option<String> {
    leases.get_opt(LOCK).await.ok()??.spec?.holder_identity
}

async fn transitions(leases: &Api<Lease>) -> i32 {
    leases.get(LOCK).await.unwrap().spec.unwrap().lease_transitions.unwrap_or(0)
}

/// Both electors serve health on every replica, and the gauge says who leads.
async fn check_http(elector: &Elector, leading: bool) {
    let metric = format!("leader_election_master_status{{name=\"{LOCK}\"}} {}", u8::from(leading));
    let what = format!("{}: /metrics shows `{metric}`", elector.identity);
    eventually(&what, Duration::from_secs(10), || async {
        try_http_get(elector.port, "/metrics")
            .await
            .is_some_and(|(status, body)| status == 200 && body.contains(&metric))
    })
    .await;
    let (status, body) = try_http_get(elector.port, "/healthz/leader-election").await.expect("health endpoint answers");
    assert_eq!((status, body.as_str()), (200, "ok"), "{}: leader-election health", elector.identity);
}

#[tokio::test]
async fn exactly_one_of_two_electors_leads_and_a_killed_leader_is_replaced() {
    let client = Cluster::shared().client().await;
    let ns = TestNamespace::create(&client, "elect").await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns.name());
    let mut scenario = Scenario::new("two electors");
    let account = elector_identity(&client, &ns, &scenario).await;
    let labels = ["--leader-election-labels=app:e2e,tier:storage"];
    let mut electors = vec![
        start_elector(&mut scenario, &account, ns.name(), "a", &labels),
        start_elector(&mut scenario, &account, ns.name(), "b", &labels),
    ];

    let leader = wait_for("one elector to hold the Lease", STARTUP, || async {
        let holder = holder(&leases).await?;
        electors.iter().position(|e| e.identity == holder && e.leads())
    })
    .await;
    let follower = 1 - leader;

    // Over more than a lease duration, the holder does not change and the
    // other never starts leading.
    let watch_until = Instant::now() + LEASE + RETRY * 2;
    while Instant::now() < watch_until {
        assert_eq!(holder(&leases).await.as_deref(), Some(electors[leader].identity.as_str()));
        assert!(!electors[follower].leads(), "both lead at once");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let lease = leases.get(LOCK).await.unwrap();
    let labels = lease.metadata.labels.unwrap_or_default();
    assert_eq!(labels.get("app").map(String::as_str), Some("e2e"));
    assert_eq!(labels.get("tier").map(String::as_str), Some("storage"));
    let spec = lease.spec.unwrap();
    assert_eq!(spec.lease_duration_seconds, Some(LEASE.as_secs() as i32));
    assert!(spec.acquire_time.is_some() && spec.renew_time.is_some());
    check_http(&electors[leader], true).await;
    check_http(&electors[follower], false).await;

    // client-go's "<identity> became leader" on the Lease, from "<lock>/<identity>".
    let events: Api<Event> = Api::namespaced(client.clone(), ns.name());
    let identity = electors[leader].identity.clone();
    eventually("a LeaderElection event on the Lease", Duration::from_secs(10), || async {
        let selector = format!("involvedObject.name={LOCK},involvedObject.kind=Lease");
        let listed = events.list(&ListParams::default().fields(&selector)).await.map(|l| l.items).unwrap_or_default();
        listed.iter().any(|e| {
            e.reason.as_deref() == Some("LeaderElection")
                && e.message.as_deref() == Some(format!("{identity} became leader").as_str())
                && e.source.as_ref().and_then(|s| s.component.as_deref()) == Some(format!("{LOCK}/{identity}").as_str())
        })
    })
    .await;

    let before = transitions(&leases).await;
    electors[leader].process.kill9();
    let killed = Instant::now();
    let new_holder = electors[follower].identity.clone();
    wait_for("the follower to take over", handover_bound() + Duration::from_secs(5), || async {
        (holder(&leases).await.as_deref() == Some(new_holder.as_str()) && electors[follower].leads()).then_some(())
    })
    .await;
    let handover = killed.elapsed();
    assert!(handover <= handover_bound(), "handover took {handover:?}, bound {:?}", handover_bound());
    assert_eq!(transitions(&leases).await, before + 1, "a takeover counts as a transition");
    check_http(&electors[follower], true).await;
    electors.clear();
}

#[tokio::test]
async fn a_lease_renewed_by_a_live_foreign_holder_is_never_taken() {
    let client = Cluster::shared().client().await;
    let ns = TestNamespace::create(&client, "foreign").await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns.name());

    // A Go sidecar's Lease, as client-go writes it, renewed every second.
    let now = || MicroTime(Timestamp::from_microsecond(Timestamp::now().as_microsecond()).unwrap());
    let foreign = Lease {
        metadata: ObjectMeta { name: Some(LOCK.into()), ..ObjectMeta::default() },
        spec: Some(LeaseSpec {
            holder_identity: Some("csi-provisioner-go-0".into()),
            lease_duration_seconds: Some(LEASE.as_secs() as i32),
            acquire_time: Some(now()),
            renew_time: Some(now()),
            lease_transitions: Some(3),
            ..LeaseSpec::default()
        }),
    };
    leases.create(&PostParams::default(), &foreign).await.unwrap();
    let renewer = {
        let leases = leases.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(RETRY).await;
                let Ok(mut lease) = leases.get(LOCK).await else { continue };
                if let Some(spec) = lease.spec.as_mut() {
                    spec.renew_time = Some(now());
                }
                let _ = leases.replace(LOCK, &PostParams::default(), &lease).await;
            }
        })
    };

    let mut scenario = Scenario::new("foreign holder");
    let account = elector_identity(&client, &ns, &scenario).await;
    let elector = start_elector(&mut scenario, &account, ns.name(), "rust-0", &[]);
    eventually("the elector to see the foreign holder", STARTUP, || async {
        elector.process.log().contains("new leader detected")
    })
    .await;
    let watch_until = Instant::now() + LEASE * 3;
    while Instant::now() < watch_until {
        assert_eq!(holder(&leases).await.as_deref(), Some("csi-provisioner-go-0"), "a live lease was taken");
        assert!(!elector.leads());
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    check_http(&elector, false).await;

    // Once the foreign holder stops renewing, the Lease expires and is taken.
    renewer.abort();
    let _ = renewer.await;
    let stopped = Instant::now();
    wait_for("the elector to take the expired Lease", handover_bound() + Duration::from_secs(5), || async {
        (holder(&leases).await.as_deref() == Some("rust-0") && elector.leads()).then_some(())
    })
    .await;
    assert!(stopped.elapsed() <= handover_bound(), "takeover took {:?}", stopped.elapsed());
    assert_eq!(transitions(&leases).await, 4);
    check_http(&elector, true).await;
}

#[tokio::test]
async fn sigterm_releases_the_lease_only_with_the_feature_gate() {
    let client = Cluster::shared().client().await;
    let ns = TestNamespace::create(&client, "release").await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns.name());
    let mut scenario = Scenario::new("release on exit");
    let account = elector_identity(&client, &ns, &scenario).await;

    // Without the gate, a terminated leader leaves its Lease to expire.
    let mut first = start_elector(&mut scenario, &account, ns.name(), "first", &[]);
    eventually("first leads", STARTUP, || async { first.leads() }).await;
    assert_eq!(first.process.terminate(), Some(0), "SIGTERM is an orderly exit");
    assert_eq!(holder(&leases).await.as_deref(), Some("first"), "not released without the gate");

    // With it, the Lease is handed back on exit and the next elector takes it
    // without waiting for expiry.
    let gate = ["--feature-gates=ReleaseLeaderElectionOnExit=true"];
    let mut second = start_elector(&mut scenario, &account, ns.name(), "second", &gate);
    eventually("second takes over the expired Lease", STARTUP, || async { second.leads() }).await;
    let third = start_elector(&mut scenario, &account, ns.name(), "third", &gate);
    eventually("third sees second leading", STARTUP, || async { third.process.log().contains("new leader detected") })
        .await;
    let terminated = Instant::now();
    assert_eq!(second.process.terminate(), Some(0));
    let spec = leases.get(LOCK).await.unwrap().spec.unwrap();
    assert!(spec.holder_identity.as_deref().is_none_or(|h| h.is_empty() || h == "third"), "released on exit: {spec:?}");
    eventually("third takes the released Lease", LEASE, || async {
        holder(&leases).await.as_deref() == Some("third") && third.leads()
    })
    .await;
    let handover = terminated.elapsed();
    assert!(handover < LEASE, "a released Lease is taken before it would expire ({handover:?})");
}

#[tokio::test]
async fn a_leader_that_loses_its_lease_exits_1() {
    let client = Cluster::shared().client().await;
    let ns = TestNamespace::create(&client, "lost").await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), ns.name());
    let mut scenario = Scenario::new("lost lease");
    let account = elector_identity(&client, &ns, &scenario).await;
    let mut elector = start_elector(&mut scenario, &account, ns.name(), "victim", &[]);
    eventually("the elector leads", STARTUP, || async { elector.leads() }).await;

    // Someone else writes itself in as holder (as a misconfigured second
    // deployment would); the leader must stop at its next renewal.
    wait_for("the Lease to be overwritten", Duration::from_secs(20), || async {
        let mut lease = leases.get(LOCK).await.ok()?;
        let spec = lease.spec.as_mut()?;
        spec.holder_identity = Some("thief".into());
        spec.renew_time = Some(MicroTime(Timestamp::from_microsecond(Timestamp::now().as_microsecond()).unwrap()));
        leases.replace(LOCK, &PostParams::default(), &lease).await.ok().map(|_| ())
    })
    .await;
    let stolen = Instant::now();
    let code = loop {
        if let Some(code) = elector.process.exited() {
            break code;
        }
        assert!(stolen.elapsed() < Duration::from_secs(20), "the leader did not exit after losing its lease");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(code, 1, "losing the lease exits 1");
    assert!(stolen.elapsed() <= RETRY * 2 + SLACK, "noticed at the next renewal, took {:?}", stolen.elapsed());
    assert!(elector.process.log().contains("stopped leading"));
    assert_eq!(holder(&leases).await.as_deref(), Some("thief"));
}
