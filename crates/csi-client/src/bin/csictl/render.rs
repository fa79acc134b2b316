//! Printing results: readable text by default, JSON (`-o json`) for scripts.

use csi_client::capabilities::{ControllerCapabilities, GroupControllerCapabilities, PluginCapabilities};
use csi_client::proto::{self, volume_content_source};
use serde_json::{Value, json};

use crate::args::Format;

pub struct Output {
    format: Format,
}

fn volume_json(volume: &proto::Volume) -> Value {
    let source = volume.content_source.as_ref().and_then(|s| s.r#type.as_ref()).map(|t| match t {
        volume_content_source::Type::Snapshot(s) => json!({"snapshot_id": s.snapshot_id}),
        volume_content_source::Type::Volume(v) => json!({"volume_id": v.volume_id}),
    });
    json!({
        "volume_id": volume.volume_id,
        "capacity_bytes": volume.capacity_bytes,
        "volume_context": volume.volume_context,
        "content_source": source,
        "accessible_topology": volume.accessible_topology.iter().map(|t| &t.segments).collect::<Vec<_>>(),
    })
}

fn snapshot_json(snapshot: &proto::Snapshot) -> Value {
    json!({
        "snapshot_id": snapshot.snapshot_id,
        "source_volume_id": snapshot.source_volume_id,
        "size_bytes": snapshot.size_bytes,
        "ready_to_use": snapshot.ready_to_use,
        "creation_time": snapshot.creation_time.as_ref().map(|t| t.to_string()),
        "group_snapshot_id": snapshot.group_snapshot_id,
    })
}

fn group_json(group: &proto::VolumeGroupSnapshot) -> Value {
    json!({
        "group_snapshot_id": group.group_snapshot_id,
        "ready_to_use": group.ready_to_use,
        "creation_time": group.creation_time.as_ref().map(|t| t.to_string()),
        "snapshots": group.snapshots.iter().map(snapshot_json).collect::<Vec<_>>(),
    })
}

fn names<T: Copy>(items: impl IntoIterator<Item = T>, name: fn(T) -> &'static str) -> Vec<&'static str> {
    items.into_iter().map(name).collect()
}

impl Output {
    pub fn new(format: Format) -> Self {
        Output { format }
    }

    fn json(&self, value: Value) -> bool {
        if self.format == Format::Json {
            println!("{}", serde_json::to_string_pretty(&value).expect("JSON values always serialize"));
            true
        } else {
            false
        }
    }

    pub fn info(&self, info: &proto::GetPluginInfoResponse) {
        if self.json(json!({"name": info.name, "vendor_version": info.vendor_version, "manifest": info.manifest})) {
            return;
        }
        println!("name:           {}", info.name);
        println!("vendor_version: {}", info.vendor_version);
        let mut manifest: Vec<_> = info.manifest.iter().collect();
        manifest.sort();
        for (key, value) in manifest {
            println!("manifest:       {key}={value}");
        }
    }

    pub fn probe(&self, ready: bool) {
        if !self.json(json!({"ready": ready})) {
            println!("ready: {ready}");
        }
    }

    pub fn capabilities(
        &self,
        plugin: &PluginCapabilities,
        controller: &ControllerCapabilities,
        group: &GroupControllerCapabilities,
    ) {
        let plugin_services = names(plugin.services.iter().copied(), |t| t.as_str_name());
        let expansion = names(plugin.volume_expansion.iter().copied(), |t| t.as_str_name());
        let controller = names(controller.0.iter().copied(), |t| t.as_str_name());
        let group = names(group.0.iter().copied(), |t| t.as_str_name());
        if self.json(json!({
            "plugin": plugin_services,
            "volume_expansion": expansion,
            "controller": controller,
            "group_controller": group,
        })) {
            return;
        }
        println!("plugin:           {}", plugin_services.join(", "));
        println!("volume_expansion: {}", expansion.join(", "));
        println!("controller:       {}", controller.join(", "));
        println!("group_controller: {}", group.join(", "));
    }

    pub fn volume(&self, volume: &proto::Volume) {
        if self.json(volume_json(volume)) {
            return;
        }
        println!("volume_id:      {}", volume.volume_id);
        println!("capacity_bytes: {}", volume.capacity_bytes);
        let mut context: Vec<_> = volume.volume_context.iter().collect();
        context.sort();
        for (key, value) in context {
            println!("context:        {key}={value}");
        }
    }

    pub fn volumes(&self, entries: &[proto::list_volumes_response::Entry]) {
        let rows: Vec<Value> = entries
            .iter()
            .map(|e| {
                let mut row = volume_json(&e.volume.clone().unwrap_or_default());
                row["published_node_ids"] =
                    json!(e.status.as_ref().map(|s| s.published_node_ids.clone()).unwrap_or_default());
                row
            })
            .collect();
        if self.json(Value::Array(rows)) {
            return;
        }
        println!("{:<48} {:>16}", "VOLUME ID", "CAPACITY BYTES");
        for entry in entries {
            let volume = entry.volume.clone().unwrap_or_default();
            println!("{:<48} {:>16}", volume.volume_id, volume.capacity_bytes);
        }
    }

    pub fn snapshot(&self, snapshot: &proto::Snapshot) {
        if self.json(snapshot_json(snapshot)) {
            return;
        }
        println!("snapshot_id:      {}", snapshot.snapshot_id);
        println!("source_volume_id: {}", snapshot.source_volume_id);
        println!("size_bytes:       {}", snapshot.size_bytes);
        println!("ready_to_use:     {}", snapshot.ready_to_use);
        if !snapshot.group_snapshot_id.is_empty() {
            println!("group_snapshot_id: {}", snapshot.group_snapshot_id);
        }
    }

    pub fn snapshots(&self, snapshots: &[proto::Snapshot]) {
        if self.json(Value::Array(snapshots.iter().map(snapshot_json).collect())) {
            return;
        }
        println!("{:<48} {:<48} {:>14} {:>6}", "SNAPSHOT ID", "SOURCE VOLUME ID", "SIZE BYTES", "READY");
        for s in snapshots {
            println!("{:<48} {:<48} {:>14} {:>6}", s.snapshot_id, s.source_volume_id, s.size_bytes, s.ready_to_use);
        }
    }

    pub fn group_snapshot(&self, group: &proto::VolumeGroupSnapshot) {
        if self.json(group_json(group)) {
            return;
        }
        println!("group_snapshot_id: {}", group.group_snapshot_id);
        println!("ready_to_use:      {}", group.ready_to_use);
        for s in &group.snapshots {
            println!("snapshot:          {} (from {}, {} bytes)", s.snapshot_id, s.source_volume_id, s.size_bytes);
        }
    }

    pub fn expanded(&self, response: &proto::ControllerExpandVolumeResponse) {
        if self.json(json!({
            "capacity_bytes": response.capacity_bytes,
            "node_expansion_required": response.node_expansion_required,
        })) {
            return;
        }
        println!("capacity_bytes:          {}", response.capacity_bytes);
        println!("node_expansion_required: {}", response.node_expansion_required);
    }

    pub fn published(&self, volume_id: &str, publish_context: &std::collections::HashMap<String, String>) {
        if self.json(json!({"result": "published volume", "id": volume_id, "publish_context": publish_context})) {
            return;
        }
        println!("published volume {volume_id}");
        for (key, value) in publish_context {
            println!("publish_context:   {key}={value}");
        }
    }

    pub fn done(&self, what: &str, id: &str) {
        if !self.json(json!({"result": what, "id": id})) {
            println!("{what} {id}");
        }
    }
}
