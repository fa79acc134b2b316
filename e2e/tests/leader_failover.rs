//! Leader failover with work in flight: two replicas of a sidecar (csi-provisioner, csi-snapshotter,
//! csi-group-snapshotter) on one Lease, objects being provisioned or snapshotted, the leader SIGKILLed. The other replica takes over within the bound the election flags give, every
//! object is finished, and the plugin made no name twice (its `creations` count, crate::backend): the successor
//! finds by name what the dead leader had made instead of making it again, and a claim deleted while nobody led
//! has its volume deleted, never made after it was gone.
//!
//! tests/leader_election.rs checks the election itself (one leader, handover, foreign holders, release on exit)
//! with a bare elector; this file checks what the sidecars do with the work across a handover.
//!
//! The plugin does each Create call's work at once and answers 3 s later (`after_work` latency): a leader killed
//! in that window leaves backend objects whose API objects were never written, the case a successor could duplicate.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};

use csi_sidecars_e2e::chaos::calls::parse_calls;
use csi_sidecars_e2e::control_plane::cluster::Cluster;
use csi_sidecars_e2e::control_plane::snapshot_crds::install_snapshot_crds;
use csi_sidecars_e2e::http::free_port;
use csi_sidecars_e2e::processes::rbac::{Rules, Sidecar, SidecarIdentity};
use csi_sidecars_e2e::processes::scenario::{Process, binary};
use csi_sidecars_e2e::wait::{eventually, wait_for};
use csi_sidecars_e2e::worlds::backend::{CreateCalls, Kind};
use csi_sidecars_e2e::worlds::group::{GATE, GATE_OFF, Groups, labelled_claim, sidecar_args, start, start_with};
use csi_sidecars_e2e::worlds::provisioner::{ProvisionerWorld as World, TIMEOUT};
use csi_sidecars_e2e::worlds::snapshot::{Snapshots, ready, start_snapshot_controller};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{DeleteParams, ListParams};
use kube::{Api, ResourceExt};
use snapshot_api::DeletionPolicy;

/// snapshot-controller watches every namespace: the tests of this binary that start it take turns.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const LEASE: Duration = Duration::from_secs(6);
const RENEW: Duration = Duration::from_secs(4);
const RETRY: Duration = Duration::from_secs(1);
/// Scheduling and API latency on a loaded 2-core machine.
const SLACK: Duration = Duration::from_secs(3);
/// The plugin's answer delay after the work is done.
const SLOW_ANSWER: &str = r#"{"latency_ms": 3000, "after_work": true}"#;

/// Expiry is judged by when a follower *observed* the last renewal (client-go's rule): it sees it up to one retry
/// period (+20 % jitter) after it was written, waits the lease duration, and acts at its next try, up to one more
/// retry period later.
fn handover_bound() -> Duration {
    LEASE + RETRY.mul_f64(2.0 * 1.2) + SLACK
}

fn election_flags(namespace: &str) -> Vec<String> {
    vec![
        "--leader-election".to_string(),
        format!("--leader-election-namespace={namespace}"),
        format!("--leader-election-lease-duration={}s", LEASE.as_secs()),
        format!("--leader-election-renew-deadline={}s", RENEW.as_secs()),
        format!("--leader-election-retry-period={}s", RETRY.as_secs()),
    ]
}

/// The Lease name rule of sidecar-runtime (upstream's): characters outside `[a-zA-Z0-9-]` become `-`.
fn sanitized(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '-' }).collect()
}

