//! Snapshots, restores, clones and group snapshots against an in-process plugin.

mod common;

use std::os::unix::fs::FileExt as _;

use common::*;
use csi_client::proto::volume_content_source::{SnapshotSource, Type, VolumeSource};
use csi_client::proto::{
    CapacityRange, CreateSnapshotRequest, CreateVolumeGroupSnapshotRequest, DeleteSnapshotRequest,
    DeleteVolumeGroupSnapshotRequest, DeleteVolumeRequest, GetSnapshotRequest, GetVolumeGroupSnapshotRequest,
    GroupControllerGetCapabilitiesRequest, ListSnapshotsRequest, VolumeContentSource,
};
use tonic::Code;

fn from_snapshot(
    name: &str,
    size: i64,
    capability: csi_client::proto::VolumeCapability,
    id: &str,
) -> csi_client::proto::CreateVolumeRequest {
    let mut request = create_request(name, size, capability);
    request.volume_content_source =
        Some(VolumeContentSource { r#type: Some(Type::Snapshot(SnapshotSource { snapshot_id: id.into() })) });
    request
}

fn from_volume(
    name: &str,
    size: i64,
    capability: csi_client::proto::VolumeCapability,
    id: &str,
) -> csi_client::proto::CreateVolumeRequest {
    let mut request = create_request(name, size, capability);
    request.volume_content_source =
        Some(VolumeContentSource { r#type: Some(Type::Volume(VolumeSource { volume_id: id.into() })) });
    request
}

fn snapshot_request(name: &str, source: &str) -> CreateSnapshotRequest {
    CreateSnapshotRequest { name: name.into(), source_volume_id: source.into(), ..Default::default() }
}

#[tokio::test]
async fn snapshots_restore_and_clones_copy_mount_data() {
    let plugin = TestPlugin::start().await;
    let mut controller = plugin.controller().await;
    let source =
        controller.create_volume(create_request("source", 2 * GI, mount())).await.unwrap().into_inner().volume.unwrap();
    let data = plugin.volume_path(&source.volume_id);
    std::fs::create_dir(data.join("dir")).unwrap();
    std::fs::write(data.join("dir/file.txt"), "before").unwrap();

    let snapshot = controller
        .create_snapshot(snapshot_request("snap", &source.volume_id))
        .await
        .unwrap()
        .into_inner()
        .snapshot
        .unwrap();
    assert_eq!(snapshot.source_volume_id, source.volume_id);
    assert_eq!(snapshot.size_bytes, 2 * GI);
    assert!(snapshot.ready_to_use);
    assert!(snapshot.creation_time.is_some());
    assert!(snapshot.group_snapshot_id.is_empty());
    // Idempotent by name; a different source under the same name is a conflict.
    let again = controller
        .create_snapshot(snapshot_request("snap", &source.volume_id))
        .await
        .unwrap()
        .into_inner()
        .snapshot
        .unwrap();
    assert_eq!(again, snapshot);
    let other =
        controller.create_volume(create_request("other", GI, mount())).await.unwrap().into_inner().volume.unwrap();
    assert_code(controller.create_snapshot(snapshot_request("snap", &other.volume_id)).await, Code::AlreadyExists);

    // Writes after the snapshot do not reach it.
    std::fs::write(data.join("dir/file.txt"), "after").unwrap();

    // A restore may ask for less than the snapshot's size; it gets the snapshot's size.
    let restored = controller
        .create_volume(from_snapshot("restored", GI, mount(), &snapshot.snapshot_id))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    assert_eq!(restored.capacity_bytes, 2 * GI);
    assert_eq!(
        restored.content_source.as_ref().unwrap().r#type,
        Some(Type::Snapshot(SnapshotSource { snapshot_id: snapshot.snapshot_id.clone() }))
    );
    assert_eq!(
        std::fs::read_to_string(plugin.volume_path(&restored.volume_id).join("dir/file.txt")).unwrap(),
        "before"
    );

    let clone = controller
        .create_volume(from_volume("clone", 3 * GI, mount(), &source.volume_id))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    assert_eq!(clone.capacity_bytes, 3 * GI);
    assert_eq!(std::fs::read_to_string(plugin.volume_path(&clone.volume_id).join("dir/file.txt")).unwrap(), "after");

    // Same name with another source, or a source of the other kind, is refused.
    assert_code(
        controller.create_volume(from_volume("clone", 3 * GI, mount(), &other.volume_id)).await,
        Code::AlreadyExists,
    );
    assert_code(
        controller.create_volume(from_snapshot("as-block", 2 * GI, block(), &snapshot.snapshot_id)).await,
        Code::InvalidArgument,
    );
    let mut too_small = from_snapshot("too-small", GI, mount(), &snapshot.snapshot_id);
    too_small.capacity_range = Some(CapacityRange { required_bytes: GI, limit_bytes: GI });
    assert_code(controller.create_volume(too_small).await, Code::OutOfRange);

    // Snapshots outlive their source volume.
    controller
        .delete_volume(DeleteVolumeRequest { volume_id: source.volume_id.clone(), ..Default::default() })
        .await
        .unwrap();
    let got = controller
        .get_snapshot(GetSnapshotRequest { snapshot_id: snapshot.snapshot_id.clone(), ..Default::default() })
        .await
        .unwrap();
    assert_eq!(got.into_inner().snapshot.unwrap(), snapshot);
    controller
        .delete_snapshot(DeleteSnapshotRequest { snapshot_id: snapshot.snapshot_id.clone(), ..Default::default() })
        .await
        .unwrap();
    assert!(!plugin.snapshot_path(&snapshot.snapshot_id).exists());
    controller
        .delete_snapshot(DeleteSnapshotRequest { snapshot_id: snapshot.snapshot_id.clone(), ..Default::default() })
        .await
        .unwrap();
    assert_code(
        controller.get_snapshot(GetSnapshotRequest { snapshot_id: snapshot.snapshot_id, ..Default::default() }).await,
        Code::NotFound,
    );
}

#[tokio::test]
async fn block_snapshots_and_clones_copy_the_device_file() {
    let plugin = TestPlugin::start().await;
    let mut controller = plugin.controller().await;
    let source =
        controller.create_volume(create_request("source", 4 * GI, block())).await.unwrap().into_inner().volume.unwrap();
    let device = std::fs::OpenOptions::new().write(true).open(plugin.volume_path(&source.volume_id)).unwrap();
    device.write_all_at(b"superblock", 3 << 30).unwrap();
    drop(device);

    let snapshot = controller
        .create_snapshot(snapshot_request("snap", &source.volume_id))
        .await
        .unwrap()
        .into_inner()
        .snapshot
        .unwrap();
    let restored = controller
        .create_volume(from_snapshot("restored", 5 * GI, block(), &snapshot.snapshot_id))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    let clone = controller
        .create_volume(from_volume("clone", 4 * GI, block(), &source.volume_id))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    for (volume, size) in [(&restored, 5u64 << 30), (&clone, 4 << 30)] {
        let file = std::fs::File::open(plugin.volume_path(&volume.volume_id)).unwrap();
        assert_eq!(file.metadata().unwrap().len(), size);
        let mut buffer = [0u8; 10];
        file.read_exact_at(&mut buffer, 3 << 30).unwrap();
        assert_eq!(&buffer, b"superblock");
    }
    assert_code(
        controller.create_volume(from_volume("as-mount", 4 * GI, mount(), &source.volume_id)).await,
        Code::InvalidArgument,
    );
}

#[tokio::test]
async fn snapshot_requests_without_required_fields_or_sources_fail() {
    let plugin = TestPlugin::start().await;
    let mut controller = plugin.controller().await;
    assert_code(controller.create_snapshot(snapshot_request("", "v")).await, Code::InvalidArgument);
    assert_code(controller.create_snapshot(snapshot_request("s", "")).await, Code::InvalidArgument);
    assert_code(controller.create_snapshot(snapshot_request("s", "missing")).await, Code::NotFound);
    assert_code(controller.delete_snapshot(DeleteSnapshotRequest::default()).await, Code::InvalidArgument);
    controller
        .delete_snapshot(DeleteSnapshotRequest { snapshot_id: "missing".into(), ..Default::default() })
        .await
        .unwrap();
    assert_code(controller.get_snapshot(GetSnapshotRequest::default()).await, Code::InvalidArgument);
    assert_code(
        controller.list_snapshots(ListSnapshotsRequest { starting_token: "x".into(), ..Default::default() }).await,
        Code::Aborted,
    );
}

#[tokio::test]
async fn list_snapshots_filters_and_pages() {
    let plugin = TestPlugin::start().await;
    let mut controller = plugin.controller().await;
    let mut volumes = Vec::new();
    let mut snapshots = Vec::new();
    for index in 0..3 {
        let volume = controller
            .create_volume(create_request(&format!("v{index}"), GI, mount()))
            .await
            .unwrap()
            .into_inner()
            .volume
            .unwrap();
        for round in 0..2 {
            let snapshot = controller
                .create_snapshot(snapshot_request(&format!("s{index}-{round}"), &volume.volume_id))
                .await
                .unwrap()
                .into_inner()
                .snapshot
                .unwrap();
            snapshots.push(snapshot.snapshot_id);
        }
        volumes.push(volume.volume_id);
    }
    let ids = |response: csi_client::proto::ListSnapshotsResponse| -> (Vec<String>, String) {
        (response.entries.into_iter().map(|e| e.snapshot.unwrap().snapshot_id).collect(), response.next_token)
    };

    let (all, token) = ids(controller.list_snapshots(ListSnapshotsRequest::default()).await.unwrap().into_inner());
    assert_eq!((all, token.as_str()), (snapshots.clone(), ""));

    let by_volume = ListSnapshotsRequest { source_volume_id: volumes[1].clone(), ..Default::default() };
    assert_eq!(ids(controller.list_snapshots(by_volume).await.unwrap().into_inner()).0, snapshots[2..4]);
    let by_id = ListSnapshotsRequest { snapshot_id: snapshots[5].clone(), ..Default::default() };
    assert_eq!(ids(controller.list_snapshots(by_id).await.unwrap().into_inner()).0, snapshots[5..]);
    let unknown = ListSnapshotsRequest { snapshot_id: "unknown".into(), ..Default::default() };
    assert!(ids(controller.list_snapshots(unknown).await.unwrap().into_inner()).0.is_empty());

    let mut seen = Vec::new();
    let mut token = String::new();
    loop {
        let request = ListSnapshotsRequest { max_entries: 4, starting_token: token.clone(), ..Default::default() };
        let (page, next) = ids(controller.list_snapshots(request).await.unwrap().into_inner());
        assert!(page.len() <= 4);
        seen.extend(page);
        if next.is_empty() {
            break;
        }
        token = next;
    }
    assert_eq!(seen, snapshots);
}

#[tokio::test]
async fn group_snapshots_create_get_and_delete() {
    let plugin = TestPlugin::start().await;
    let mut controller = plugin.controller().await;
    let mut group = plugin.group().await;
    let capabilities = group.group_controller_get_capabilities(GroupControllerGetCapabilitiesRequest {}).await.unwrap();
    assert_eq!(capabilities.into_inner().capabilities.len(), 1);

    let a = controller
        .create_volume(create_request("a", GI, mount()))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap()
        .volume_id;
    let b = controller
        .create_volume(create_request("b", 2 * GI, block()))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap()
        .volume_id;
    std::fs::write(plugin.volume_path(&a).join("data"), "group data").unwrap();
    let request = CreateVolumeGroupSnapshotRequest {
        name: "group".into(),
        source_volume_ids: vec![a.clone(), b.clone()],
        ..Default::default()
    };
    let created =
        group.create_volume_group_snapshot(request.clone()).await.unwrap().into_inner().group_snapshot.unwrap();
    assert!(created.ready_to_use);
    assert!(created.creation_time.is_some());
    assert_eq!(created.snapshots.len(), 2);
    let member_ids: Vec<String> = created.snapshots.iter().map(|s| s.snapshot_id.clone()).collect();
    for (snapshot, source) in created.snapshots.iter().zip([&a, &b]) {
        assert_eq!(&snapshot.source_volume_id, source);
        assert_eq!(snapshot.group_snapshot_id, created.group_snapshot_id);
        assert_eq!(snapshot.creation_time, created.creation_time);
    }

    // Idempotent by name, whatever the order of the sources; different sources conflict.
    let mut reordered = request.clone();
    reordered.source_volume_ids.reverse();
    assert_eq!(
        group.create_volume_group_snapshot(reordered).await.unwrap().into_inner().group_snapshot.unwrap(),
        created
    );
    let mut fewer = request.clone();
    fewer.source_volume_ids.pop();
    assert_code(group.create_volume_group_snapshot(fewer).await, Code::AlreadyExists);

    // Members are ordinary snapshots for listing and restoring, but are deleted only with the group.
    let listed = controller.list_snapshots(ListSnapshotsRequest::default()).await.unwrap().into_inner();
    assert_eq!(listed.entries.len(), 2);
    let restored = controller
        .create_volume(from_snapshot("restored", GI, mount(), &member_ids[0]))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    assert_eq!(std::fs::read_to_string(plugin.volume_path(&restored.volume_id).join("data")).unwrap(), "group data");
    let status = assert_code(
        controller
            .delete_snapshot(DeleteSnapshotRequest { snapshot_id: member_ids[0].clone(), ..Default::default() })
            .await,
        Code::InvalidArgument,
    );
    assert!(status.message().contains(&created.group_snapshot_id));

    let get = |snapshot_ids: Vec<String>| GetVolumeGroupSnapshotRequest {
        group_snapshot_id: created.group_snapshot_id.clone(),
        snapshot_ids,
        ..Default::default()
    };
    assert_eq!(
        group.get_volume_group_snapshot(get(vec![])).await.unwrap().into_inner().group_snapshot.unwrap(),
        created
    );
    let mut reversed = member_ids.clone();
    reversed.reverse();
    assert_eq!(
        group.get_volume_group_snapshot(get(reversed)).await.unwrap().into_inner().group_snapshot.unwrap(),
        created
    );
    assert_code(group.get_volume_group_snapshot(get(vec![member_ids[0].clone()])).await, Code::InvalidArgument);

    let delete = |snapshot_ids: Vec<String>| DeleteVolumeGroupSnapshotRequest {
        group_snapshot_id: created.group_snapshot_id.clone(),
        snapshot_ids,
        ..Default::default()
    };
    assert_code(group.delete_volume_group_snapshot(delete(vec!["other".into()])).await, Code::InvalidArgument);
    group.delete_volume_group_snapshot(delete(member_ids.clone())).await.unwrap();
    for id in &member_ids {
        assert!(!plugin.snapshot_path(id).exists());
    }
    assert!(controller.list_snapshots(ListSnapshotsRequest::default()).await.unwrap().into_inner().entries.is_empty());
    assert_code(group.get_volume_group_snapshot(get(vec![])).await, Code::NotFound);
    group.delete_volume_group_snapshot(delete(vec![])).await.unwrap();
}

#[tokio::test]
async fn malformed_group_requests_fail_without_leaving_snapshots() {
    let plugin = TestPlugin::start().await;
    let mut controller = plugin.controller().await;
    let mut group = plugin.group().await;
    let a = controller
        .create_volume(create_request("a", GI, mount()))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap()
        .volume_id;
    let create = |name: &str, sources: Vec<String>| CreateVolumeGroupSnapshotRequest {
        name: name.into(),
        source_volume_ids: sources,
        ..Default::default()
    };
    assert_code(group.create_volume_group_snapshot(create("", vec![a.clone()])).await, Code::InvalidArgument);
    assert_code(group.create_volume_group_snapshot(create("g", vec![])).await, Code::InvalidArgument);
    assert_code(
        group.create_volume_group_snapshot(create("g", vec![a.clone(), a.clone()])).await,
        Code::InvalidArgument,
    );
    assert_code(
        group.create_volume_group_snapshot(create("g", vec![a.clone(), String::new()])).await,
        Code::InvalidArgument,
    );
    assert_code(
        group.create_volume_group_snapshot(create("g", vec![a.clone(), "missing".into()])).await,
        Code::NotFound,
    );
    assert!(controller.list_snapshots(ListSnapshotsRequest::default()).await.unwrap().into_inner().entries.is_empty());
    assert_eq!(std::fs::read_dir(plugin.config.state_dir.join("snapshots")).unwrap().count(), 0);

    assert_code(group.get_volume_group_snapshot(GetVolumeGroupSnapshotRequest::default()).await, Code::InvalidArgument);
    let unknown = GetVolumeGroupSnapshotRequest { group_snapshot_id: "unknown".into(), ..Default::default() };
    assert_code(group.get_volume_group_snapshot(unknown).await, Code::NotFound);
    assert_code(
        group.delete_volume_group_snapshot(DeleteVolumeGroupSnapshotRequest::default()).await,
        Code::InvalidArgument,
    );
    let unknown = DeleteVolumeGroupSnapshotRequest { group_snapshot_id: "unknown".into(), ..Default::default() };
    group.delete_volume_group_snapshot(unknown).await.unwrap();
}
