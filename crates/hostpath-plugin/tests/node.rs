//! The bookkeeping node service against an in-process plugin.

mod common;

use common::*;
use csi_client::proto::node_service_capability::rpc;
use csi_client::proto::volume_capability::access_mode::Mode;
use csi_client::proto::volume_capability::{AccessType, MountVolume};
use csi_client::proto::{
    CapacityRange, ControllerExpandVolumeRequest, DeleteVolumeRequest, NodeExpandVolumeRequest,
    NodeGetCapabilitiesRequest, NodeGetInfoRequest, NodeGetVolumeStatsRequest, NodePublishVolumeRequest,
    NodeStageVolumeRequest, NodeUnpublishVolumeRequest, NodeUnstageVolumeRequest, VolumeCapability,
};
use hostpath_plugin::topology::NODE_KEY;
use tonic::Code;

fn stage(id: &str, path: &std::path::Path, capability: VolumeCapability) -> NodeStageVolumeRequest {
    NodeStageVolumeRequest {
        volume_id: id.into(),
        staging_target_path: path.display().to_string(),
        volume_capability: Some(capability),
        ..Default::default()
    }
}

fn publish(
    id: &str,
    staging: &std::path::Path,
    target: &std::path::Path,
    capability: VolumeCapability,
) -> NodePublishVolumeRequest {
    NodePublishVolumeRequest {
        volume_id: id.into(),
        staging_target_path: staging.display().to_string(),
        target_path: target.display().to_string(),
        volume_capability: Some(capability),
        ..Default::default()
    }
}

#[tokio::test]
async fn node_reports_info_and_capabilities() {
    let plugin = TestPlugin::start().await;
    let mut node = plugin.node().await;
    let info = node.node_get_info(NodeGetInfoRequest {}).await.unwrap().into_inner();
    assert_eq!(info.node_id, NODE);
    assert_eq!(info.max_volumes_per_node, 0);
    assert_eq!(info.accessible_topology.unwrap().segments, pairs(&[(NODE_KEY, NODE)]));
    let want: Vec<i32> = [
        rpc::Type::StageUnstageVolume,
        rpc::Type::GetVolumeStats,
        rpc::Type::ExpandVolume,
        rpc::Type::SingleNodeMultiWriter,
    ]
    .into_iter()
    .map(|t| t as i32)
    .collect();
    assert_eq!(node_capabilities(&plugin).await, want);

    let limited = TestPlugin::start_with(|c| c.max_volumes_per_node = 7).await;
    let info = limited.node().await.node_get_info(NodeGetInfoRequest {}).await.unwrap().into_inner();
    assert_eq!(info.max_volumes_per_node, 7, "--max-volumes-per-node");

    let old = TestPlugin::start_with(|c| c.single_node_multi_writer = false).await;
    assert_eq!(node_capabilities(&old).await, want[..3], "no SINGLE_NODE_MULTI_WRITER without the capability");
}

