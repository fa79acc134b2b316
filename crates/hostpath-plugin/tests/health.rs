//! Volume and storage health (CSI v1.13, alpha) against an in-process plugin: only adverse conditions are reported.

mod common;

use common::*;
use csi_client::proto::{
    ControllerGetVolumeHealthRequest, ControllerListVolumeHealthRequest, NodeGetStorageHealthRequest,
    NodeGetVolumeHealthRequest, StorageHealthErrorType, VolumeHealth, VolumeHealthErrorType,
};
use hostpath_plugin::health::{DATA_MISSING, STATE_DIRECTORY_UNREADABLE};
use tonic::Code;

/// (volume id, [(status, reason)]) of one health answer.
fn statuses(health: VolumeHealth) -> (String, Vec<(i32, String)>) {
    (health.volume_id, health.health_statuses.into_iter().map(|e| (e.status, e.reason)).collect())
}

#[tokio::test]
async fn a_volume_whose_data_went_is_inaccessible_from_controller_and_node() {
    let plugin = TestPlugin::start().await;
    let mut controller = plugin.controller().await;
    let mut node = plugin.node().await;
    let mut ids = Vec::new();
    for name in ["first", "second", "third"] {
        let created = controller.create_volume(create_request(name, GI, mount())).await.unwrap().into_inner();
        ids.push(created.volume.unwrap().volume_id);
    }
    let get = |id: &str| ControllerGetVolumeHealthRequest { volume_id: id.into(), ..Default::default() };
    let node_get = |id: &str| NodeGetVolumeHealthRequest { volume_id: id.into(), ..Default::default() };

    // Healthy volumes: no entry, and an empty list.
    let healthy = controller.controller_get_volume_health(get(&ids[0])).await.unwrap().into_inner();
    assert_eq!(statuses(healthy.volume_health.unwrap()), (ids[0].clone(), vec![]));
    let listed = controller.controller_list_volume_health(ControllerListVolumeHealthRequest::default()).await;
    assert!(listed.unwrap().into_inner().entries.is_empty());

    // The data of two volumes goes behind the plugin's back.
    for id in [&ids[0], &ids[2]] {
        std::fs::remove_dir_all(plugin.volume_path(id)).unwrap();
    }
    let inaccessible = vec![(VolumeHealthErrorType::Inaccessible as i32, DATA_MISSING.to_string())];
    let from_controller = controller.controller_get_volume_health(get(&ids[0])).await.unwrap().into_inner();
    assert_eq!(statuses(from_controller.volume_health.unwrap()), (ids[0].clone(), inaccessible.clone()));
    let from_node = node.node_get_volume_health(node_get(&ids[0])).await.unwrap().into_inner();
    assert_eq!(statuses(from_node.volume_health.unwrap()), (ids[0].clone(), inaccessible.clone()));
    let still_fine = node.node_get_volume_health(node_get(&ids[1])).await.unwrap().into_inner();
    assert_eq!(statuses(still_fine.volume_health.unwrap()), (ids[1].clone(), vec![]));

    // The list names only the two, paged as ListVolumes is.
    let first_page = controller
        .controller_list_volume_health(ControllerListVolumeHealthRequest { max_entries: 1, ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(first_page.entries.len(), 1);
    assert!(!first_page.next_token.is_empty());
    let second_page = controller
        .controller_list_volume_health(ControllerListVolumeHealthRequest {
            starting_token: first_page.next_token,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(second_page.next_token.is_empty());
    let listed: Vec<_> = first_page.entries.into_iter().chain(second_page.entries).map(statuses).collect();
    assert_eq!(listed, vec![(ids[0].clone(), inaccessible.clone()), (ids[2].clone(), inaccessible)]);

    // Unknown and missing ids.
    assert_code(controller.controller_get_volume_health(get("nope")).await, Code::NotFound);
    assert_code(controller.controller_get_volume_health(get("")).await, Code::InvalidArgument);
    assert_code(node.node_get_volume_health(node_get("nope")).await, Code::NotFound);
    assert_code(
        controller
            .controller_list_volume_health(ControllerListVolumeHealthRequest {
                starting_token: "bogus".into(),
                ..Default::default()
            })
            .await,
        Code::Aborted,
    );
}

#[tokio::test]
async fn an_unreadable_state_directory_is_storage_unreachable_from_the_node() {
    let plugin = TestPlugin::start().await;
    let mut node = plugin.node().await;
    let healthy = node.node_get_storage_health(NodeGetStorageHealthRequest::default()).await.unwrap().into_inner();
    assert!(healthy.backend_health.is_empty(), "{healthy:?}");

    let moved = plugin.dir.path().join("state-moved");
    std::fs::rename(&plugin.config.state_dir, &moved).unwrap();
    let gone = node.node_get_storage_health(NodeGetStorageHealthRequest::default()).await.unwrap().into_inner();
    let reported: Vec<_> = gone.backend_health.iter().map(|b| (b.status, b.reason.as_str())).collect();
    assert_eq!(reported, vec![(StorageHealthErrorType::StorageUnreachable as i32, STATE_DIRECTORY_UNREADABLE)]);

    std::fs::rename(&moved, &plugin.config.state_dir).unwrap();
    let back = node.node_get_storage_health(NodeGetStorageHealthRequest::default()).await.unwrap().into_inner();
    assert!(back.backend_health.is_empty(), "{back:?}");
}
