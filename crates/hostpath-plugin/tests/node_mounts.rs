//! `--node-mounts`: the node service really mounts, against an in-process plugin. These tests need root (mounts and
//! loop devices); without it each one says so and returns.

mod common;

use std::fs::{File, OpenOptions};
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};

use common::*;
use csi_client::proto::node_client::NodeClient;
use csi_client::proto::volume_capability::access_mode::Mode;
use csi_client::proto::volume_capability::{AccessType, BlockVolume, MountVolume};
use csi_client::proto::volume_content_source::{SnapshotSource, Type, VolumeSource};
use csi_client::proto::volume_usage::Unit;
use csi_client::proto::{
    CapacityRange, ControllerExpandVolumeRequest, CreateSnapshotRequest, CreateVolumeRequest, NodeExpandVolumeRequest,
    NodeGetVolumeStatsRequest, NodePublishVolumeRequest, NodeStageVolumeRequest, NodeUnpublishVolumeRequest,
    NodeUnstageVolumeRequest, VolumeCapability, VolumeContentSource,
};
use hostpath_plugin::{loop_device, mounts};
use tonic::Code;
use tonic::transport::Channel;

const MI: i64 = 1 << 20;

/// Whether this process may mount and attach loop devices; when not, the test says why it does nothing.
fn privileged(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let loops = Path::new("/dev/loop-control").exists();
    if !(root && loops) {
        eprintln!("{test}: skipped, needs root and /dev/loop-control (root: {root}, loop-control: {loops})");
    }
    root && loops
}

/// A plugin with `--node-mounts` that undoes, when dropped, whatever a failed test left mounted or attached under
/// its directory, so that no failure leaks a mount or a loop device into the machine.
struct MountingPlugin {
    plugin: TestPlugin,
}

impl MountingPlugin {
    /// The plugin, or nothing (and a line saying why) where `test` cannot mount.
    async fn start(test: &str) -> Option<Self> {
        privileged(test).then_some(())?;
        Some(Self { plugin: TestPlugin::start_with(|c| c.node_mounts = true).await })
    }
}

impl std::ops::Deref for MountingPlugin {
    type Target = TestPlugin;
    fn deref(&self) -> &TestPlugin {
        &self.plugin
    }
}