async fn node_capabilities(plugin: &TestPlugin) -> Vec<i32> {
    let response = plugin.node().await.node_get_capabilities(NodeGetCapabilitiesRequest {}).await.unwrap();
    response
        .into_inner()
        .capabilities
        .into_iter()
        .filter_map(|c| c.r#type)
        .map(|csi_client::proto::node_service_capability::Type::Rpc(r)| r.r#type)
        .collect()
}

#[tokio::test]
async fn mount_volume_lifecycle_is_recorded_and_idempotent() {
    let plugin = TestPlugin::start().await;
    let mut controller = plugin.controller().await;
    let mut node = plugin.node().await;
    let id = controller
        .create_volume(create_request("v", 2 * GI, mount()))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap()
        .volume_id;
    std::fs::write(plugin.volume_path(&id).join("f"), vec![1u8; 8192]).unwrap();
    let staging = plugin.dir.path().join("staging");
    let target = plugin.dir.path().join("pods/target");
    std::fs::create_dir_all(target.parent().unwrap()).unwrap();

    for _ in 0..2 {
        node.node_stage_volume(stage(&id, &staging, mount())).await.unwrap();
    }
    assert!(staging.is_dir());
    let mut readonly_mount = mount();
    if let Some(AccessType::Mount(m)) = readonly_mount.access_type.as_mut() {
        m.fs_type = "xfs".into();
    }
    assert_code(node.node_stage_volume(stage(&id, &staging, readonly_mount)).await, Code::AlreadyExists);
    assert_code(node.node_stage_volume(stage(&id, &staging, block())).await, Code::FailedPrecondition);

    for _ in 0..2 {
        node.node_publish_volume(publish(&id, &staging, &target, mount())).await.unwrap();
    }
    assert!(target.is_dir());
    let mut readonly = publish(&id, &staging, &target, mount());
    readonly.readonly = true;
    assert_code(node.node_publish_volume(readonly).await, Code::AlreadyExists);
    // SINGLE_NODE_WRITER allows one target path.
    let second = plugin.dir.path().join("pods/second");
    assert_code(node.node_publish_volume(publish(&id, &staging, &second, mount())).await, Code::FailedPrecondition);
    assert!(!second.exists());

    let stats = node
        .node_get_volume_stats(NodeGetVolumeStatsRequest {
            volume_id: id.clone(),
            volume_path: target.display().to_string(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let usage = &stats.usage[0];
    assert_eq!(usage.total, 2 * GI);
    assert!(usage.used >= 8192, "{usage:?}");
    assert_eq!(usage.available, usage.total - usage.used);

    // The controller grows the volume; the node confirms the new size and refuses more.
    let expand = ControllerExpandVolumeRequest {
        volume_id: id.clone(),
        capacity_range: Some(CapacityRange { required_bytes: 3 * GI, limit_bytes: 0 }),
        ..Default::default()
    };
    assert!(controller.controller_expand_volume(expand).await.unwrap().into_inner().node_expansion_required);
    let node_expand = |bytes: i64| NodeExpandVolumeRequest {
        volume_id: id.clone(),
        volume_path: target.display().to_string(),
        capacity_range: Some(CapacityRange { required_bytes: bytes, limit_bytes: 0 }),
        ..Default::default()
    };
    assert_eq!(node.node_expand_volume(node_expand(3 * GI)).await.unwrap().into_inner().capacity_bytes, 3 * GI);
    assert_code(node.node_expand_volume(node_expand(4 * GI)).await, Code::OutOfRange);

    // A staged or published volume is in use.
    assert_code(
        controller.delete_volume(DeleteVolumeRequest { volume_id: id.clone(), ..Default::default() }).await,
        Code::FailedPrecondition,
    );

    let unpublish = NodeUnpublishVolumeRequest { volume_id: id.clone(), target_path: target.display().to_string() };
    for _ in 0..2 {
        node.node_unpublish_volume(unpublish.clone()).await.unwrap();
    }
    assert!(!target.exists(), "the target path is removed");
    let unstage =
        NodeUnstageVolumeRequest { volume_id: id.clone(), staging_target_path: staging.display().to_string() };
    for _ in 0..2 {
        node.node_unstage_volume(unstage.clone()).await.unwrap();
    }
    assert!(staging.is_dir(), "the staging directory belongs to the CO");
    controller.delete_volume(DeleteVolumeRequest { volume_id: id.clone(), ..Default::default() }).await.unwrap();
    assert_code(node.node_unpublish_volume(unpublish).await, Code::NotFound);
}

#[tokio::test]
async fn block_targets_are_files_and_multi_writer_volumes_take_several() {
    let plugin = TestPlugin::start().await;
    let mut controller = plugin.controller().await;
    let mut node = plugin.node().await;
    let multi = capability(AccessType::Block(Default::default()), Mode::SingleNodeMultiWriter);
    let id = controller
        .create_volume(create_request("b", GI, multi.clone()))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap()
        .volume_id;
    let staging = plugin.dir.path().join("staging");
    node.node_stage_volume(stage(&id, &staging, multi.clone())).await.unwrap();
    let targets = [plugin.dir.path().join("t1"), plugin.dir.path().join("t2")];
    for target in &targets {
        node.node_publish_volume(publish(&id, &staging, target, multi.clone())).await.unwrap();
        assert!(target.is_file());
    }
    let stats = node
        .node_get_volume_stats(NodeGetVolumeStatsRequest {
            volume_id: id.clone(),
            volume_path: targets[1].display().to_string(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(stats.usage[0].total, GI);
    assert_code(
        node.node_publish_volume(publish(&id, &staging, &plugin.dir.path().join("t3"), mount())).await,
        Code::FailedPrecondition,
    );
}

#[tokio::test]
async fn node_requests_without_required_fields_fail() {
    let plugin = TestPlugin::start().await;
    let mut controller = plugin.controller().await;
    let mut node = plugin.node().await;
    let id = controller
        .create_volume(create_request("v", GI, mount()))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap()
        .volume_id;
    let staging = plugin.dir.path().join("staging");
    let target = plugin.dir.path().join("target");

    assert_code(node.node_stage_volume(stage("", &staging, mount())).await, Code::InvalidArgument);
    assert_code(
        node.node_stage_volume(NodeStageVolumeRequest {
            volume_id: id.clone(),
            volume_capability: Some(mount()),
            ..Default::default()
        })
        .await,
        Code::InvalidArgument,
    );
    assert_code(
        node.node_stage_volume(NodeStageVolumeRequest {
            volume_id: id.clone(),
            staging_target_path: "/x".into(),
            ..Default::default()
        })
        .await,
        Code::InvalidArgument,
    );
    let no_mode = VolumeCapability { access_type: Some(AccessType::Mount(MountVolume::default())), access_mode: None };
    assert_code(node.node_stage_volume(stage(&id, &staging, no_mode)).await, Code::InvalidArgument);
    assert_code(node.node_stage_volume(stage("missing", &staging, mount())).await, Code::NotFound);

    assert_code(
        node.node_unstage_volume(NodeUnstageVolumeRequest { volume_id: id.clone(), ..Default::default() }).await,
        Code::InvalidArgument,
    );
    assert_code(
        node.node_unstage_volume(NodeUnstageVolumeRequest { staging_target_path: "/x".into(), ..Default::default() })
            .await,
        Code::InvalidArgument,
    );

    assert_code(node.node_publish_volume(publish("", &staging, &target, mount())).await, Code::InvalidArgument);
    assert_code(
        node.node_publish_volume(NodePublishVolumeRequest {
            volume_id: id.clone(),
            volume_capability: Some(mount()),
            ..Default::default()
        })
        .await,
        Code::InvalidArgument,
    );
    let mut no_capability = publish(&id, &staging, &target, mount());
    no_capability.volume_capability = None;
    assert_code(node.node_publish_volume(no_capability).await, Code::InvalidArgument);
    let mut no_staging = publish(&id, &staging, &target, mount());
    no_staging.staging_target_path.clear();
    assert_code(node.node_publish_volume(no_staging).await, Code::FailedPrecondition);
    assert_code(node.node_publish_volume(publish(&id, &staging, &target, mount())).await, Code::FailedPrecondition);
    assert_code(node.node_publish_volume(publish("missing", &staging, &target, mount())).await, Code::NotFound);
    assert!(!target.exists());

    assert_code(
        node.node_unpublish_volume(NodeUnpublishVolumeRequest { volume_id: id.clone(), ..Default::default() }).await,
        Code::InvalidArgument,
    );
    assert_code(
        node.node_unpublish_volume(NodeUnpublishVolumeRequest { target_path: "/x".into(), ..Default::default() }).await,
        Code::InvalidArgument,
    );
    // Unpublishing a path the volume was never published at is fine and touches nothing.
    std::fs::create_dir(&target).unwrap();
    node.node_unpublish_volume(NodeUnpublishVolumeRequest {
        volume_id: id.clone(),
        target_path: target.display().to_string(),
    })
    .await
    .unwrap();
    assert!(target.exists());

    let stats = |volume_id: &str, volume_path: &str| NodeGetVolumeStatsRequest {
        volume_id: volume_id.into(),
        volume_path: volume_path.into(),
        ..Default::default()
    };
    assert_code(node.node_get_volume_stats(stats("", "some/path")).await, Code::InvalidArgument);
    assert_code(node.node_get_volume_stats(stats(&id, "")).await, Code::InvalidArgument);
    assert_code(node.node_get_volume_stats(stats("missing", "some/path")).await, Code::NotFound);
    assert_code(node.node_get_volume_stats(stats(&id, "some/path")).await, Code::NotFound);

    let expand = |volume_id: &str, volume_path: &str| NodeExpandVolumeRequest {
        volume_id: volume_id.into(),
        volume_path: volume_path.into(),
        ..Default::default()
    };
    assert_code(node.node_expand_volume(expand("", "some/path")).await, Code::InvalidArgument);
    assert_code(node.node_expand_volume(expand(&id, "")).await, Code::InvalidArgument);
    assert_code(node.node_expand_volume(expand("missing", "some/path")).await, Code::NotFound);
    assert_code(node.node_expand_volume(expand(&id, "some/path")).await, Code::NotFound);
}
