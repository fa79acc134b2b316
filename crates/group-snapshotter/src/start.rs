//! The wiring of the two group loops, for the binaries that run them and for `csi-sidecars`:
//!
//! - csi-group-snapshotter, csi-snapshotter's group loop alone: [`Config::from_args`], then [`start`], which refuses a
//!   driver without group snapshots and returns the loop to run under a Lease of its own,
//!   `external-snapshotter-group-leader-<driver>` (never csi-snapshotter's).
//! - csi-snapshotter with `CSIVolumeGroupSnapshot` on (its default since external-snapshotter v8.7.0): the same loop
//!   beside its content loop and under its Lease, built by [`sidecar_controller`] once [`sidecar_groups_served`] says
//!   the group kinds are served (a driver [`driver_has_group_snapshots`] says no to gets a warning, and the loop all
//!   the same, as upstream's).
//! - snapshot-controller with the same gate: [`controller_group_loop`], beside its single-snapshot loop.
//!
//! csi-group-snapshotter has csi-snapshotter's command line (crate `snapshotter`, `flags::sidecar::Args`, the gate
//! implied). Sidecar crates never depend on each other, so this crate cannot name that type: the binary checks the
//! command line as csi-snapshotter's (`Args::validate`) and hands over the flags the group loop reads, as
//! [`SidecarArgs`].

use std::time::Duration;

use csi_client::CsiClient;
use csi_client::capabilities::GroupControllerCapability;
use sidecar_runtime::leader_election::group_snapshotter_lease_name;
use sidecar_runtime::snapshot_operations::SnapshotMetrics;
use sidecar_runtime::{
    CommonArgs, Driver, EventRecorder, QueueMetrics, RetryArgs, RetryPolicy, SetupError, Sidecar, SidecarLoop,
};

use crate::controller::{common, sidecar};
use crate::translate::crd_answer::{self, Served};
use crate::translate::create_request::RequestOptions;

/// The sidecar's name in `csi-sidecars --sidecars` and in its messages.
pub const NAME: &str = "group-snapshotter";

/// The events' source component, as csi-snapshotter's group events: `csi-snapshotter <driver>`.
const EVENT_COMPONENT: &str = "csi-snapshotter";

/// The csi-snapshotter flags the group loop reads, from a command line checked as csi-snapshotter's.
#[derive(Clone, Debug)]
pub struct SidecarArgs {
    pub common: CommonArgs,
    pub retry: RetryArgs,
    /// `--timeout`: each CSI call's limit, and how long in-flight work may drain.
    pub timeout: Duration,
    /// `--resync-period`.
    pub resync_period: Duration,
    /// `--groupsnapshot-name-prefix`.
    pub groupsnapshot_name_prefix: String,
    /// `--groupsnapshot-name-uuid-length`.
    pub groupsnapshot_name_uuid_length: i64,
    /// `--worker-threads`.
    pub worker_threads: usize,
    /// `--extra-create-metadata`.
    pub extra_create_metadata: bool,
}

impl SidecarArgs {
    /// The group loop's options for the contents of `driver`.
    pub fn options(&self, driver: &str) -> sidecar::Options {
        sidecar::Options {
            driver: driver.to_string(),
            request: RequestOptions {
                name_prefix: self.groupsnapshot_name_prefix.clone(),
                name_uuid_length: self.groupsnapshot_name_uuid_length,
                extra_create_metadata: self.extra_create_metadata,
            },
            workers: self.worker_threads,
            retry: RetryPolicy::from_args(&self.retry),
            resync_period: self.resync_period,
        }
    }
}

/// csi-group-snapshotter's flags. Everything csi-snapshotter refuses at startup is refused before, by its own check
/// of the command line.
pub struct Config {
    args: SidecarArgs,
}

impl Config {
    pub fn from_args(args: SidecarArgs) -> Result<Config, SetupError> {
        Ok(Config { args })
    }

    /// The flags every sidecar shares, for [`Sidecar::start`].
    pub fn common(&self) -> CommonArgs {
        self.args.common.clone()
    }

    /// `--timeout`: each CSI call's limit, and how long in-flight work may drain.
    pub fn timeout(&self) -> Duration {
        self.args.timeout
    }
}

/// csi-group-snapshotter: refuses a driver without group snapshots and builds the group loop, to run under
/// `external-snapshotter-group-leader-<driver>`.
pub async fn start(config: Config, sidecar: &mut Sidecar, driver: &Driver) -> Result<SidecarLoop, SetupError> {
    let Config { args } = config;
    let (csi, driver) = (driver.csi.with_timeout(args.timeout), driver.name.clone());
    if !driver_has_group_snapshots(&csi).await {
        return Err(SetupError::message(format!(
            "CSI driver {driver} does not support CreateDeleteGetVolumeGroupSnapshot"
        )));
    }
    let events = sidecar.events(format!("{EVENT_COMPONENT} {driver}"));
    let controller = sidecar_controller(&args, sidecar, csi, &driver, events);
    let lease = group_snapshotter_lease_name(&driver);
    Ok(SidecarLoop::new(NAME, lease, args.timeout, |stop| controller.run(stop)))
}

