//! Typed CSI calls. Each call runs under the caller's timeout (sent to the
//! plugin as the gRPC deadline too), is logged at debug level with secrets
//! stripped, and is recorded in `csi_sidecar_operations_seconds`.

use std::future::Future;
use std::time::{Duration, Instant};

use tonic::transport::Channel;

use crate::capabilities::{ControllerCapabilities, GroupControllerCapabilities, NodeCapabilities, PluginCapabilities};
use crate::connection::Connection;
use crate::error::{CallError, go_code_name};
use crate::metrics::OperationMetrics;
use crate::proto::{
    self, controller_client::ControllerClient, group_controller_client::GroupControllerClient,
    identity_client::IdentityClient, node_client::NodeClient,
};
use crate::redact::capped;

/// How long one Probe may take inside [`CsiClient::probe_until_ready`] is the
/// client's timeout; probes are spaced by this interval, as upstream does.
const PROBE_INTERVAL: Duration = Duration::from_secs(1);

/// Default cap on the length of a logged response, in characters.
pub const DEFAULT_MAX_LOG_LENGTH: usize = 4096;

/// A CSI client bound to one plugin connection.
#[derive(Clone)]
pub struct CsiClient {
    channel: Channel,
    timeout: Duration,
    metrics: OperationMetrics,
    max_log_length: usize,
    /// Calls serve an in-tree volume (CSI migration): recorded in the metrics' `migrated` label.
    migrated: bool,
    /// Asked before every call; a refusal ends the call before it reaches the driver.
    fence: Option<Fence>,
}

impl std::fmt::Debug for CsiClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CsiClient")
            .field("channel", &self.channel)
            .field("timeout", &self.timeout)
            .field("metrics", &self.metrics)
            .field("max_log_length", &self.max_log_length)
            .field("migrated", &self.migrated)
            .field("fenced", &self.fence.is_some())
            .finish()
    }
}

