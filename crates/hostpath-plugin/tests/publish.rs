//! ControllerPublishVolume / ControllerUnpublishVolume, served only with `--attach-required`, and the publish context
//! they answer, which the node calls check.

mod common;

use std::collections::HashMap;

use common::*;
use csi_client::proto::controller_service_capability::rpc;
use csi_client::proto::{
    ControllerGetCapabilitiesRequest, ControllerPublishVolumeRequest, ControllerUnpublishVolumeRequest,
    DeleteVolumeRequest, ListVolumesRequest, NodeStageVolumeRequest, NodeUnstageVolumeRequest,
};
use hostpath_plugin::publish::{ATTACHMENT_CONTEXT_KEY, NODE_CONTEXT_KEY};
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

fn stage_request(
    volume_id: &str,
    staging: &std::path::Path,
    context: &HashMap<String, String>,
) -> NodeStageVolumeRequest {
    NodeStageVolumeRequest {
        volume_id: volume_id.into(),
        staging_target_path: staging.display().to_string(),
        volume_capability: Some(mount()),
        publish_context: context.clone(),
        ..Default::default()
    }
}

async fn published_nodes(plugin: &TestPlugin) -> Vec<Vec<String>> {
    let listed = plugin.controller().await.list_volumes(ListVolumesRequest::default()).await.unwrap().into_inner();
    listed.entries.into_iter().map(|e| e.status.expect("a status with attach required").published_node_ids).collect()
}

#[tokio::test]
async fn the_publish_context_is_the_attachments_and_node_stage_checks_it() {
    let plugin = TestPlugin::start_with(|c| c.attach_required = true).await;
    let mut controller = plugin.controller().await;
    let mut node = plugin.node().await;
    let volume = controller.create_volume(create_request("pv-1", 1 << 20, mount())).await.unwrap().into_inner();
    let volume_id = volume.volume.unwrap().volume_id;
    let staging = plugin.dir.path().join("staging");
    assert_eq!(published_nodes(&plugin).await, vec![Vec::<String>::new()]);

    // Staging before the attachment is refused.
    assert_code(
        node.node_stage_volume(stage_request(&volume_id, &staging, &HashMap::new())).await,
        Code::FailedPrecondition,
    );

    let context = controller.controller_publish_volume(publish_request(&volume_id, NODE)).await.unwrap().into_inner();
    let context = context.publish_context;
    assert_eq!(context.get(NODE_CONTEXT_KEY).map(String::as_str), Some(NODE));
    assert!(context.get(ATTACHMENT_CONTEXT_KEY).is_some_and(|id| !id.is_empty()), "{context:?}");
    assert_eq!(published_nodes(&plugin).await, vec![vec![NODE.to_string()]]);
    let again = controller.controller_publish_volume(publish_request(&volume_id, NODE)).await.unwrap().into_inner();
    assert_eq!(again.publish_context, context, "a repeated publish answers the same context");
    let readonly = ControllerPublishVolumeRequest { readonly: true, ..publish_request(&volume_id, NODE) };
    assert_code(controller.controller_publish_volume(readonly).await, Code::AlreadyExists);

    // (case, publish context given to NodeStageVolume, outcome)
    let mut forged = context.clone();
    forged.insert(ATTACHMENT_CONTEXT_KEY.into(), "another-attachment".into());
    let mut other_node = context.clone();
    other_node.insert(NODE_CONTEXT_KEY.into(), "elsewhere".into());
    let table = [
        ("no context", HashMap::new(), Code::FailedPrecondition),
        ("another attachment's id", forged, Code::FailedPrecondition),
        ("another node", other_node, Code::FailedPrecondition),
        ("the attachment's context", context.clone(), Code::Ok),
    ];
    for (case, given, code) in table {
        let got = node.node_stage_volume(stage_request(&volume_id, &staging, &given)).await;
        assert_eq!(got.err().map_or(Code::Ok, |s| s.code()), code, "{case}");
    }
    // Still attached: DeleteVolume is refused until the node and the controller let go.
    node.node_unstage_volume(NodeUnstageVolumeRequest {
        volume_id: volume_id.clone(),
        staging_target_path: staging.display().to_string(),
    })
    .await
    .unwrap();
    let delete = DeleteVolumeRequest { volume_id: volume_id.clone(), ..Default::default() };
    assert_code(controller.delete_volume(delete.clone()).await, Code::FailedPrecondition);

    // Detached and attached again: the old context is stale.
    let unpublish =
        ControllerUnpublishVolumeRequest { volume_id: volume_id.clone(), node_id: NODE.into(), ..Default::default() };
    controller.controller_unpublish_volume(unpublish.clone()).await.unwrap();
    assert_eq!(published_nodes(&plugin).await, vec![Vec::<String>::new()]);
    assert_code(node.node_stage_volume(stage_request(&volume_id, &staging, &context)).await, Code::FailedPrecondition);
    let fresh = controller.controller_publish_volume(publish_request(&volume_id, NODE)).await.unwrap().into_inner();
    assert_ne!(fresh.publish_context, context, "a new attachment has a new id");
    assert_code(node.node_stage_volume(stage_request(&volume_id, &staging, &context)).await, Code::FailedPrecondition);

    // The attachment survives a restart, then goes with ControllerUnpublishVolume; then the volume can be deleted.
    let mut plugin = plugin;
    plugin.restart().await;
    let mut controller = plugin.controller().await;
    assert_eq!(published_nodes(&plugin).await, vec![vec![NODE.to_string()]]);
    controller.controller_unpublish_volume(unpublish).await.unwrap();
    controller.delete_volume(delete).await.unwrap();
}