fn fault_file(rpc: &str) -> tempfile::NamedTempFile {
    let faults = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(faults.path(), format!(r#"{{"{rpc}": {SLOW_ANSWER}}}"#)).unwrap();
    faults
}

/// Two replicas of one sidecar, by identity (`$POD_NAME`).
struct Replicas {
    leases: Api<Lease>,
    lease: String,
    replicas: Vec<(String, Process)>,
}

impl Replicas {
    async fn holder(&self) -> Option<String> {
        self.leases.get_opt(&self.lease).await.ok()??.spec?.holder_identity
    }

    /// Waits for one replica to hold the Lease; returns its index.
    async fn leader(&self) -> usize {
        wait_for(&format!("a replica to hold Lease {}", self.lease), TIMEOUT, || async {
            let holder = self.holder().await?;
            self.replicas.iter().position(|(identity, _)| *identity == holder)
        })
        .await
    }

    /// SIGKILLs `leader`, then waits for the other to write itself in as holder; returns the time from the kill to
    /// that write, and what `made` (called a second after the kill, when the plugin has finished the dead leader's
    /// last calls and long before any successor may act) returned.
    async fn kill_and_hand_over<T>(&mut self, leader: usize, made: impl FnOnce() -> T) -> (Duration, T) {
        self.replicas[leader].1.kill9();
        let killed = Instant::now();
        tokio::time::sleep(Duration::from_secs(1)).await;
        let made = made();
        let successor = self.replicas[1 - leader].0.clone();
        wait_for(&format!("{successor} to take Lease {}", self.lease), handover_bound() + TIMEOUT, || async {
            (self.holder().await.as_deref() == Some(successor.as_str())).then_some(())
        })
        .await;
        let handover = killed.elapsed();
        eprintln!("handover of Lease {}: {handover:?} (bound {:?})", self.lease, handover_bound());
        assert!(handover <= handover_bound(), "handover took {handover:?}, bound {:?}", handover_bound());
        (handover, made)
    }
}

/// The names under which the dead leader made an object it never recorded: of the contents without a handle
/// (`<content_prefix><uid>`), those whose Create name (`<call_prefix><uid>`) the plugin had made at the kill.
fn unrecorded(
    made: &BTreeMap<String, CreateCalls>,
    contents_without_handle: impl Iterator<Item = String>,
    content_prefix: &str,
    call_prefix: &str,
) -> Vec<String> {
    contents_without_handle
        .filter_map(|content| content.strip_prefix(content_prefix).map(|uid| format!("{call_prefix}{uid}")))
        .filter(|name| made.contains_key(name))
        .collect()
}

/// What the plugin must show after a failover: no name made twice, each of `expected` made exactly once, and each of
/// `unanswered` (made by the dead leader, never recorded) found again by name. Returns how many calls found an
/// existing object.
fn made_once(world: &World, kind: Kind, expected: &[String], unanswered: &[String]) -> u64 {
    let creations = world.creations(kind);
    assert_eq!(world.made_twice(kind), Vec::<String>::new(), "no name made twice: {creations:#?}");
    for name in expected {
        assert_eq!(creations.get(name).map(|c| c.created.len()), Some(1), "{name} made once: {creations:#?}");
    }
    assert!(!unanswered.is_empty(), "the kill left {kind:?} made but never recorded");
    for name in unanswered {
        assert!(creations[name].existing >= 1, "the successor found {name} by name: {creations:#?}");
    }
    creations.values().map(|c| c.existing).sum()
}

/// Two csi-provisioner replicas of `world` on one Lease with the short election flags, as pods `replica-a` and
/// `replica-b` of the world's namespace.
fn provisioner_replicas(world: &mut World) -> Replicas {
    let ns = world.ns().to_string();
    let election = election_flags(&ns);
    let election: Vec<&str> = election.iter().map(String::as_str).collect();
    let args = world.provisioner_args(&election);
    let mut replicas = Replicas {
        leases: Api::namespaced(world.client.clone(), &ns),
        lease: sanitized(&world.driver),
        replicas: Vec::new(),
    };
    for identity in ["replica-a", "replica-b"] {
        let env = [("POD_NAME", identity), ("POD_NAMESPACE", ns.as_str())];
        let process = world.scenario.start_with_env(identity, &binary("csi-provisioner"), &args, &env);
        replicas.replicas.push((identity.to_string(), process));
    }
    replicas
}

#[tokio::test]
async fn a_killed_provisioner_leader_is_replaced_and_no_volume_is_made_twice() {
    let faults = fault_file("CreateVolume");
    let fault_flag = format!("--fault-config={}", faults.path().display());
    let mut world = World::new("failover-prov", &[&fault_flag]).await;
    let class = world.class("failover", &[], "Delete").await;
    let mut replicas = provisioner_replicas(&mut world);
    let leader = replicas.leader().await;

    let early: Vec<String> = (0..10).map(|i| format!("early-{i}")).collect();
    for name in &early {
        world.claim(name, &class, None, "ReadWriteOnce").await;
    }
    eventually("the leader has made volumes it has not answered for", TIMEOUT, || async {
        world.creations(Kind::Volumes).len() >= 5
    })
    .await;
    let (handover, made) = replicas.kill_and_hand_over(leader, || world.creations(Kind::Volumes)).await;
    // What the dead leader made but never wrote a PV for is what the successor could make again. (The successor,
    // just in, has had no answer yet: each comes 3 s after its call.)
    let listed = world.claims().list(&ListParams::default()).await.unwrap().items;
    let unbound: Vec<_> =
        listed.iter().filter(|c| c.spec.as_ref().and_then(|s| s.volume_name.as_ref()).is_none()).collect();
    // (claim, volume name) of each.
    let unanswered: Vec<(String, String)> = unbound
        .iter()
        .map(|c| (c.name_any(), format!("pvc-{}", c.uid().unwrap())))
        .filter(|(_, volume)| made.contains_key(volume))
        .collect();
    eprintln!(
        "claims without a volume at the handover: {}, of them made in storage: {}",
        unbound.len(),
        unanswered.len()
    );

    // Claims created while nobody led, and two of the in-flight ones given up on.
    for i in 0..5 {
        world.claim(&format!("late-{i}"), &class, None, "ReadWriteOnce").await;
    }
    // Two whose volumes the dead leader made: they must be deleted, never made again.
    let mut deleted = Vec::new();
    for (claim, volume) in unanswered.iter().take(2) {
        world.claims().delete(claim, &DeleteParams::default()).await.unwrap();
        deleted.push((volume.clone(), SystemTime::now()));
    }

    let mut surviving = Vec::new();
    let listed = world.claims().list(&ListParams::default()).await.unwrap().items;
    for claim in listed.iter().filter(|c| c.metadata.deletion_timestamp.is_none()) {
        world.bound(&claim.name_any()).await;
        surviving.push(format!("pvc-{}", claim.uid().unwrap()));
    }
    assert_eq!(surviving.len(), 15 - deleted.len());

    eventually("the volumes of the deleted claims are deleted", TIMEOUT, || async {
        world.plugin_volumes().len() == surviving.len()
    })
    .await;
    eventually("the in-flight journal is empty", TIMEOUT, || async { world.journal().await.is_empty() }).await;
    let unanswered_volumes: Vec<String> = unanswered.iter().map(|(_, volume)| volume.clone()).collect();
    let found_again = made_once(&world, Kind::Volumes, &surviving, &unanswered_volumes);
    let creations = world.creations(Kind::Volumes);
    for (name, at) in &deleted {
        let made_after = creations.get(name).is_some_and(|c| c.created.iter().any(|t| t > at));
        assert!(!made_after, "{name} was made after its claim was deleted: {creations:#?}");
    }
    eprintln!(
        "handover {handover:?}; {} volumes made without a PV by the dead leader; CreateVolume answered with an \
         existing volume {found_again} times",
        unanswered.len()
    );
}

fn signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill").arg(signal).arg(pid.to_string()).status().expect("kill");
    assert!(status.success(), "kill {signal} {pid}");
}

/// A leader paused (SIGSTOP, as a stalled node or VM) past its Lease and then run again must not call the driver
/// once the other replica leads. Its claim fails with UNAVAILABLE and is retried with backoff, so a retry is overdue
/// the moment it runs again, before its elector has asked the API server whether it still leads: the calls are
/// fenced by its own renew deadline (sidecar_runtime's `LeaderStatus::may_act`), and it exits once its elector sees
/// the Lease gone. The plugin names the caller of each changing call (its process id): none is the paused
/// replica's after the successor's first.
#[tokio::test]
async fn a_paused_provisioner_leader_calls_the_driver_no_more_once_it_runs_again() {
    let faults = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(faults.path(), r#"{"CreateVolume": {"code": "Unavailable", "message": "try again"}}"#).unwrap();
    let fault_flag = format!("--fault-config={}", faults.path().display());
    let mut world = World::new("failover-pause", &[&fault_flag]).await;
    let class = world.class("pause", &[], "Delete").await;
    let mut replicas = provisioner_replicas(&mut world);
    let leader = replicas.leader().await;
    let (paused, successor) = (replicas.replicas[leader].1.pid(), replicas.replicas[1 - leader].1.pid());
    let calls = |pid: u32| parse_calls(&world.plugin.log()).iter().filter(|c| c.pid == pid).count();
    world.claim("waiting", &class, None, "ReadWriteOnce").await;
    eventually("the leader calls CreateVolume", TIMEOUT, || async { calls(paused) >= 2 }).await;

    signal(paused, "-STOP");
    let successor_name = replicas.replicas[1 - leader].0.clone();
    wait_for(&format!("{successor_name} to take the Lease"), handover_bound() + TIMEOUT, || async {
        (replicas.holder().await.as_deref() == Some(successor_name.as_str())).then_some(())
    })
    .await;
    eventually("the successor calls CreateVolume", TIMEOUT, || async { calls(successor) >= 1 }).await;
    signal(paused, "-CONT");
    let exit = replicas.replicas[leader].1.wait_exit(TIMEOUT).await;
    assert_eq!(exit, 1, "a leader that lost its Lease exits 1, as upstream's");

    let all = parse_calls(&world.plugin.log());
    let first = all.iter().position(|c| c.pid == successor).expect("the successor's first call");
    let late: Vec<_> = all[first..].iter().filter(|c| c.pid == paused).collect();
    assert!(late.is_empty(), "the paused replica called the driver after the successor had: {late:?}");
    let fenced = replicas.replicas[leader].1.log().matches("CSI call not made").count();
    eprintln!("the paused replica's calls refused by its fence after it ran again: {fenced}");

    std::fs::write(faults.path(), "{}").unwrap();
    world.bound("waiting").await;
}

#[tokio::test]
async fn a_killed_snapshotter_leader_is_replaced_and_no_snapshot_is_made_twice() {
    let _turn = SERIAL.lock().await;
    install_snapshot_crds(&Cluster::shared().client().await).await;
    let faults = fault_file("CreateSnapshot");
    let fault_flag = format!("--fault-config={}", faults.path().display());
    let mut world = World::new("failover-snap", &[&fault_flag]).await;
    let class = world.class("source", &[], "Delete").await;
    let _provisioner = world.start_provisioner("csi-provisioner", &[]);
    for i in 0..3 {
        world.claim(&format!("source-{i}"), &class, None, "ReadWriteOnce").await;
    }
    for i in 0..3 {
        world.bound(&format!("source-{i}")).await;
    }
    let _controller = start_snapshot_controller(&mut world, free_port()).await;
    let ns = world.ns().to_string();
    let identity = SidecarIdentity::with_rules(
        &world.client,
        &ns,
        "csi-snapshotter",
        Rules::of(Sidecar::Snapshotter),
        world.scenario.dir(),
    )
    .await;
    let election = election_flags(&ns);
    let election: Vec<&str> = election.iter().map(String::as_str).collect();
    let args = sidecar_args(&world, &identity, "csi-snapshotter", &election);
    let mut replicas = Replicas {
        leases: Api::namespaced(world.client.clone(), &ns),
        lease: sanitized(&format!("external-snapshotter-leader-{}", world.driver)),
        replicas: Vec::new(),
    };
    for name in ["snapshotter-a", "snapshotter-b"] {
        let process = world.scenario.start_with_env(name, &binary("csi-snapshotter"), &args, &[("POD_NAME", name)]);
        replicas.replicas.push((name.to_string(), process));
    }
    let leader = replicas.leader().await;

    let mut snaps = Snapshots::new(&world);
    let snapshot_class = snaps.class("snap", DeletionPolicy::Delete, true).await;
    let mut names = Vec::new();
    for i in 0..9 {
        let name = format!("snap-{i}");
        snaps.snapshot_of_claim(&name, &format!("source-{}", i % 3), Some(&snapshot_class)).await;
        names.push(name);
    }
    eventually("the leader has cut snapshots it has not answered for", TIMEOUT, || async {
        world.creations(Kind::Snapshots).len() >= 4
    })
    .await;
    let (handover, made) = replicas.kill_and_hand_over(leader, || world.creations(Kind::Snapshots)).await;
    // Snapshots the dead leader made but never recorded (no handle in the content's status): the successor must
    // find them by name. (Contents are `snapcontent-<uid>`, CreateSnapshot names `snapshot-<uid>`.)
    let contents = snaps.contents().list(&ListParams::default()).await.unwrap().items;
    let without_handle = contents
        .iter()
        .filter(|c| c.spec.volume_snapshot_ref.namespace.as_deref() == Some(ns.as_str()))
        .filter(|c| c.status.as_ref().and_then(|s| s.snapshot_handle.as_ref()).is_none())
        .map(|c| c.name_any());
    let unanswered = unrecorded(&made, without_handle, "snapcontent-", "snapshot-");
    for i in 9..12 {
        let name = format!("snap-{i}");
        snaps.snapshot_of_claim(&name, &format!("source-{}", i % 3), Some(&snapshot_class)).await;
        names.push(name);
    }

    let mut expected = Vec::new();
    for name in &names {
        let snapshot = snaps.wait_snapshot(name, "ready", ready).await;
        expected.push(format!("snapshot-{}", snapshot.uid().unwrap()));
    }
    let found_again = made_once(&world, Kind::Snapshots, &expected, &unanswered);
    let listed = world.csictl(&["list-snapshots"]);
    assert_eq!(listed.as_array().map_or(0, Vec::len), names.len(), "one storage snapshot per VolumeSnapshot: {listed}");
    eprintln!(
        "handover {handover:?}; {} snapshots made without a recorded handle by the dead leader; CreateSnapshot \
         answered with an existing snapshot {found_again} times",
        unanswered.len()
    );

    // Deleted, nothing stays behind.
    for name in &names {
        snaps.snapshots().delete(name, &DeleteParams::default()).await.unwrap();
    }
    for name in &names {
        snaps.gone(name).await;
    }
    eventually("the storage snapshots are deleted", TIMEOUT, || async {
        world.csictl(&["list-snapshots"]).as_array().is_none_or(Vec::is_empty)
    })
    .await;
}

#[tokio::test]
async fn a_killed_group_snapshotter_leader_is_replaced_and_no_group_is_made_twice() {
    let _turn = SERIAL.lock().await;
    install_snapshot_crds(&Cluster::shared().client().await).await;
    let faults = fault_file("CreateVolumeGroupSnapshot");
    let fault_flag = format!("--fault-config={}", faults.path().display());
    let mut world = World::new("failover-group", &[&fault_flag]).await;
    let class = world.class("source", &[], "Delete").await;
    let _provisioner = world.start_provisioner("csi-provisioner", &[]);
    for name in ["a", "b"] {
        labelled_claim(&world, name, &class, &[("app", "db")]).await;
        world.bound(name).await;
    }
    let _controller = start(&mut world, Sidecar::SnapshotController, "snapshot-controller").await;
    // Members are served by a csi-snapshotter with its groups off, beside the group sidecar's replicas.
    let _snapshotter = start_with(&mut world, Sidecar::Snapshotter, "csi-snapshotter", &[GATE_OFF]).await;
    let ns = world.ns().to_string();
    let identity = SidecarIdentity::with_rules(
        &world.client,
        &ns,
        "csi-group-snapshotter",
        Rules::of(Sidecar::Snapshotter),
        world.scenario.dir(),
    )
    .await;
    let mut flags = election_flags(&ns);
    flags.push(GATE.to_string());
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let args = sidecar_args(&world, &identity, "csi-group-snapshotter", &flags);
    let mut replicas = Replicas {
        leases: Api::namespaced(world.client.clone(), &ns),
        lease: sanitized(&format!("external-snapshotter-group-leader-{}", world.driver)),
        replicas: Vec::new(),
    };
    for name in ["group-a", "group-b"] {
        let process =
            world.scenario.start_with_env(name, &binary("csi-group-snapshotter"), &args, &[("POD_NAME", name)]);
        replicas.replicas.push((name.to_string(), process));
    }
    let leader = replicas.leader().await;

    let groups = Groups::default_class(&world).await;
    let mut names = Vec::new();
    for i in 0..3 {
        let name = format!("group-{i}");
        groups.group(&name, serde_json::json!({"matchLabels": {"app": "db"}})).await;
        names.push(name);
    }
    eventually("the leader has cut a group it has not answered for", TIMEOUT, || async {
        !world.creations(Kind::GroupSnapshots).is_empty()
    })
    .await;
    let (handover, made) = replicas.kill_and_hand_over(leader, || world.creations(Kind::GroupSnapshots)).await;
    // Groups the dead leader made but never recorded (no handle in the content's status): the successor must find
    // them by name. (Contents are `groupsnapcontent-<uid>`, CreateVolumeGroupSnapshot names `groupsnapshot-<uid>`.)
    let contents = groups.contents().list(&ListParams::default()).await.unwrap().items;
    let without_handle = contents
        .iter()
        .filter(|c| c.spec.volume_group_snapshot_ref.namespace.as_deref() == Some(ns.as_str()))
        .filter(|c| c.status.as_ref().and_then(|s| s.volume_group_snapshot_handle.as_ref()).is_none())
        .map(|c| c.name_any());
    let unanswered = unrecorded(&made, without_handle, "groupsnapcontent-", "groupsnapshot-");

    let mut expected = Vec::new();
    for name in &names {
        let group = groups.ready(name).await;
        groups.ready_members(&group, 2).await;
        expected.push(format!("groupsnapshot-{}", group.uid().unwrap()));
    }
    let found_again = made_once(&world, Kind::GroupSnapshots, &expected, &unanswered);
    let members = world.csictl(&["list-snapshots"]);
    assert_eq!(members.as_array().map_or(0, Vec::len), 2 * names.len(), "two members per group: {members}");
    eprintln!(
        "handover {handover:?}; {} groups made without a recorded handle by the dead leader; \
         CreateVolumeGroupSnapshot answered with an existing group {found_again} times",
        unanswered.len()
    );

    for name in &names {
        groups.groups().delete(name, &DeleteParams::default()).await.unwrap();
    }
    for name in &names {
        groups.gone(name).await;
    }
    eventually("the storage group snapshots are deleted", TIMEOUT, || async {
        world.csictl(&["list-snapshots"]).as_array().is_none_or(Vec::is_empty)
    })
    .await;
}