/// Whether a call may go to the driver now: `Err(why)` refuses it. A sidecar under leader election fences its calls
/// with its leadership, so that a replica that may no longer lead never calls the driver.
pub type Fence = std::sync::Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("CSI driver probe failed: {0}")]
    Failed(#[source] CallError),
    #[error("CSI driver returned an empty name from GetPluginInfo")]
    EmptyDriverName,
    #[error(transparent)]
    Call(#[from] CallError),
}

macro_rules! rpc {
    ($(#[$doc:meta])* $name:ident, $client:ident, $service:literal, $method:literal, $call:ident, $req:ty => $resp:ty) => {
        $(#[$doc])*
        pub async fn $name(&self, request: $req) -> Result<$resp, CallError> {
            self.call(concat!("/csi.v1.", $service, "/", $method), request, |channel, request| async move {
                $client::new(channel).$call(request).await
            })
            .await
        }
    };
}

impl CsiClient {
    pub fn new(connection: &Connection, timeout: Duration, metrics: OperationMetrics) -> Self {
        CsiClient {
            channel: connection.channel.clone(),
            timeout,
            metrics,
            max_log_length: DEFAULT_MAX_LOG_LENGTH,
            migrated: false,
            fence: None,
        }
    }

    /// The same client, each call first asking `fence`; a refused call fails with UNAVAILABLE naming the reason,
    /// unsent and unmeasured.
    pub fn with_fence(&self, fence: Fence) -> CsiClient {
        CsiClient { fence: Some(fence), ..self.clone() }
    }

    /// The same client for calls that serve a volume of the in-tree plugin the driver replaces (CSI migration).
    pub fn for_migrated_volume(&self) -> CsiClient {
        CsiClient { migrated: true, ..self.clone() }
    }

    /// Caps logged responses at `max` characters (0 = no cap).
    /// The same connection and metrics with another call timeout: several sidecars in one process share the driver
    /// connection, each with its own `--timeout`.
    pub fn with_timeout(&self, timeout: Duration) -> CsiClient {
        CsiClient { timeout, ..self.clone() }
    }

    pub fn with_max_log_length(mut self, max: usize) -> Self {
        self.max_log_length = max;
        self
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    pub fn metrics(&self) -> &OperationMetrics {
        &self.metrics
    }

    /// Runs one RPC under the timeout, logging and measuring it.
    async fn call<Req, Resp, F, Fut>(&self, method: &'static str, request: Req, send: F) -> Result<Resp, CallError>
    where
        Req: std::fmt::Debug,
        Resp: std::fmt::Debug,
        F: FnOnce(Channel, tonic::Request<Req>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<Resp>, tonic::Status>>,
    {
        if let Some(Err(reason)) = self.fence.as_ref().map(|fence| fence()) {
            tracing::warn!(method, %reason, "CSI call not made");
            let status = tonic::Status::unavailable(format!("not called: {reason}"));
            return Err(CallError::Status { method, status });
        }
        // `{:?}` of a CSI request never shows secrets: see crate::redact.
        tracing::debug!(method, request = ?request, "CSI call");
        let mut grpc_request = tonic::Request::new(request);
        grpc_request.set_timeout(self.timeout);
        let started = Instant::now();
        let outcome = match tokio::time::timeout(self.timeout, send(self.channel.clone(), grpc_request)).await {
            Ok(Ok(response)) => Ok(response.into_inner()),
            // tonic enforces the deadline it sends and reports it as Canceled;
            // upstream (Go) reports DeadlineExceeded, which is what callers expect.
            Ok(Err(status)) if status.code() == tonic::Code::Cancelled && started.elapsed() >= self.timeout => {
                Err(CallError::Timeout { method, timeout: self.timeout })
            }
            Ok(Err(status)) => Err(CallError::Status { method, status }),
            Err(_) => Err(CallError::Timeout { method, timeout: self.timeout }),
        };
        let elapsed = started.elapsed();
        match &outcome {
            Ok(response) => {
                self.metrics.observe(method, go_code_name(tonic::Code::Ok), elapsed, self.migrated);
                tracing::debug!(method, ?elapsed, response = %capped(format!("{response:?}"), self.max_log_length), "CSI call succeeded");
            }
            Err(err) => {
                self.metrics.observe(method, err.metric_code(), elapsed, self.migrated);
                tracing::debug!(method, ?elapsed, error = %err, "CSI call failed");
            }
        }
        outcome
    }

    rpc!(get_plugin_info_raw, IdentityClient, "Identity", "GetPluginInfo", get_plugin_info,
        proto::GetPluginInfoRequest => proto::GetPluginInfoResponse);
    rpc!(get_plugin_capabilities_raw, IdentityClient, "Identity", "GetPluginCapabilities", get_plugin_capabilities,
        proto::GetPluginCapabilitiesRequest => proto::GetPluginCapabilitiesResponse);
    rpc!(probe_raw, IdentityClient, "Identity", "Probe", probe, proto::ProbeRequest => proto::ProbeResponse);
    rpc!(controller_get_capabilities_raw, ControllerClient, "Controller", "ControllerGetCapabilities",
        controller_get_capabilities, proto::ControllerGetCapabilitiesRequest => proto::ControllerGetCapabilitiesResponse);
    rpc!(group_controller_get_capabilities_raw, GroupControllerClient, "GroupController",
        "GroupControllerGetCapabilities", group_controller_get_capabilities,
        proto::GroupControllerGetCapabilitiesRequest => proto::GroupControllerGetCapabilitiesResponse);

    rpc!(node_get_info, NodeClient, "Node", "NodeGetInfo", node_get_info, proto::NodeGetInfoRequest => proto::NodeGetInfoResponse);
    rpc!(node_get_capabilities_raw, NodeClient, "Node", "NodeGetCapabilities", node_get_capabilities,
        proto::NodeGetCapabilitiesRequest => proto::NodeGetCapabilitiesResponse);

    rpc!(create_volume, ControllerClient, "Controller", "CreateVolume", create_volume,
        proto::CreateVolumeRequest => proto::CreateVolumeResponse);
    rpc!(delete_volume, ControllerClient, "Controller", "DeleteVolume", delete_volume,
        proto::DeleteVolumeRequest => proto::DeleteVolumeResponse);
    rpc!(controller_publish_volume, ControllerClient, "Controller", "ControllerPublishVolume", controller_publish_volume,
        proto::ControllerPublishVolumeRequest => proto::ControllerPublishVolumeResponse);
    rpc!(controller_unpublish_volume, ControllerClient, "Controller", "ControllerUnpublishVolume",
        controller_unpublish_volume,
        proto::ControllerUnpublishVolumeRequest => proto::ControllerUnpublishVolumeResponse);
    rpc!(controller_expand_volume, ControllerClient, "Controller", "ControllerExpandVolume", controller_expand_volume,
        proto::ControllerExpandVolumeRequest => proto::ControllerExpandVolumeResponse);
    rpc!(controller_modify_volume, ControllerClient, "Controller", "ControllerModifyVolume", controller_modify_volume,
        proto::ControllerModifyVolumeRequest => proto::ControllerModifyVolumeResponse);
    rpc!(list_volumes, ControllerClient, "Controller", "ListVolumes", list_volumes,
        proto::ListVolumesRequest => proto::ListVolumesResponse);
    rpc!(controller_list_volume_health, ControllerClient, "Controller", "ControllerListVolumeHealth",
        controller_list_volume_health,
        proto::ControllerListVolumeHealthRequest => proto::ControllerListVolumeHealthResponse);
    rpc!(controller_get_volume_health, ControllerClient, "Controller", "ControllerGetVolumeHealth",
        controller_get_volume_health,
        proto::ControllerGetVolumeHealthRequest => proto::ControllerGetVolumeHealthResponse);
    rpc!(get_capacity, ControllerClient, "Controller", "GetCapacity", get_capacity,
        proto::GetCapacityRequest => proto::GetCapacityResponse);
    rpc!(validate_volume_capabilities, ControllerClient, "Controller", "ValidateVolumeCapabilities",
        validate_volume_capabilities,
        proto::ValidateVolumeCapabilitiesRequest => proto::ValidateVolumeCapabilitiesResponse);
    rpc!(create_snapshot, ControllerClient, "Controller", "CreateSnapshot", create_snapshot,
        proto::CreateSnapshotRequest => proto::CreateSnapshotResponse);
    rpc!(delete_snapshot, ControllerClient, "Controller", "DeleteSnapshot", delete_snapshot,
        proto::DeleteSnapshotRequest => proto::DeleteSnapshotResponse);
    rpc!(list_snapshots, ControllerClient, "Controller", "ListSnapshots", list_snapshots,
        proto::ListSnapshotsRequest => proto::ListSnapshotsResponse);
    rpc!(create_volume_group_snapshot, GroupControllerClient, "GroupController", "CreateVolumeGroupSnapshot",
        create_volume_group_snapshot,
        proto::CreateVolumeGroupSnapshotRequest => proto::CreateVolumeGroupSnapshotResponse);
    rpc!(delete_volume_group_snapshot, GroupControllerClient, "GroupController", "DeleteVolumeGroupSnapshot",
        delete_volume_group_snapshot,
        proto::DeleteVolumeGroupSnapshotRequest => proto::DeleteVolumeGroupSnapshotResponse);
    rpc!(get_volume_group_snapshot, GroupControllerClient, "GroupController", "GetVolumeGroupSnapshot",
        get_volume_group_snapshot,
        proto::GetVolumeGroupSnapshotRequest => proto::GetVolumeGroupSnapshotResponse);

    /// GetPluginInfo; an empty name is an error (the CSI spec requires one).
    /// Also sets the metrics' `driver_name` label.
    pub async fn driver_info(&self) -> Result<proto::GetPluginInfoResponse, ProbeError> {
        let info = self.get_plugin_info_raw(proto::GetPluginInfoRequest {}).await?;
        if info.name.is_empty() {
            return Err(ProbeError::EmptyDriverName);
        }
        self.metrics.set_driver_name(&info.name);
        Ok(info)
    }

    pub async fn plugin_capabilities(&self) -> Result<PluginCapabilities, CallError> {
        let response = self.get_plugin_capabilities_raw(proto::GetPluginCapabilitiesRequest {}).await?;
        Ok(PluginCapabilities::from_response(&response.capabilities))
    }

    pub async fn controller_capabilities(&self) -> Result<ControllerCapabilities, CallError> {
        let response = self.controller_get_capabilities_raw(proto::ControllerGetCapabilitiesRequest {}).await?;
        Ok(ControllerCapabilities::from_response(&response.capabilities))
    }

    pub async fn node_capabilities(&self) -> Result<NodeCapabilities, CallError> {
        let response = self.node_get_capabilities_raw(proto::NodeGetCapabilitiesRequest {}).await?;
        Ok(NodeCapabilities::from_response(&response.capabilities))
    }

    pub async fn group_controller_capabilities(&self) -> Result<GroupControllerCapabilities, CallError> {
        let response =
            self.group_controller_get_capabilities_raw(proto::GroupControllerGetCapabilitiesRequest {}).await?;
        Ok(GroupControllerCapabilities::from_response(&response.capabilities))
    }

    /// One Probe: `Ok(true)` when ready (an absent `ready` means ready).
    pub async fn probe(&self) -> Result<bool, CallError> {
        let response = self.probe_raw(proto::ProbeRequest {}).await?;
        Ok(response.ready.unwrap_or(true))
    }

    /// Upstream's ProbeForever: probe now and then every second until the
    /// plugin says it is ready. A probe that times out or answers "not ready"
    /// is retried; any other failure is fatal.
    pub async fn probe_until_ready(&self) -> Result<(), ProbeError> {
        loop {
            match self.probe().await {
                Ok(true) => return Ok(()),
                Ok(false) => tracing::info!("CSI driver is not ready yet"),
                Err(err) if err.code() == tonic::Code::DeadlineExceeded => {
                    tracing::info!(error = %err, "CSI driver probe timed out, retrying")
                }
                Err(err) => return Err(ProbeError::Failed(err)),
            }
            tokio::time::sleep(PROBE_INTERVAL).await;
        }
    }
}