impl Drop for MountingPlugin {
    fn drop(&mut self) {
        let root = self.plugin.dir.path().to_path_buf();
        let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let mut points: Vec<PathBuf> = table
            .lines()
            .filter_map(|line| line.split(' ').nth(4))
            .map(PathBuf::from)
            .filter(|point| point.starts_with(&root))
            .collect();
        points.sort_by_key(|p| std::cmp::Reverse(p.as_os_str().len()));
        for point in points {
            let c = std::ffi::CString::new(point.as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: the string is NUL-terminated and outlives the call.
            unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
        }
        if let Ok(entries) = std::fs::read_dir(self.plugin.config.state_dir.join("volumes")) {
            for entry in entries.flatten() {
                let _ = loop_device::detach(&entry.path());
            }
        }
    }
}

fn stage(id: &str, path: &Path, capability: &VolumeCapability) -> NodeStageVolumeRequest {
    NodeStageVolumeRequest {
        volume_id: id.into(),
        staging_target_path: path.display().to_string(),
        volume_capability: Some(capability.clone()),
        ..Default::default()
    }
}

fn publish(id: &str, staging: &Path, target: &Path, capability: &VolumeCapability) -> NodePublishVolumeRequest {
    NodePublishVolumeRequest {
        volume_id: id.into(),
        staging_target_path: staging.display().to_string(),
        target_path: target.display().to_string(),
        volume_capability: Some(capability.clone()),
        ..Default::default()
    }
}

fn unpublish(id: &str, target: &Path) -> NodeUnpublishVolumeRequest {
    NodeUnpublishVolumeRequest { volume_id: id.into(), target_path: target.display().to_string() }
}

fn unstage(id: &str, staging: &Path) -> NodeUnstageVolumeRequest {
    NodeUnstageVolumeRequest { volume_id: id.into(), staging_target_path: staging.display().to_string() }
}

fn filesystem(mode: Mode) -> VolumeCapability {
    capability(AccessType::Mount(MountVolume::default()), mode)
}

fn raw_block(mode: Mode) -> VolumeCapability {
    capability(AccessType::Block(BlockVolume {}), mode)
}

fn from(source: Type, name: &str, size: i64, capability: VolumeCapability) -> CreateVolumeRequest {
    CreateVolumeRequest {
        volume_content_source: Some(VolumeContentSource { r#type: Some(source) }),
        ..create_request(name, size, capability)
    }
}

async fn create(plugin: &TestPlugin, request: CreateVolumeRequest) -> String {
    let response = plugin.controller().await.create_volume(request).await.unwrap().into_inner();
    response.volume.unwrap().volume_id
}

async fn snapshot(plugin: &TestPlugin, name: &str, source: &str) -> String {
    let request = CreateSnapshotRequest { name: name.into(), source_volume_id: source.into(), ..Default::default() };
    let response = plugin.controller().await.create_snapshot(request).await.unwrap().into_inner();
    response.snapshot.unwrap().snapshot_id
}

/// Stages and publishes a volume at `<dir>/<label>/{staging,target}`; answers the target.
async fn stage_and_publish(
    plugin: &TestPlugin,
    node: &mut NodeClient<Channel>,
    id: &str,
    label: &str,
    capability: &VolumeCapability,
) -> PathBuf {
    let staging = plugin.dir.path().join(label).join("staging");
    let target = plugin.dir.path().join(label).join("target");
    // The CO makes the target's parent directory; the plugin makes the target.
    std::fs::create_dir_all(plugin.dir.path().join(label)).unwrap();
    node.node_stage_volume(stage(id, &staging, capability)).await.unwrap();
    node.node_publish_volume(publish(id, &staging, &target, capability)).await.unwrap();
    target
}

/// Unpublishes and unstages what [`stage_and_publish`] made, checking that nothing stays mounted.
async fn unpublish_and_unstage(plugin: &TestPlugin, node: &mut NodeClient<Channel>, id: &str, label: &str) {
    let staging = plugin.dir.path().join(label).join("staging");
    let target = plugin.dir.path().join(label).join("target");
    node.node_unpublish_volume(unpublish(id, &target)).await.unwrap();
    node.node_unstage_volume(unstage(id, &staging)).await.unwrap();
    assert!(!target.exists(), "{label}: the target is removed");
    assert!(!mounts::is_mount_point(&staging).unwrap(), "{label}: the staging path is unmounted");
    assert_eq!(loop_device::find(&plugin.volume_path(id)).unwrap(), None, "{label}: no loop device is left");
}

async fn stats(node: &mut NodeClient<Channel>, id: &str, path: &Path) -> Vec<csi_client::proto::VolumeUsage> {
    let request = NodeGetVolumeStatsRequest {
        volume_id: id.into(),
        volume_path: path.display().to_string(),
        ..Default::default()
    };
    node.node_get_volume_stats(request).await.unwrap().into_inner().usage
}

#[tokio::test]
async fn a_file_written_through_one_publish_is_read_through_another() {
    let Some(plugin) = MountingPlugin::start("a_file_written_through_one_publish_is_read_through_another").await else {
        return;
    };
    let mut node = plugin.node().await;
    let multi = filesystem(Mode::SingleNodeMultiWriter);
    let id = create(&plugin, create_request("fs", GI, multi.clone())).await;
    let staging = plugin.dir.path().join("staging");
    let targets = [plugin.dir.path().join("pod-a/volume"), plugin.dir.path().join("pod-b/volume")];
    for _ in 0..2 {
        node.node_stage_volume(stage(&id, &staging, &multi)).await.unwrap();
    }
    assert!(mounts::is_mount_point(&staging).unwrap(), "the staging path is a bind mount");
    for target in &targets {
        for _ in 0..2 {
            node.node_publish_volume(publish(&id, &staging, target, &multi)).await.unwrap();
        }
        assert!(mounts::is_mount_point(target).unwrap(), "{}", target.display());
    }
    std::fs::write(targets[0].join("written-by-a"), "hello from a").unwrap();
    assert_eq!(std::fs::read_to_string(targets[1].join("written-by-a")).unwrap(), "hello from a");
    assert!(plugin.volume_path(&id).join("written-by-a").is_file(), "the data is the volume's");

    // A read-only publish refuses writes.
    let mut readonly = publish(&id, &staging, &plugin.dir.path().join("pod-c/volume"), &multi);
    readonly.readonly = true;
    node.node_publish_volume(readonly.clone()).await.unwrap();
    let denied = std::fs::write(plugin.dir.path().join("pod-c/volume/x"), "x").unwrap_err();
    assert_eq!(denied.raw_os_error(), Some(libc::EROFS), "{denied}");
    assert_eq!(std::fs::read_to_string(plugin.dir.path().join("pod-c/volume/written-by-a")).unwrap(), "hello from a");

    // Stats are the filesystem's, as statvfs gives them: bytes and inodes.
    let usage = stats(&mut node, &id, &targets[1]).await;
    let host = mounts::filesystem_usage(&targets[1]).unwrap();
    assert_eq!(usage.len(), 2, "{usage:?}");
    assert_eq!((usage[0].unit, usage[0].total), (Unit::Bytes as i32, host.total_bytes));
    assert_eq!((usage[1].unit, usage[1].total), (Unit::Inodes as i32, host.total_inodes));
    assert!(usage[0].used > 0 && usage[0].available > 0, "{usage:?}");

    // Unstaging under a publish is refused; unpublishing twice is fine and leaves the data.
    assert_code(node.node_unstage_volume(unstage(&id, &staging)).await, Code::FailedPrecondition);
    for target in targets.iter().chain([&plugin.dir.path().join("pod-c/volume")]) {
        for _ in 0..2 {
            node.node_unpublish_volume(unpublish(&id, target)).await.unwrap();
        }
        assert!(!target.exists(), "{}", target.display());
    }
    for _ in 0..2 {
        node.node_unstage_volume(unstage(&id, &staging)).await.unwrap();
    }
    assert!(!mounts::is_mount_point(&staging).unwrap());
    assert!(staging.is_dir(), "the staging directory is the CO's");
    assert_eq!(std::fs::read_to_string(plugin.volume_path(&id).join("written-by-a")).unwrap(), "hello from a");
}

#[tokio::test]
async fn block_volumes_are_loop_devices_that_grow() {
    let Some(plugin) = MountingPlugin::start("block_volumes_are_loop_devices_that_grow").await else {
        return;
    };
    let mut node = plugin.node().await;
    let multi = raw_block(Mode::SingleNodeMultiWriter);
    let id = create(&plugin, create_request("block", 64 * MI, multi.clone())).await;
    let staging = plugin.dir.path().join("staging");
    node.node_stage_volume(stage(&id, &staging, &multi)).await.unwrap();
    let device = loop_device::find(&plugin.volume_path(&id)).unwrap().expect("a loop device after staging");
    node.node_stage_volume(stage(&id, &staging, &multi)).await.unwrap();
    assert_eq!(loop_device::find(&plugin.volume_path(&id)).unwrap(), Some(device.clone()), "staging again reuses it");

    let targets = [plugin.dir.path().join("pod-a/device"), plugin.dir.path().join("pod-b/device")];
    for target in &targets {
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        node.node_publish_volume(publish(&id, &staging, target, &multi)).await.unwrap();
        assert!(mounts::is_mount_point(target).unwrap());
    }
    let written = b"block data from pod a";
    let a = OpenOptions::new().write(true).open(&targets[0]).unwrap();
    a.write_all_at(written, MI as u64).unwrap();
    a.sync_all().unwrap();
    drop(a);
    let mut read = vec![0u8; written.len()];
    File::open(&targets[1]).unwrap().read_exact_at(&mut read, MI as u64).unwrap();
    assert_eq!(read, written);

    let usage = stats(&mut node, &id, &targets[0]).await;
    assert_eq!((usage[0].unit, usage[0].total), (Unit::Bytes as i32, 64 * MI), "{usage:?}");

    // The controller grows the file; the node's loop device takes the size.
    let expand = ControllerExpandVolumeRequest {
        volume_id: id.clone(),
        capacity_range: Some(CapacityRange { required_bytes: 128 * MI, limit_bytes: 0 }),
        ..Default::default()
    };
    let expanded = plugin.controller().await.controller_expand_volume(expand).await.unwrap().into_inner();
    assert!(expanded.node_expansion_required, "a loop device must learn the new size");
    let node_expand = NodeExpandVolumeRequest {
        volume_id: id.clone(),
        volume_path: targets[0].display().to_string(),
        capacity_range: Some(CapacityRange { required_bytes: 128 * MI, limit_bytes: 0 }),
        ..Default::default()
    };
    assert_eq!(node.node_expand_volume(node_expand).await.unwrap().into_inner().capacity_bytes, 128 * MI);
    assert_eq!(loop_device::size(&device).unwrap(), 128 << 20);
    let mut end = File::open(&targets[1]).unwrap();
    assert_eq!(end.seek(SeekFrom::End(0)).unwrap(), 128 << 20, "the published device has the new size");
    drop(end);
    // Unmounting waits for the device's users to go, as the kubelet's pods have when it unpublishes.

    for target in &targets {
        node.node_unpublish_volume(unpublish(&id, target)).await.unwrap();
        assert!(!target.exists());
    }
    for _ in 0..2 {
        node.node_unstage_volume(unstage(&id, &staging)).await.unwrap();
    }
    assert_eq!(loop_device::find(&plugin.volume_path(&id)).unwrap(), None, "the loop device is detached");
}

#[tokio::test]
async fn restored_and_cloned_volumes_show_the_sources_data() {
    let Some(plugin) = MountingPlugin::start("restored_and_cloned_volumes_show_the_sources_data").await else {
        return;
    };
    let mut node = plugin.node().await;
    let writer = Mode::SingleNodeWriter;

    // Filesystem: a file written through the publish, snapshotted and cloned while published.
    let fs = filesystem(writer);
    let source = create(&plugin, create_request("fs-source", GI, fs.clone())).await;
    let target = stage_and_publish(&plugin, &mut node, &source, "fs-source", &fs).await;
    std::fs::write(target.join("data.txt"), "written before the snapshot").unwrap();
    let snap = snapshot(&plugin, "fs-snap", &source).await;
    let clone_source = Type::Volume(VolumeSource { volume_id: source.clone() });
    let clone = create(&plugin, from(clone_source, "fs-clone", GI, fs.clone())).await;
    std::fs::write(target.join("data.txt"), "written after").unwrap();
    let restore_source = Type::Snapshot(SnapshotSource { snapshot_id: snap });
    let restored = create(&plugin, from(restore_source, "fs-restored", GI, fs.clone())).await;
    for (id, label) in [(&restored, "fs-restored"), (&clone, "fs-clone")] {
        let target = stage_and_publish(&plugin, &mut node, id, label, &fs).await;
        assert_eq!(std::fs::read_to_string(target.join("data.txt")).unwrap(), "written before the snapshot", "{label}");
        unpublish_and_unstage(&plugin, &mut node, id, label).await;
    }
    unpublish_and_unstage(&plugin, &mut node, &source, "fs-source").await;

    // Block: bytes written through the device, neither synced nor closed by the writer (a last close would flush
    // them), reach the copies.
    let block = raw_block(writer);
    let source = create(&plugin, create_request("block-source", 32 * MI, block.clone())).await;
    let device = stage_and_publish(&plugin, &mut node, &source, "block-source", &block).await;
    let mut file = OpenOptions::new().write(true).open(&device).unwrap();
    file.seek(SeekFrom::Start(4096)).unwrap();
    file.write_all(b"block bytes before the snapshot").unwrap();
    let snap = snapshot(&plugin, "block-snap", &source).await;
    let clone_source = Type::Volume(VolumeSource { volume_id: source.clone() });
    let clone = create(&plugin, from(clone_source, "block-clone", 32 * MI, block.clone())).await;
    drop(file);
    let restore_source = Type::Snapshot(SnapshotSource { snapshot_id: snap });
    let restored = create(&plugin, from(restore_source, "block-restored", 32 * MI, block.clone())).await;
    for (id, label) in [(&restored, "block-restored"), (&clone, "block-clone")] {
        let device = stage_and_publish(&plugin, &mut node, id, label, &block).await;
        let mut read = vec![0u8; 31];
        let mut file = File::open(&device).unwrap();
        file.seek(SeekFrom::Start(4096)).unwrap();
        file.read_exact(&mut read).unwrap();
        drop(file);
        assert_eq!(read, b"block bytes before the snapshot", "{label}");
        unpublish_and_unstage(&plugin, &mut node, id, label).await;
    }
    unpublish_and_unstage(&plugin, &mut node, &source, "block-source").await;
}

#[tokio::test]
async fn repeated_calls_repair_what_a_crash_left() {
    let Some(mut plugin) = MountingPlugin::start("repeated_calls_repair_what_a_crash_left").await else {
        return;
    };
    let mut node = plugin.node().await;
    let fs = filesystem(Mode::SingleNodeWriter);
    let id = create(&plugin, create_request("fs", GI, fs.clone())).await;
    let target = stage_and_publish(&plugin, &mut node, &id, "pod", &fs).await;
    std::fs::write(target.join("f"), "kept").unwrap();

    // The mount went away behind the plugin's back (a reboot, an unmount by hand): publishing again mounts again.
    mounts::unmount(&target).unwrap();
    assert!(!target.join("f").exists());
    node.node_publish_volume(publish(&id, &plugin.dir.path().join("pod/staging"), &target, &fs)).await.unwrap();
    assert_eq!(std::fs::read_to_string(target.join("f")).unwrap(), "kept");

    // A restarted plugin knows its mounts from its state and undoes them.
    plugin.plugin.restart().await;
    let mut node = plugin.node().await;
    unpublish_and_unstage(&plugin, &mut node, &id, "pod").await;

    // A mount the books do not know (made just before a crash, the state never written) is undone too.
    let staging = plugin.dir.path().join("pod/staging");
    node.node_stage_volume(stage(&id, &staging, &fs)).await.unwrap();
    let unknown = plugin.dir.path().join("unrecorded");
    std::fs::create_dir_all(&unknown).unwrap();
    mounts::bind(&staging, &unknown, &mounts::bind_options(false, &[])).unwrap();
    node.node_unpublish_volume(unpublish(&id, &unknown)).await.unwrap();
    assert!(!unknown.exists(), "unmounted and removed");
    node.node_unstage_volume(unstage(&id, &staging)).await.unwrap();
    assert_eq!(std::fs::read_to_string(plugin.volume_path(&id).join("f")).unwrap(), "kept", "the data stays");
}
