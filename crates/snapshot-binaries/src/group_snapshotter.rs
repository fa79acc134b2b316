//! csi-group-snapshotter, as its binary and `csi-sidecars` start it: [`group_snapshotter::start`] with
//! csi-snapshotter's flags, checked as csi-snapshotter checks them.

use group_snapshotter::start::SidecarArgs;
pub use group_snapshotter::start::{Config as GroupConfig, NAME, start};
use sidecar_runtime::describe::Metrics;
use sidecar_runtime::leader_election::group_snapshotter_lease_name;
use sidecar_runtime::{Beside, Described, Description, SetupError, SetupResult, Started};
use snapshotter::flags::sidecar::Args;

/// csi-snapshotter's flags, checked, as the group loop's configuration.
pub fn config(args: Args) -> Result<GroupConfig, SetupError> {
    args.validate().refused()?;
    GroupConfig::from_args(group_args(&args))
}

/// What the group loop reads of csi-snapshotter's flags.
pub fn group_args(args: &Args) -> SidecarArgs {
    SidecarArgs {
        common: args.common.clone(),
        retry: args.retry,
        timeout: args.timeout,
        resync_period: args.resync_period,
        groupsnapshot_name_prefix: args.groupsnapshot_name_prefix.clone(),
        groupsnapshot_name_uuid_length: args.groupsnapshot_name_uuid_length,
        worker_threads: args.worker_threads,
        extra_create_metadata: args.extra_create_metadata,
    }
}

/// csi-group-snapshotter, as `csi-sidecars` and the e2e harness find it: csi-snapshotter's flags and RBAC.
pub struct GroupSnapshotter;

impl Described for GroupSnapshotter {
    const DESCRIPTION: Description = Description {
        name: NAME,
        binary: "csi-group-snapshotter",
        lease: Some(group_snapshotter_lease_name),
        rbac: Some("csi-snapshotter.yaml"),
        metrics: Metrics::Runtime,
    };
    type Args = Args;
    type Config = GroupConfig;

    fn from_args(args: Args) -> Result<GroupConfig, SetupError> {
        config(args)
    }

    fn timeout(config: &GroupConfig) -> std::time::Duration {
        config.timeout()
    }

    async fn start(config: GroupConfig, mut beside: Beside<'_>) -> Result<Started, SetupError> {
        let driver = beside.driver;
        Ok(Started::Loop(start(config, beside.sidecar()?, driver).await?))
    }
}
