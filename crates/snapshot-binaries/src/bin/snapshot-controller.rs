//! snapshot-controller: binds VolumeSnapshots to VolumeSnapshotContents and creates the contents of dynamic
//! snapshots, once per cluster. A drop-in for the upstream image: same flags, Lease, finalizers and events.

use std::time::Duration;

use group_snapshotter::controller::common as group;
use sidecar_runtime::snapshot_operations::SnapshotMetrics;
use sidecar_runtime::{QueueMetrics, RetryPolicy, Sidecar};
use snapshotter::controller::common::crds::wait_for_crds;
use snapshotter::controller::common::{Controller, EVENT_COMPONENT, LEASE_NAME, Options};
use snapshotter::flags::controller::Args;
use snapshotter::translate::common::dynamic_content::ContentOptions;

/// How long in-flight syncs may take to finish after SIGTERM (upstream has no `--timeout` here).
const DRAIN: Duration = Duration::from_secs(10);

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Args = sidecar_runtime::flags::parse();
    args.common.exit_if_version_requested(env!("CARGO_PKG_VERSION"));
    let features = args.validate()?;
    let mut sidecar = Sidecar::start(&args.common).await?;
    wait_for_crds(&sidecar.client(), args.retry_crd_interval_max).await?;
    if args.enable_distributed_snapshotting {
        tracing::warn!("--enable-distributed-snapshotting is accepted but contents are not labelled with a node yet");
    }
    let options = Options {
        workers: args.worker_threads,
        retry: RetryPolicy::from_args(&args.retry),
        resync_period: args.resync_period,
        content: ContentOptions {
            prevent_volume_mode_conversion: args.prevent_volume_mode_conversion,
            managed_by_node: None,
        },
    };
    let queue_metrics = QueueMetrics::register(sidecar.registry());
    let events = sidecar.events(EVENT_COMPONENT);
    let metrics = SnapshotMetrics::register(sidecar.registry());
    let group_options =
        group::Options { workers: options.workers, retry: options.retry, resync_period: options.resync_period };
    let mut serve_groups = features.volume_group_snapshot;
    if serve_groups && let Err(error) = group::crds_served(&sidecar.client()).await {
        tracing::warn!(%error, "CSIVolumeGroupSnapshot is on but the group snapshot CRDs are not served: no group snapshots");
        serve_groups = false;
    }
    let groups = serve_groups.then(|| {
        let metrics = Some(metrics.clone());
        group::Controller::new(sidecar.client(), events.clone(), group_options, Some(&queue_metrics), metrics)
    });
    let controller = Controller::new(sidecar.client(), events, options, Some(&queue_metrics), metrics);
    if let Some(address) = sidecar.serve_http().await? {
        tracing::info!(%address, "serving metrics and health checks");
    }
    sidecar
        .run(LEASE_NAME, DRAIN, |stop| async move {
            let groups = async {
                if let Some(groups) = groups {
                    groups.run(stop.clone()).await;
                }
            };
            tokio::join!(controller.run(stop.clone()), groups);
        })
        .await?;
    Ok(())
}
