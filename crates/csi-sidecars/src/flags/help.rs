//! The union command: every sidecar's flags once, each saying which sidecars have it when not all do, and its
//! default per sidecar when they differ. It serves `--help` and tells [`super::split`] how each flag takes its value.

use std::collections::BTreeMap;

use clap::{Arg, Command};
use sidecar_runtime::flags::go_bool;

use super::Kind;

const ABOUT: &str = "Runs several CSI sidecars in one process: one driver connection, one watch cache per kind, \
one /metrics and health endpoint";

const AFTER_HELP: &str = "\
Every flag goes to each selected sidecar that has it. A sidecar's flag given as --<sidecar>.<flag> goes to that
sidecar alone and overrides the shared value: --resizer.timeout=2m, --provisioner.worker-threads=50,
--snapshotter.feature-gates=CSIVolumeGroupSnapshot=false. The flags of the whole process (driver address, Kubernetes
client, logging, HTTP, leader election) take no prefix; --feature-gates does, since each sidecar knows its own gates.
Each sidecar leads its own upstream Lease unless --leader-election-shared is set.";

/// `csi-sidecars`' own flags, then the union of the sidecars' flags in the order the sidecars declare them.
pub fn command() -> Command {
    let mut command = Command::new("csi-sidecars")
        .about(ABOUT)
        .after_help(AFTER_HELP)
        .args_override_self(true)
        .arg(Arg::new("sidecars").long("sidecars").value_name("NAMES").display_order(0).help(
            "The sidecars to run, comma-separated: provisioner, resizer, snapshotter, group-snapshotter, \
                     attacher, health-monitor (controller pod), livenessprobe (controller or node pod), registrar \
                     (node pod)",
        ))
        .arg(
            Arg::new("leader_election_shared")
                .long("leader-election-shared")
                .value_name("LEADER_ELECTION_SHARED")
                .display_order(1)
                .num_args(0..=1)
                .require_equals(true)
                .default_value("false")
                .default_missing_value("true")
                .value_parser(go_bool)
                .help(
                    "With --leader-election: one Lease, csi-sidecars-<driver>, for all the sidecars instead of each \
                     sidecar's own",
                ),
        );
    // Each flag's first declaration, and for each the sidecars that have it with their defaults.
    let mut order: Vec<Arg> = Vec::new();
    let mut owners: BTreeMap<String, Vec<(Kind, String)>> = BTreeMap::new();
    for kind in Kind::all() {
        for arg in kind.command().get_arguments() {
            let id = arg.get_id().to_string();
            let default = arg.get_default_values().iter().map(|v| v.to_string_lossy()).collect::<Vec<_>>().join(",");
            let entry = owners.entry(id.clone()).or_default();
            if entry.is_empty() {
                order.push(arg.clone());
            }
            entry.push((kind, default));
        }
    }
    for (position, arg) in order.into_iter().enumerate() {
        let kinds = &owners[arg.get_id().as_str()];
        command = command.arg(annotate(arg, kinds).display_order(position + 2));
    }
    command
}

/// Adds to a flag's help which sidecars have it (unless all do) and its default per sidecar (when they differ).
fn annotate(arg: Arg, kinds: &[(Kind, String)]) -> Arg {
    let mut notes = Vec::new();
    // Sidecars that share one command line (csi-snapshotter and csi-group-snapshotter) count once, as the first.
    let first_of_its_command = |kind: Kind| Kind::all().find(|k| k.command().get_name() == kind.command().get_name());
    let distinct: Vec<&(Kind, String)> = kinds.iter().filter(|(k, _)| first_of_its_command(*k) == Some(*k)).collect();
    let commands = Kind::all().filter(|k| first_of_its_command(*k) == Some(*k)).count();
    if distinct.len() < commands {
        notes.push(format!("[{}]", kinds.iter().map(|(k, _)| k.name()).collect::<Vec<_>>().join(", ")));
    }
    let defaults_differ = distinct.windows(2).any(|pair| pair[0].1 != pair[1].1);
    let arg = if defaults_differ {
        let per_sidecar: Vec<String> =
            distinct.iter().map(|(k, d)| format!("{} {}", k.name(), if d.is_empty() { "none" } else { d })).collect();
        notes.push(format!("[default: {}]", per_sidecar.join(", ")));
        arg.hide_default_value(true)
    } else {
        arg
    };
    if notes.is_empty() {
        return arg;
    }
    let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
    arg.help(format!("{help} {}", notes.join(" ")))
}
