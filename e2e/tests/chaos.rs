//! The reduced `make chaos` (docs/chaos.md) inside `make test`: 40 claims (some deleted mid-flight and created
//! again, some deleted once Bound), two kills of each sidecar per phase (snapshot-controller in both snapshot
//! phases), one plugin restart, expansions, class moves, 12 snapshots, 20 more deleted at once, and 4 group
//! snapshots (one deleted), all under faults, then every invariant 0. Neither kube-apiserver nor etcd is restarted:
//! this cluster is shared with the other e2e tests (the full `make chaos` restarts them on a cluster of its own).

use std::process::Command;

use csi_sidecars_e2e::chaos::invariants::Tally;
use csi_sidecars_e2e::control_plane::cluster::Cluster;
use csi_sidecars_e2e::processes::scenario::binary;

#[test]
fn reduced_chaos_leaks_and_loses_nothing() {
    Cluster::shared();
    let output = Command::new(binary("chaos"))
        .envs([
            ("CHAOS_CLAIMS", "40"),
            ("CHAOS_KILL_EVERY", "10"),
            ("CHAOS_MIN_KILLS", "2"),
            ("CHAOS_CHANGE_SHARE", "0.3"),
            ("CHAOS_RESTART_APISERVER", "0"),
            ("CHAOS_RESTART_ETCD", "0"),
            ("CHAOS_SNAPSHOTS", "12"),
            ("CHAOS_MASS_SNAPSHOTS", "20"),
            ("CHAOS_GROUPS", "4"),
            ("CHAOS_PHASES", "provision,change,snapshot,group"),
            ("CHAOS_QUIESCE_SECONDS", "120"),
        ])
        .output()
        .expect("run the chaos binary");
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("{stdout}");
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    let last = stdout.lines().last().unwrap_or_default();
    assert_eq!(last, Tally::default().to_string(), "the last line reports every invariant");
    assert!(output.status.success(), "chaos exited with {}", output.status);
    assert!(stdout.contains("snapshot: 20 snapshots deleted at once"), "the mass deletion ran");
    let injected = stdout.lines().find(|l| l.starts_with("injected: ")).expect("the injected line");
    assert!(!injected.starts_with("injected: 0 faults"), "faults were injected: {injected}");
    // provision 2, change 2, snapshot 2 + 2 (csi-snapshotter, snapshot-controller), group 2 + 2
    // (csi-group-snapshotter, snapshot-controller).
    assert!(
        injected.contains(" 12 kills, 1 restarts"),
        "two kills of each sidecar per phase and one plugin restart: {injected}"
    );
}
