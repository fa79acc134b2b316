//! Loop devices over block volumes' backing files, as `--node-mounts` stages block volumes. Linux only; needs
//! CAP_SYS_ADMIN and the loop devices in `/dev` (a missing `/dev/loopN` node is made with `mknod`, as happens in a
//! container whose `/dev` was filled before the device existed).
//!
//! Which device serves a backing file is asked of the kernel every time (the backing file's device and inode, from
//! `LOOP_GET_STATUS64` of each bound loop device), never remembered: a plugin killed between attaching a device and
//! writing its state finds the device again instead of attaching a second one, and detaching finds every device a
//! crash could have left.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::os::unix::io::AsRawFd as _;
use std::path::{Path, PathBuf};

use libc::c_ulong;

/// The block device major number of loop devices.
const LOOP_MAJOR: u32 = 7;
// ioctl request numbers of <linux/loop.h> and <linux/fs.h>.
const LOOP_SET_FD: c_ulong = 0x4C00;
const LOOP_CLR_FD: c_ulong = 0x4C01;
const LOOP_GET_STATUS64: c_ulong = 0x4C05;
const LOOP_SET_CAPACITY: c_ulong = 0x4C07;
const LOOP_CTL_GET_FREE: c_ulong = 0x4C82;
const BLKGETSIZE64: c_ulong = 0x8008_1272;
/// How often attaching tries another free device when another process took the one it was given.
const ATTACH_ATTEMPTS: usize = 16;

/// `struct loop_info64` of <linux/loop.h>.
#[repr(C)]
struct LoopInfo64 {
    device: u64,
    inode: u64,
    rdevice: u64,
    offset: u64,
    size_limit: u64,
    number: u32,
    encrypt_type: u32,
    encrypt_key_size: u32,
    flags: u32,
    file_name: [u8; 64],
    crypt_name: [u8; 64],
    encrypt_key: [u8; 32],
    init: [u64; 2],
}

/// The loop device serving `backing`, if one does.
pub fn find(backing: &Path) -> io::Result<Option<PathBuf>> {
    Ok(find_all(backing)?.into_iter().next())
}

/// Attaches a loop device to `backing`, or answers the one already attached.
pub fn attach(backing: &Path) -> io::Result<PathBuf> {
    if let Some(device) = find(backing)? {
        return Ok(device);
    }
    let control = OpenOptions::new().read(true).write(true).custom_flags(libc::O_CLOEXEC).open("/dev/loop-control")?;
    let file = OpenOptions::new().read(true).write(true).custom_flags(libc::O_CLOEXEC).open(backing)?;
    for _ in 0..ATTACH_ATTEMPTS {
        // SAFETY: LOOP_CTL_GET_FREE takes no argument and returns a device number or -1.
        let number = unsafe { libc::ioctl(control.as_raw_fd(), LOOP_CTL_GET_FREE as _) };
        if number < 0 {
            return Err(io::Error::last_os_error());
        }
        let path = device_node(number as u32)?;
        let device = OpenOptions::new().read(true).write(true).custom_flags(libc::O_CLOEXEC).open(&path)?;
        // SAFETY: LOOP_SET_FD takes the backing file's descriptor, which `file` keeps open for the call.
        match unsafe { libc::ioctl(device.as_raw_fd(), LOOP_SET_FD as _, file.as_raw_fd()) } {
            0 => return Ok(path),
            // Another process bound this device between the two calls: ask for another.
            _ if io::Error::last_os_error().raw_os_error() == Some(libc::EBUSY) => continue,
            _ => return Err(io::Error::last_os_error()),
        }
    }
    Err(io::Error::other(format!("no free loop device after {ATTACH_ATTEMPTS} attempts")))
}

/// Detaches every loop device serving `backing`; none is fine. A device still open elsewhere is detached by the
/// kernel when its last user closes it.
pub fn detach(backing: &Path) -> io::Result<()> {
    for path in find_all(backing)? {
        let device = File::open(&path)?;
        // SAFETY: LOOP_CLR_FD takes no argument.
        if unsafe { libc::ioctl(device.as_raw_fd(), LOOP_CLR_FD as _) } < 0 {
            let error = io::Error::last_os_error();
            // ENXIO: it was detached meanwhile.
            if error.raw_os_error() != Some(libc::ENXIO) {
                return Err(error);
            }
        }
    }
    Ok(())
}

