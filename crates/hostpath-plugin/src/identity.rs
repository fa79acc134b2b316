//! The Identity service: name, version, plugin capabilities, readiness.

use csi_client::proto::identity_server::Identity;
use csi_client::proto::plugin_capability::{self, service};
use csi_client::proto::{
    GetPluginCapabilitiesRequest, GetPluginCapabilitiesResponse, GetPluginInfoRequest, GetPluginInfoResponse,
    PluginCapability, ProbeRequest, ProbeResponse,
};
use tonic::{Request, Response, Status};

use crate::plugin::{Plugin, Shared};

/// Reported as `vendor_version`; never empty, since sidecars and csi-sanity refuse a plugin without one.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

#[tonic::async_trait]
impl Identity for Plugin {
    async fn get_plugin_info(
        &self,
        request: Request<GetPluginInfoRequest>,
    ) -> Result<Response<GetPluginInfoResponse>, Status> {
        self.call("GetPluginInfo", request, plugin_info).await
    }

    async fn get_plugin_capabilities(
        &self,
        request: Request<GetPluginCapabilitiesRequest>,
    ) -> Result<Response<GetPluginCapabilitiesResponse>, Status> {
        self.call("GetPluginCapabilities", request, plugin_capabilities).await
    }

    async fn probe(&self, request: Request<ProbeRequest>) -> Result<Response<ProbeResponse>, Status> {
        self.call("Probe", request, |_, _| Ok(ProbeResponse { ready: Some(true) })).await
    }
}

fn plugin_info(shared: &Shared, _: GetPluginInfoRequest) -> Result<GetPluginInfoResponse, Status> {
    Ok(GetPluginInfoResponse {
        name: shared.config.driver_name.clone(),
        vendor_version: VERSION.to_string(),
        manifest: Default::default(),
    })
}

fn plugin_capabilities(_: &Shared, _: GetPluginCapabilitiesRequest) -> Result<GetPluginCapabilitiesResponse, Status> {
    let services = [
        service::Type::ControllerService,
        service::Type::GroupControllerService,
        service::Type::VolumeAccessibilityConstraints,
    ];
    let capabilities = services
        .into_iter()
        .map(|kind| PluginCapability {
            r#type: Some(plugin_capability::Type::Service(plugin_capability::Service { r#type: kind as i32 })),
        })
        .collect();
    Ok(GetPluginCapabilitiesResponse { capabilities })
}
