//! Fault injection and persistence across restarts, against an in-process plugin.

mod common;

use std::time::{Duration, Instant};

use common::*;
use csi_client::proto::{
    CreateSnapshotRequest, CreateVolumeGroupSnapshotRequest, DeleteVolumeRequest, GetVolumeGroupSnapshotRequest,
    ListSnapshotsRequest, ListVolumesRequest, NodeStageVolumeRequest, ProbeRequest,
};
use tonic::Code;

async fn volume_names(plugin: &TestPlugin) -> Vec<String> {
    let listed = plugin.controller().await.list_volumes(ListVolumesRequest::default()).await.unwrap().into_inner();
    let mut names: Vec<String> = listed.entries.into_iter().map(|e| e.volume.unwrap().volume_id).collect();
    names.sort();
    names
}

#[tokio::test]
async fn faults_fail_calls_without_doing_the_work() {
    let plugin = TestPlugin::start().await;
    let mut controller = plugin.controller().await;
    plugin.set_faults(r#"{"CreateVolume": {"code": "Unavailable", "message": "backend down", "times": 2}}"#);
    for _ in 0..2 {
        let status = assert_code(controller.create_volume(create_request("v", GI, mount())).await, Code::Unavailable);
        assert_eq!(status.message(), "backend down");
    }
    assert!(volume_names(&plugin).await.is_empty(), "nothing was created");
    // Other methods are untouched, and after `times` failures the call goes through.
    plugin.identity().await.probe(ProbeRequest {}).await.unwrap();
    controller.create_volume(create_request("v", GI, mount())).await.unwrap();
    assert_eq!(volume_names(&plugin).await.len(), 1);
}

#[tokio::test]
async fn after_work_faults_leave_the_result_in_place() {
    let plugin = TestPlugin::start().await;
    let mut controller = plugin.controller().await;
    plugin.set_faults(r#"{"CreateVolume": {"code": "DeadlineExceeded", "after_work": true, "times": 1}}"#);
    assert_code(controller.create_volume(create_request("lost-answer", GI, mount())).await, Code::DeadlineExceeded);
    let existing = volume_names(&plugin).await;
    assert_eq!(existing.len(), 1, "the volume exists although the caller saw an error");
    // The caller's retry finds the same volume.
    let retried = controller.create_volume(create_request("lost-answer", GI, mount())).await.unwrap();
    assert_eq!(vec![retried.into_inner().volume.unwrap().volume_id], existing);

    plugin.set_faults(r#"{"DeleteVolume": {"code": "Aborted", "after_work": true}}"#);
    let delete = DeleteVolumeRequest { volume_id: existing[0].clone(), ..Default::default() };
    assert_code(controller.delete_volume(delete.clone()).await, Code::Aborted);
    assert!(volume_names(&plugin).await.is_empty());
    std::fs::remove_file(plugin.faults_file()).unwrap();
    controller.delete_volume(delete).await.unwrap();
}

#[tokio::test]
async fn faults_add_latency_and_follow_file_changes() {
    let plugin = TestPlugin::start().await;
    let mut identity = plugin.identity().await;
    plugin.set_faults(r#"{"Probe": {"latency_ms": 300}}"#);
    let started = Instant::now();
    identity.probe(ProbeRequest {}).await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(300));

    plugin.set_faults(r#"{"*": {"code": "Internal"}}"#);
    assert_code(identity.probe(ProbeRequest {}).await, Code::Internal);
    assert_code(plugin.node().await.node_stage_volume(NodeStageVolumeRequest::default()).await, Code::Internal);

    plugin.set_faults(r#"{"Probe": {"code": "Internal", "probability": 0.0}}"#);
    for _ in 0..20 {
        identity.probe(ProbeRequest {}).await.unwrap();
    }
    plugin.set_faults("this is not json");
    identity.probe(ProbeRequest {}).await.unwrap();
}

#[tokio::test]
async fn a_restart_loses_nothing() {
    let mut plugin = TestPlugin::start().await;
    let mut controller = plugin.controller().await;
    let mut request = create_request("kept", 2 * GI, block());
    request.mutable_parameters = pairs(&[("iops", "100")]);
    let volume = controller.create_volume(request.clone()).await.unwrap().into_inner().volume.unwrap();
    let snapshot = controller
        .create_snapshot(CreateSnapshotRequest {
            name: "kept-snap".into(),
            source_volume_id: volume.volume_id.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .snapshot
        .unwrap();
    let group = plugin
        .group()
        .await
        .create_volume_group_snapshot(CreateVolumeGroupSnapshotRequest {
            name: "kept-group".into(),
            source_volume_ids: vec![volume.volume_id.clone()],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .group_snapshot
        .unwrap();
    let staging = plugin.dir.path().join("staging");
    plugin
        .node()
        .await
        .node_stage_volume(NodeStageVolumeRequest {
            volume_id: volume.volume_id.clone(),
            staging_target_path: staging.display().to_string(),
            volume_capability: Some(block()),
            ..Default::default()
        })
        .await
        .unwrap();
    let volumes_before =
        plugin.controller().await.list_volumes(ListVolumesRequest::default()).await.unwrap().into_inner();
    let snapshots_before = controller.list_snapshots(ListSnapshotsRequest::default()).await.unwrap().into_inner();

    plugin.restart().await;

    let mut controller = plugin.controller().await;
    assert_eq!(controller.list_volumes(ListVolumesRequest::default()).await.unwrap().into_inner(), volumes_before);
    assert_eq!(
        controller.list_snapshots(ListSnapshotsRequest::default()).await.unwrap().into_inner(),
        snapshots_before
    );
    // Idempotency holds across the restart: same name, same volume and snapshot.
    assert_eq!(controller.create_volume(request).await.unwrap().into_inner().volume.unwrap(), volume);
    let again = controller
        .create_snapshot(CreateSnapshotRequest {
            name: "kept-snap".into(),
            source_volume_id: volume.volume_id.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(again.into_inner().snapshot.unwrap(), snapshot);
    let got = plugin
        .group()
        .await
        .get_volume_group_snapshot(GetVolumeGroupSnapshotRequest {
            group_snapshot_id: group.group_snapshot_id.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(got.into_inner().group_snapshot.unwrap(), group);
    // The staging record survived too: the volume is still in use.
    assert_code(
        controller.delete_volume(DeleteVolumeRequest { volume_id: volume.volume_id, ..Default::default() }).await,
        Code::FailedPrecondition,
    );
}