/// Makes the device take the backing file's current size (after the file grew).
pub fn refresh_size(device: &Path) -> io::Result<()> {
    let device = File::open(device)?;
    // SAFETY: LOOP_SET_CAPACITY takes no argument.
    if unsafe { libc::ioctl(device.as_raw_fd(), LOOP_SET_CAPACITY as _) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The size of a block device in bytes.
pub fn size(device: &Path) -> io::Result<u64> {
    let device = File::open(device)?;
    let mut bytes = 0u64;
    // SAFETY: BLKGETSIZE64 writes one u64 to the pointer, which points at `bytes`.
    if unsafe { libc::ioctl(device.as_raw_fd(), BLKGETSIZE64 as _, &mut bytes as *mut u64) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(bytes)
}

/// Writes what the device holds in its page cache to the backing file, so that a copy of the file sees every write
/// made through the device.
pub fn flush(device: &Path) -> io::Result<()> {
    File::open(device)?.sync_all()
}

/// Every bound loop device whose backing file is `backing`.
fn find_all(backing: &Path) -> io::Result<Vec<PathBuf>> {
    let meta = fs::metadata(backing)?;
    let wanted = (libc::major(meta.dev()), libc::minor(meta.dev()), meta.ino());
    let mut found = Vec::new();
    for entry in fs::read_dir("/sys/block")? {
        let name = entry?.file_name();
        let Some(number) = name.to_str().and_then(|n| n.strip_prefix("loop")).and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        // The `loop` directory exists while a file is bound.
        if !Path::new("/sys/block").join(&name).join("loop").exists() {
            continue;
        }
        let path = device_node(number)?;
        match backing_file_of(&path) {
            Ok(info) if (decode_major(info.device), decode_minor(info.device), info.inode) == wanted => {
                found.push(path)
            }
            Ok(_) => {}
            // Unbound since the directory was read.
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(found)
}

fn backing_file_of(device: &Path) -> io::Result<LoopInfo64> {
    let device = File::open(device)?;
    // SAFETY: loop_info64 is plain old data; an all-zero value is valid and the call overwrites it.
    let mut info: LoopInfo64 = unsafe { std::mem::zeroed() };
    // SAFETY: LOOP_GET_STATUS64 writes one loop_info64 to the pointer, which points at `info`.
    if unsafe { libc::ioctl(device.as_raw_fd(), LOOP_GET_STATUS64 as _, &mut info as *mut LoopInfo64) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(info)
}

/// `/dev/loopN`, made when missing.
fn device_node(number: u32) -> io::Result<PathBuf> {
    let path = PathBuf::from(format!("/dev/loop{number}"));
    if !path.exists() {
        let path_c = std::ffi::CString::new(path.as_os_str().to_string_lossy().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))?;
        // SAFETY: the path is NUL-terminated and outlives the call.
        let made = unsafe { libc::mknod(path_c.as_ptr(), libc::S_IFBLK | 0o660, libc::makedev(LOOP_MAJOR, number)) };
        if made < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EEXIST) {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(path)
}

/// The kernel reports the backing file's device in its own encoding (`huge_encode_dev`).
fn decode_major(device: u64) -> u32 {
    ((device & 0xfff00) >> 8) as u32
}

fn decode_minor(device: u64) -> u32 {
    ((device & 0xff) | ((device >> 12) & 0xfff00)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_the_kernels_device_numbers() {
        // (encoded as huge_encode_dev does, major, minor)
        let table = [(0x0803, 8, 3), (0x0030, 0, 48), (0x0100_0103, 1, 0x1003), (0xfe01, 254, 1)];
        for (encoded, major, minor) in table {
            assert_eq!((decode_major(encoded), decode_minor(encoded)), (major, minor), "{encoded:#x}");
        }
        assert_eq!(std::mem::size_of::<LoopInfo64>(), 232, "the kernel's struct loop_info64");
    }
}
