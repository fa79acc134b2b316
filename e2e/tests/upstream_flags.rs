//! Every flag of the newest upstream release our sidecars replace is accepted by ours, so a manifest written for
//! upstream starts unchanged. `e2e/upstream-flags/<binary>.txt` is each upstream binary's flag list, taken from its
//! `-h` (the version is the file's first line): one flag a line with a value of the flag's type. A line starting with
//! `!` is a flag ours refuses on purpose, with the reason after `#`; docs/differences.md names it.
//!
//! Each flag is given alone, as `--flag=value` and in Go's single-dash form, followed by `--version`: the binary
//! must print its version and exit 0 (an unknown flag or a refused value exits 2 with clap's message naming it).
//! A new upstream release whose `-h` gains a flag makes this test fail once its list is refreshed, until the flag
//! is handled or written down as a difference.

use std::process::Command;

use csi_sidecars_e2e::control_plane::cluster::repo_root;
use csi_sidecars_e2e::processes::scenario::binary;

struct Flag {
    name: String,
    value: String,
    refused: bool,
}

fn upstream_flags(binary: &str) -> (String, Vec<Flag>) {
    let path = repo_root().join(format!("e2e/upstream-flags/{binary}.txt"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines();
    let header = lines.next().expect("a header naming the upstream version");
    let header = header.trim_start_matches("# ").split(':').next().unwrap_or_default().to_string();
    let flags = lines
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let (line, refused) = match line.strip_prefix('!') {
                Some(rest) => (rest.split('#').next().unwrap_or_default(), true),
                None => (line, false),
            };
            let mut words = line.split_whitespace();
            let name = words.next().expect("a flag name").to_string();
            let value = words.next().unwrap_or_else(|| panic!("{binary}: {name} has no sample value")).to_string();
            Flag { name, value, refused }
        })
        .collect();
    (header, flags)
}

/// Whether `program` (with `before` in front, e.g. `--sidecars=...`) accepts `argument`, and its stderr.
fn accepts(program: &str, before: &[&str], argument: &str) -> (bool, String) {
    let output = Command::new(binary(program))
        .args(before)
        .arg(argument)
        .arg("--version")
        // What a pod gives its containers, which some flags ask for (--enable-capacity, --node-deployment).
        .envs([("NAMESPACE", "kube-system"), ("NODE_NAME", "node-1"), ("POD_NAME", "pod-1")])
        .output()
        .unwrap_or_else(|e| panic!("run {program}: {e}"));
    (output.status.success(), String::from_utf8_lossy(&output.stderr).into_owned())
}

/// Checks `ours` (run with `before`) against the upstream list of `upstream`.
fn check(upstream: &str, ours: &str, before: &[&str]) {
    let (header, flags) = upstream_flags(upstream);
    assert!(flags.len() >= 20, "{upstream}: the list has its flags ({})", flags.len());
    let mut wrong = Vec::new();
    for flag in &flags {
        for form in [format!("--{}={}", flag.name, flag.value), format!("-{}={}", flag.name, flag.value)] {
            let (accepted, stderr) = accepts(ours, before, &form);
            if accepted == flag.refused {
                let verdict = if accepted { "accepted, but listed as refused" } else { "refused" };
                wrong.push(format!("{form}: {verdict}: {}", stderr.lines().next().unwrap_or_default()));
            }
        }
    }
    let accepted = flags.iter().filter(|f| !f.refused).count();
    eprintln!("{ours} against {header}: {accepted} of {} flags accepted", flags.len());
    assert!(wrong.is_empty(), "{ours} against {header}:\n{}", wrong.join("\n"));
}

#[test]
fn csi_provisioner_accepts_every_flag_of_upstreams() {
    check("csi-provisioner", "csi-provisioner", &[]);
}

#[test]
fn csi_resizer_accepts_every_flag_of_upstreams() {
    check("csi-resizer", "csi-resizer", &[]);
}

#[test]
fn csi_snapshotter_accepts_every_flag_of_upstreams() {
    check("csi-snapshotter", "csi-snapshotter", &[]);
}

#[test]
fn snapshot_controller_accepts_every_flag_of_upstreams() {
    check("snapshot-controller", "snapshot-controller", &[]);
}

#[test]
fn csi_attacher_accepts_every_flag_of_upstreams() {
    check("csi-attacher", "csi-attacher", &[]);
}

#[test]
fn csi_external_health_monitor_controller_accepts_every_flag_of_upstreams() {
    check("csi-external-health-monitor-controller", "csi-external-health-monitor-controller", &[]);
}

/// A gate no sidecar knows is refused, `--version` or not, as upstream's flag parsing refuses it; a gate of the
/// Kubernetes libraries every upstream sidecar lists is accepted.
#[test]
fn feature_gates_are_checked_before_the_version_answers() {
    for program in ["csi-provisioner", "csi-resizer", "csi-snapshotter", "csi-attacher"] {
        let (accepted, stderr) = accepts(program, &[], "--feature-gates=NoSuchGate=true");
        assert!(!accepted && stderr.contains("NoSuchGate"), "{program}: {stderr}");
        assert!(accepts(program, &[], "--feature-gates=WatchList=true").0, "{program}");
    }
}

#[test]
fn csi_sidecars_accepts_every_flag_of_the_sidecars_it_runs() {
    check("csi-provisioner", "csi-sidecars", &["--sidecars=provisioner"]);
    check("csi-resizer", "csi-sidecars", &["--sidecars=resizer"]);
    check("csi-snapshotter", "csi-sidecars", &["--sidecars=snapshotter"]);
    check("csi-attacher", "csi-sidecars", &["--sidecars=attacher"]);
    check("csi-external-health-monitor-controller", "csi-sidecars", &["--sidecars=health-monitor"]);
}