/// csi-snapshotter's group loop for the contents of `driver`, on the process's caches and queue metrics. `csi`
/// carries `--timeout`; `events` are csi-snapshotter's (`csi-snapshotter <driver>`).
pub fn sidecar_controller(
    args: &SidecarArgs,
    sidecar: &mut Sidecar,
    csi: CsiClient,
    driver: &str,
    events: EventRecorder,
) -> sidecar::Controller {
    let queue_metrics = sidecar.queue_metrics();
    let options = args.options(driver);
    sidecar::Controller::new(sidecar.client(), &sidecar.caches(), csi, events, options, Some(&queue_metrics))
}

/// Whether csi-snapshotter, with `CSIVolumeGroupSnapshot` on, runs its group loop: the API server serves the group
/// kinds it reads. The gate is on by default since external-snapshotter v8.7.0, which therefore turns groups off for
/// the run, with a warning, on a cluster without the group CRDs (a driver vendor cannot tell whether a cluster has
/// them); single snapshots go on either way (external-snapshotter cmd/csi-snapshotter/main.go).
pub async fn sidecar_groups_served(client: &kube::Client) -> bool {
    match until_definite(|| sidecar::crds_served(client)).await {
        Ok(()) => true,
        Err(error) => {
            tracing::warn!(
                %error,
                "VolumeGroupSnapshot CRDs were not found; disabling the VolumeGroupSnapshot feature for this run. \
                 Install the VolumeGroupSnapshot CRDs to use this feature"
            );
            false
        }
    }
}

/// Runs the CRD check `check` until its answer is definite ([`crd_answer::served`]): a failure on the way is asked
/// again after each of [`crd_answer::retry_waits`]; the error of the last try when it never was.
async fn until_definite<F, Fut>(check: F) -> Result<(), String>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<(), kube::Error>>,
{
    let mut waits = crd_answer::retry_waits().into_iter();
    loop {
        let outcome = check().await;
        match crd_answer::served(outcome.as_ref().map(|_| ())) {
            Served::Yes => return Ok(()),
            Served::No(reason) => return Err(reason),
            Served::Unknown(error) => {
                let Some(wait) = waits.next() else { return Err(error) };
                tracing::info!(%error, retry_in = ?wait, "cannot tell whether the group snapshot CRDs are served, asking again");
                tokio::time::sleep(wait).await;
            }
        }
    }
}

/// Whether the driver offers CreateVolumeGroupSnapshot, DeleteVolumeGroupSnapshot and GetVolumeGroupSnapshot.
/// A driver without a GroupController service answers Unimplemented: that is "no", not an error.
pub async fn driver_has_group_snapshots(csi: &CsiClient) -> bool {
    match csi.group_controller_capabilities().await {
        Ok(capabilities) => capabilities.has(GroupControllerCapability::CreateDeleteGetVolumeGroupSnapshot),
        Err(err) => {
            tracing::warn!(error = %err, "GroupControllerGetCapabilities failed: no group snapshots");
            false
        }
    }
}

/// The snapshot-controller's group loop when `CSIVolumeGroupSnapshot` is on (`enabled`) and the API server serves the
/// three group snapshot kinds; `None` otherwise (with a warning when the gate is on: single snapshots go on without
/// groups). It shares the single-snapshot loop's `events` (the snapshot-controller's component), `queue_metrics` and
/// operation histogram `metrics`; the caller runs it beside that loop, under the snapshot-controller's Lease.
pub async fn controller_group_loop(
    sidecar: &Sidecar,
    enabled: bool,
    options: common::Options,
    events: EventRecorder,
    queue_metrics: &QueueMetrics,
    metrics: SnapshotMetrics,
) -> Option<common::Controller> {
    if !enabled {
        return None;
    }
    let client = sidecar.client();
    if let Err(error) = until_definite(|| common::crds_served(&client)).await {
        tracing::warn!(%error, "CSIVolumeGroupSnapshot is on but the group snapshot CRDs are not served: no group snapshots");
        return None;
    }
    Some(common::Controller::new(sidecar.client(), events, options, Some(queue_metrics), Some(metrics)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(clap::Parser)]
    struct Command {
        #[command(flatten)]
        common: CommonArgs,
    }

    fn args() -> SidecarArgs {
        let command: Command = sidecar_runtime::flags::try_parse_from(["csi-group-snapshotter"]).unwrap();
        SidecarArgs {
            common: command.common,
            retry: RetryArgs {
                retry_interval_start: Duration::from_secs(2),
                retry_interval_max: Duration::from_secs(60),
            },
            timeout: Duration::from_secs(60),
            resync_period: Duration::from_secs(900),
            groupsnapshot_name_prefix: "group".into(),
            groupsnapshot_name_uuid_length: 8,
            worker_threads: 3,
            extra_create_metadata: true,
        }
    }

    #[test]
    fn the_group_loop_reads_csi_snapshotters_flags() {
        let options = args().options("hostpath.csi.k8s.io");
        assert_eq!(options.driver, "hostpath.csi.k8s.io");
        assert_eq!(
            options.request,
            RequestOptions { name_prefix: "group".into(), name_uuid_length: 8, extra_create_metadata: true }
        );
        assert_eq!(options.workers, 3);
        assert_eq!(options.retry, RetryPolicy::new(Duration::from_secs(2), Duration::from_secs(60)));
        assert_eq!(options.resync_period, Duration::from_secs(900));
    }
}
