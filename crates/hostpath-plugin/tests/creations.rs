//! The counts of what each Create call did with its name, as a test outside the plugin reads them: the
//! `creations` field of `<state-dir>/state.json`.

mod common;

use common::*;
use csi_client::proto::{CapacityRange, CreateSnapshotRequest, CreateVolumeGroupSnapshotRequest, DeleteVolumeRequest};
use serde_json::Value;
use tonic::Code;

fn creations(plugin: &TestPlugin) -> Value {
    let text = std::fs::read_to_string(plugin.config.state_dir.join("state.json")).unwrap();
    serde_json::from_str::<Value>(&text).unwrap()["creations"].clone()
}

/// (objects made, calls answered with the existing one) for `name` of `kind`.
fn counts(creations: &Value, kind: &str, name: &str) -> (usize, u64) {
    let calls = &creations[kind][name];
    (calls["created"].as_array().map_or(0, Vec::len), calls["existing"].as_u64().unwrap_or(0))
}

#[tokio::test]
async fn create_calls_are_counted_per_name_and_survive_a_restart() {
    let mut plugin = TestPlugin::start().await;
    let mut controller = plugin.controller().await;
    let request = create_request("pvc-a", GI, mount());
    let volume = controller.create_volume(request.clone()).await.unwrap().into_inner().volume.unwrap().volume_id;
    controller.create_volume(request.clone()).await.unwrap();
    // A conflicting call and a refused one made nothing and are not counted.
    let mut bigger = request.clone();
    bigger.capacity_range = Some(CapacityRange { required_bytes: 2 * GI, limit_bytes: 0 });
    assert_eq!(controller.create_volume(bigger).await.unwrap_err().code(), Code::AlreadyExists);
    assert_eq!(
        controller.create_volume(create_request("", GI, mount())).await.unwrap_err().code(),
        Code::InvalidArgument
    );

    let snapshot =
        CreateSnapshotRequest { name: "snap-a".into(), source_volume_id: volume.clone(), ..Default::default() };
    controller.create_snapshot(snapshot.clone()).await.unwrap();
    controller.create_snapshot(snapshot).await.unwrap();
    let mut group = plugin.group().await;
    let request_group = CreateVolumeGroupSnapshotRequest {
        name: "group-a".into(),
        source_volume_ids: vec![volume.clone()],
        ..Default::default()
    };
    group.create_volume_group_snapshot(request_group).await.unwrap();

    let counted = creations(&plugin);
    assert_eq!(counts(&counted, "volumes", "pvc-a"), (1, 1));
    assert_eq!(counts(&counted, "volumes", ""), (0, 0));
    assert_eq!(counts(&counted, "snapshots", "snap-a"), (1, 1));
    assert_eq!(counts(&counted, "group_snapshots", "group-a"), (1, 0));
    assert_eq!(counted["snapshots"].as_object().unwrap().len(), 1, "group members have no name of their own");

    // A restarted plugin keeps counting where it was; a name made again after its deletion shows twice.
    plugin.restart().await;
    let mut controller = plugin.controller().await;
    let mut request_b = create_request("pvc-b", GI, mount());
    request_b.parameters = pairs(&[("kind", "fast")]);
    let b = controller.create_volume(request_b.clone()).await.unwrap().into_inner().volume.unwrap().volume_id;
    controller.delete_volume(DeleteVolumeRequest { volume_id: b, ..Default::default() }).await.unwrap();
    controller.create_volume(request_b).await.unwrap();
    controller.create_volume(request).await.unwrap();
    let counted = creations(&plugin);
    assert_eq!(counts(&counted, "volumes", "pvc-a"), (1, 2));
    assert_eq!(counts(&counted, "volumes", "pvc-b"), (2, 0));
    let times = counted["volumes"]["pvc-b"]["created"].as_array().unwrap();
    assert!(times[0]["seconds"].as_i64() <= times[1]["seconds"].as_i64(), "creation times in order: {times:?}");
}
