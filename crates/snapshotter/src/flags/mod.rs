//! The command lines of the two snapshot binaries, with upstream names, defaults and Go syntax:
//!
//! - [`controller`]: snapshot-controller (external-snapshotter cmd/snapshot-controller/main.go);
//! - [`sidecar`]: csi-snapshotter (external-snapshotter cmd/csi-snapshotter/main.go).
//!
//! Both flatten the runtime's [`CommonArgs`](sidecar_runtime::CommonArgs), which is csi-lib-utils' set. Upstream's
//! snapshot-controller registers plain Go flags instead, without `--csi-address`, `--master`,
//! `--leader-election-labels` and `--metrics-address`; ours accepts those four too (and ignores them), which no
//! manifest written for upstream notices.
//!
//! What a flag parser cannot say is checked by each `validate`: flags upstream removed (an error naming the flag),
//! flag combinations upstream refuses at startup, and the feature gates.

pub mod controller;
pub mod sidecar;

use sidecar_runtime::flags::{FeatureGates, Removed, ValueError, removed};

/// `--feature-gates` name of volume group snapshots.
pub const CSI_VOLUME_GROUP_SNAPSHOT: &str = "CSIVolumeGroupSnapshot";
/// Its default: on, since external-snapshotter v8.7.0 made the gate GA (#1475). `=false` still turns group snapshots
/// off, as upstream's does until it removes the gate.
pub const CSI_VOLUME_GROUP_SNAPSHOT_DEFAULT: bool = true;
/// The gates both binaries know.
pub const KNOWN_GATES: [&str; 2] = [CSI_VOLUME_GROUP_SNAPSHOT, sidecar_runtime::RELEASE_LEADER_ELECTION_ON_EXIT];
/// The GA gates among them: setting one is warned about, as upstream's component-base does.
pub const GA_GATES: [&str; 1] = [CSI_VOLUME_GROUP_SNAPSHOT];

/// The feature gates of both binaries, after defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Features {
    /// VolumeGroupSnapshots are handled.
    pub volume_group_snapshot: bool,
    /// SIGTERM releases the Lease after the workers have stopped.
    pub release_leader_election_on_exit: bool,
}

impl Features {
    /// The gates given on the command line, refusing names neither binary knows (as upstream does at startup).
    pub fn from_gates(gates: &FeatureGates) -> Result<Features, ValueError> {
        gates.check_known(&KNOWN_GATES)?;
        Ok(Features {
            volume_group_snapshot: gates.enabled(CSI_VOLUME_GROUP_SNAPSHOT, CSI_VOLUME_GROUP_SNAPSHOT_DEFAULT),
            release_leader_election_on_exit: gates.enabled(sidecar_runtime::RELEASE_LEADER_ELECTION_ON_EXIT, false),
        })
    }
}

/// A command line upstream would refuse at startup.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FlagError {
    #[error(
        "--node-deployment and --leader-election cannot be used together: each node's csi-snapshotter handles its own node's contents"
    )]
    NodeDeploymentWithLeaderElection,
    #[error("--snapshot-name-prefix must not be empty")]
    EmptySnapshotNamePrefix,
    #[error("--groupsnapshot-name-prefix must not be empty when {CSI_VOLUME_GROUP_SNAPSHOT} is enabled")]
    EmptyGroupSnapshotNamePrefix,
    #[error(transparent)]
    FeatureGates(#[from] ValueError),
}

/// `--enable-volume-group-snapshots`, which both binaries had up to v8.1: refused naming it and its replacement
/// ([`sidecar_runtime::flags::removed`]), rather than as an unknown flag.
#[derive(Clone, Debug, clap::Args)]
pub struct RemovedArgs {
    #[arg(long, hide = true, num_args = 0..=1, require_equals = true, default_missing_value = "",
          value_parser = removed("removed in v8.2: use --feature-gates=CSIVolumeGroupSnapshot=true"))]
    pub enable_volume_group_snapshots: Option<Removed>,
}

/// Parses `argv` (without the program name) as `program` would, Go forms included.
#[cfg(test)]
pub(crate) fn parse_as<P: clap::Parser>(program: &str, argv: &[&str]) -> Result<P, clap::Error> {
    sidecar_runtime::flags::try_parse_from(std::iter::once(program).chain(argv.iter().copied()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feature_gates() {
        let gates = |text: &str| FeatureGates::parse(text).unwrap();
        let features =
            |group, release| Ok(Features { volume_group_snapshot: group, release_leader_election_on_exit: release });
        // (rule, --feature-gates, features)
        let table = [
            ("defaults: v8.7.0's, group snapshots on", "", features(true, false)),
            ("group snapshots on", "CSIVolumeGroupSnapshot=true", features(true, false)),
            ("group snapshots off", "CSIVolumeGroupSnapshot=false", features(false, false)),
            ("release the Lease on exit", "ReleaseLeaderElectionOnExit=true", features(true, true)),
            ("an unknown gate", "Topology=true", Err(ValueError::UnknownGate("Topology".into()))),
            ("a Kubernetes-wide gate", "WatchList=false", features(true, false)),
        ];
        for (rule, text, want) in table {
            assert_eq!(Features::from_gates(&gates(text)), want, "{rule}");
        }
    }
}
