//! ControllerPublishVolume / ControllerUnpublishVolume, served only with `--attach-required`.

mod common;

use common::*;
use csi_client::proto::controller_service_capability::rpc;
use csi_client::proto::{
    ControllerGetCapabilitiesRequest, ControllerPublishVolumeRequest, ControllerUnpublishVolumeRequest,
};
use tonic::Code;

async fn advertises_publish(plugin: &TestPlugin) -> bool {
    let response =
        plugin.controller().await.controller_get_capabilities(ControllerGetCapabilitiesRequest {}).await.unwrap();
    response.into_inner().capabilities.into_iter().filter_map(|c| c.r#type).any(|t| {
        let csi_client::proto::controller_service_capability::Type::Rpc(r) = t;
        r.r#type == rpc::Type::PublishUnpublishVolume as i32
    })
}

fn publish_request(volume_id: &str, node_id: &str) -> ControllerPublishVolumeRequest {
    ControllerPublishVolumeRequest {
        volume_id: volume_id.into(),
        node_id: node_id.into(),
        volume_capability: Some(mount()),
        ..Default::default()
    }
}

#[tokio::test]
async fn publish_is_served_only_when_attach_is_required() {
    let plain = TestPlugin::start().await;
    assert!(!advertises_publish(&plain).await);
    assert_code(
        plain.controller().await.controller_publish_volume(publish_request("v", NODE)).await,
        Code::Unimplemented,
    );

    let plugin = TestPlugin::start_with(|c| c.attach_required = true).await;
    assert!(advertises_publish(&plugin).await);
    let mut controller = plugin.controller().await;
    let volume = controller.create_volume(create_request("pv-1", 1 << 20, mount())).await.unwrap().into_inner();
    let volume_id = volume.volume.unwrap().volume_id;

    // (case, request, outcome)
    let table = [
        ("an existing volume on this node", publish_request(&volume_id, NODE), Code::Ok),
        ("a missing volume", publish_request("no-such-volume", NODE), Code::NotFound),
        ("another node", publish_request(&volume_id, "elsewhere"), Code::NotFound),
        ("no volume id", publish_request("", NODE), Code::InvalidArgument),
        ("no node id", publish_request(&volume_id, ""), Code::InvalidArgument),
        (
            "no capability",
            ControllerPublishVolumeRequest { volume_capability: None, ..publish_request(&volume_id, NODE) },
            Code::InvalidArgument,
        ),
    ];
    for (case, request, code) in table {
        let got = controller.controller_publish_volume(request).await.map(|_| ()).map_err(|s| s.code());
        assert_eq!(got.err().unwrap_or(Code::Ok), code, "{case}");
    }
    for volume in [volume_id.as_str(), "no-such-volume"] {
        let request =
            ControllerUnpublishVolumeRequest { volume_id: volume.into(), node_id: NODE.into(), ..Default::default() };
        controller.controller_unpublish_volume(request).await.unwrap_or_else(|e| panic!("unpublish {volume}: {e}"));
    }
}

#[tokio::test]
async fn list_volumes_reports_the_nodes_a_volume_is_published_to() {
    use csi_client::proto::ListVolumesRequest;
    let plugin = TestPlugin::start_with(|c| c.attach_required = true).await;
    let mut controller = plugin.controller().await;
    let capabilities = controller.controller_get_capabilities(ControllerGetCapabilitiesRequest {}).await.unwrap();
    let advertised = capabilities.into_inner().capabilities.into_iter().filter_map(|c| c.r#type).any(|t| {
        let csi_client::proto::controller_service_capability::Type::Rpc(r) = t;
        r.r#type == rpc::Type::ListVolumesPublishedNodes as i32
    });
    assert!(advertised, "LIST_VOLUMES_PUBLISHED_NODES with --attach-required");
    let volume = controller.create_volume(create_request("pv-1", 1 << 20, mount())).await.unwrap().into_inner();
    let volume_id = volume.volume.unwrap().volume_id;
    let published = |mut controller: csi_client::proto::controller_client::ControllerClient<_>| async move {
        let listed = controller.list_volumes(ListVolumesRequest::default()).await.unwrap().into_inner();
        listed.entries[0].status.as_ref().expect("a status per entry").published_node_ids.clone()
    };
    assert!(published(controller.clone()).await.is_empty());
    for _ in 0..2 {
        controller.controller_publish_volume(publish_request(&volume_id, NODE)).await.unwrap();
    }
    assert_eq!(published(controller.clone()).await, vec![NODE.to_string()], "published once, however often asked");
    let unpublish =
        ControllerUnpublishVolumeRequest { volume_id: volume_id.clone(), node_id: NODE.into(), ..Default::default() };
    controller.controller_unpublish_volume(unpublish).await.unwrap();
    assert!(published(controller.clone()).await.is_empty(), "unpublished");
}
