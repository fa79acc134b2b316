//! What the node service does on the host with `--node-mounts`, beside its books: a filesystem volume's directory is
//! bind-mounted at the staging path and from there at each target path; a block volume's file gets a loop device at
//! staging, and the device node is bind-mounted onto each target path (a file), as kubelet expects of a block volume.
//!
//! Every step looks at the host first and does only what is missing (a mount already there, a loop device already
//! attached), and every undo step is fine with nothing to undo, so any call repeated after a crash converges.

use std::fs;
use std::io;
use std::path::Path;

use csi_client::proto::VolumeUsage;
use csi_client::proto::volume_usage::Unit;
use tonic::Status;

use crate::loop_device;
use crate::mounts::{self, BindOptions};
use crate::state::{AccessType, Attachment};

/// Stages a volume whose data is at `backing`: a bind mount at `staging`, or a loop device.
pub fn stage(backing: &Path, access_type: AccessType, staging: &Path) -> Result<(), Status> {
    match access_type {
        AccessType::Mount if !mounted(staging)? => {
            let options = BindOptions { flags: 0, ignored: Vec::new() };
            mounts::bind(backing, staging, &options).map_err(failed("bind-mounting the volume at", staging))
        }
        AccessType::Mount => Ok(()),
        AccessType::Block => {
            let device = loop_device::attach(backing).map_err(failed("attaching a loop device to", backing))?;
            tracing::info!(backing = %backing.display(), device = %device.display(), "loop device attached");
            Ok(())
        }
    }
}

/// Publishes a staged volume at `target` (created by the caller): the staging mount or the loop device,
/// bind-mounted with the request's read-only flag and mount flags.
pub fn publish(backing: &Path, how: &Attachment, target: &Path) -> Result<(), Status> {
    if mounted(target)? {
        return Ok(());
    }
    let options = mounts::bind_options(how.readonly, &how.mount_flags);
    if !options.ignored.is_empty() {
        tracing::info!(target = %target.display(), ignored = ?options.ignored, "mount flags a bind mount cannot apply");
    }
    let source = match how.access_type {
        AccessType::Mount => {
            let staging = Path::new(&how.staging_target_path);
            if !mounted(staging)? {
                return Err(Status::failed_precondition(format!("nothing is mounted at {}", staging.display())));
            }
            staging.to_path_buf()
        }
        AccessType::Block => loop_device::find(backing)
            .map_err(failed("looking for the loop device of", backing))?
            .ok_or_else(|| Status::failed_precondition(format!("no loop device serves {}", backing.display())))?,
    };
    mounts::bind(&source, target, &options).map_err(failed("bind-mounting the volume at", target))
}

/// Unmounts `target` and removes it (never recursively: what is left in a directory that was a mount point is not
/// the volume's data).
pub fn unpublish(target: &Path) -> Result<(), Status> {
    mounts::unmount(target).map_err(failed("unmounting", target))?;
    let removed = match fs::symlink_metadata(target) {
        Ok(meta) if meta.is_dir() => fs::remove_dir(target),
        Ok(_) => fs::remove_file(target),
        Err(e) => Err(e),
    };
    match removed {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(failed("removing", target)(e)),
        _ => Ok(()),
    }
}

/// Undoes [`stage`]: unmounts the staging path (the CO owns the directory) or detaches the loop device.
pub fn unstage(backing: &Path, access_type: AccessType, staging: &Path) -> Result<(), Status> {
    match access_type {
        AccessType::Mount => mounts::unmount(staging).map_err(failed("unmounting", staging)),
        AccessType::Block => loop_device::detach(backing).map_err(failed("detaching the loop devices of", backing)),
    }
}

/// NodeGetVolumeStats: `statvfs` of a filesystem volume's path (bytes and inodes); a block volume's device size.
pub fn usage(backing: &Path, access_type: AccessType, path: &Path) -> Result<Vec<VolumeUsage>, Status> {
    match access_type {
        AccessType::Mount => {
            let usage = mounts::filesystem_usage(path).map_err(failed("reading the filesystem usage of", path))?;
            Ok(vec![
                VolumeUsage {
                    available: usage.available_bytes,
                    total: usage.total_bytes,
                    used: usage.used_bytes,
                    unit: Unit::Bytes as i32,
                },
                VolumeUsage {
                    available: usage.available_inodes,
                    total: usage.total_inodes,
                    used: usage.used_inodes,
                    unit: Unit::Inodes as i32,
                },
            ])
        }
        AccessType::Block => {
            let total = device_size(backing)?;
            Ok(vec![VolumeUsage { available: 0, total, used: 0, unit: Unit::Bytes as i32 }])
        }
    }
}

/// NodeExpandVolume of a block volume: the loop device takes the size the controller gave the file. Answers the
/// device's new size.
pub fn expand_block(backing: &Path) -> Result<i64, Status> {
    let device = attached_device(backing)?;
    loop_device::refresh_size(&device).map_err(failed("refreshing the size of", &device))?;
    device_size(backing)
}

/// Before a block volume's file is copied (snapshot, clone): what its loop device holds in memory goes to the file.
pub fn flush_block(backing: &Path) -> Result<(), Status> {
    match loop_device::find(backing).map_err(failed("looking for the loop device of", backing))? {
        Some(device) => loop_device::flush(&device).map_err(failed("flushing", &device)),
        None => Ok(()),
    }
}

fn device_size(backing: &Path) -> Result<i64, Status> {
    let device = attached_device(backing)?;
    let bytes = loop_device::size(&device).map_err(failed("reading the size of", &device))?;
    Ok(i64::try_from(bytes).unwrap_or(i64::MAX))
}

fn attached_device(backing: &Path) -> Result<std::path::PathBuf, Status> {
    loop_device::find(backing)
        .map_err(failed("looking for the loop device of", backing))?
        .ok_or_else(|| Status::failed_precondition(format!("no loop device serves {}", backing.display())))
}

fn mounted(path: &Path) -> Result<bool, Status> {
    mounts::is_mount_point(path).map_err(failed("reading the mount table for", path))
}

fn failed(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> Status {
    let path = path.display().to_string();
    move |error| Status::internal(format!("{action} {path}: {error}"))
}
