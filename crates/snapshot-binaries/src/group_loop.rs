//! What csi-snapshotter and csi-group-snapshotter share to start the group loop.

use csi_client::CsiClient;
use csi_client::capabilities::GroupControllerCapability;
use group_snapshotter::controller::sidecar::Options;
use group_snapshotter::translate::create_request::RequestOptions;
use sidecar_runtime::RetryPolicy;
use snapshotter::flags::sidecar::Args;

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

/// The group loop's options from csi-snapshotter's flags.
pub fn options(args: &Args, driver: &str) -> Options {
    Options {
        driver: driver.to_string(),
        request: RequestOptions {
            name_prefix: args.groupsnapshot_name_prefix.clone(),
            name_uuid_length: args.groupsnapshot_name_uuid_length,
            extra_create_metadata: args.extra_create_metadata,
        },
        workers: args.worker_threads,
        retry: RetryPolicy::from_args(&args.retry),
        resync_period: args.resync_period,
    }
}
