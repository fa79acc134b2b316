//! Bind mounts, as `--node-mounts` stages and publishes filesystem volumes (and block volumes' device nodes), and the
//! numbers `statvfs` gives for a mounted path. Linux only; mounting needs CAP_SYS_ADMIN.
//!
//! Whether a path is a mount point is read from `/proc/self/mountinfo` every time, never remembered: after a crash
//! the kernel's table is the truth, so a repeated call finds its mount made or gone and does only what is missing.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

use libc::c_ulong;

/// The per-mount flags a bind mount gets, from a request's `readonly` and `mount_flags`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindOptions {
    pub flags: c_ulong,
    /// Mount flags a bind mount cannot honour (filesystem options such as `discard` or `uid=`): logged, not applied.
    pub ignored: Vec<String>,
}

/// The mount flags a bind mount can carry; everything else belongs to a filesystem, which a bind mount does not make.
pub fn bind_options(readonly: bool, mount_flags: &[String]) -> BindOptions {
    let mut flags = if readonly { libc::MS_RDONLY } else { 0 };
    let mut ignored = Vec::new();
    for flag in mount_flags {
        match flag.as_str() {
            "ro" => flags |= libc::MS_RDONLY,
            "nosuid" => flags |= libc::MS_NOSUID,
            "nodev" => flags |= libc::MS_NODEV,
            "noexec" => flags |= libc::MS_NOEXEC,
            "noatime" => flags |= libc::MS_NOATIME,
            "nodiratime" => flags |= libc::MS_NODIRATIME,
            "relatime" => flags |= libc::MS_RELATIME,
            // What a bind mount is anyway.
            "rw" | "bind" | "defaults" => {}
            other => ignored.push(other.to_string()),
        }
    }
    BindOptions { flags, ignored }
}

/// Bind-mounts `source` (a directory or a device node) onto `target`, then applies `options` with a remount, which
/// is how the kernel takes per-mount flags for a bind mount.
pub fn bind(source: &Path, target: &Path, options: &BindOptions) -> io::Result<()> {
    let source_c = c_path(source)?;
    let target_c = c_path(target)?;
    // SAFETY: both strings are NUL-terminated and outlive the call; null filesystem type and data are allowed.
    check(unsafe {
        libc::mount(source_c.as_ptr(), target_c.as_ptr(), std::ptr::null(), libc::MS_BIND, std::ptr::null())
    })?;
    if options.flags != 0 {
        let flags = libc::MS_BIND | libc::MS_REMOUNT | options.flags;
        // SAFETY: as above.
        let remounted = check(unsafe {
            libc::mount(source_c.as_ptr(), target_c.as_ptr(), std::ptr::null(), flags, std::ptr::null())
        });
        if let Err(error) = remounted {
            // Never leave a writable mount where a read-only one was asked for.
            let _ = unmount(target);
            return Err(error);
        }
    }
    Ok(())
}

/// Unmounts `path` until it is no longer a mount point (a crash between two mounts can stack them); a path that is
/// not mounted, or does not exist, is fine.
pub fn unmount(path: &Path) -> io::Result<()> {
    while is_mount_point(path)? {
        let path_c = c_path(path)?;
        // SAFETY: the string is NUL-terminated and outlives the call.
        check(unsafe { libc::umount2(path_c.as_ptr(), 0) })?;
    }
    Ok(())
}

/// Whether something is mounted at `path`, from this process's mount table.
pub fn is_mount_point(path: &Path) -> io::Result<bool> {
    let wanted = [Some(path.to_path_buf()), std::fs::canonicalize(path).ok()];
    let table = std::fs::read_to_string("/proc/self/mountinfo")?;
    Ok(mount_points(&table).any(|point| wanted.iter().flatten().any(|w| *w == point)))
}

/// The mount points of a `mountinfo` table (the fifth field, octal escapes undone).
fn mount_points(table: &str) -> impl Iterator<Item = PathBuf> + '_ {
    table.lines().filter_map(|line| line.split(' ').nth(4)).map(|field| PathBuf::from(unescape(field)))
}

/// `mountinfo` writes space, tab, newline and backslash as `\040`, `\011`, `\012`, `\134`.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal =
            bytes.get(i + 1..i + 4).filter(|d| bytes[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(digits) => {
                out.push(digits.iter().fold(0u8, |n, d| n.wrapping_mul(8) + (d - b'0')));
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Bytes and inodes of the filesystem `path` is on, as `statvfs` reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilesystemUsage {
    pub total_bytes: i64,
    pub available_bytes: i64,
    pub used_bytes: i64,
    pub total_inodes: i64,
    pub available_inodes: i64,
    pub used_inodes: i64,
}

pub fn filesystem_usage(path: &Path) -> io::Result<FilesystemUsage> {
    let path_c = c_path(path)?;
    // SAFETY: statvfs is plain old data; an all-zero value is valid and the call overwrites it.
    let mut stats: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: the path is NUL-terminated and `stats` is a valid, writable statvfs.
    check(unsafe { libc::statvfs(path_c.as_ptr(), &mut stats) })?;
    let block = stats.f_frsize as i64;
    let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    Ok(FilesystemUsage {
        total_bytes: count(stats.f_blocks).saturating_mul(block),
        available_bytes: count(stats.f_bavail).saturating_mul(block),
        used_bytes: count(stats.f_blocks.saturating_sub(stats.f_bfree)).saturating_mul(block),
        total_inodes: count(stats.f_files),
        available_inodes: count(stats.f_favail),
        used_inodes: count(stats.f_files.saturating_sub(stats.f_ffree)),
    })
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))
}

fn check(result: libc::c_int) -> io::Result<()> {
    if result < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_mount_flags_onto_a_bind_mount() {
        let strings = |items: &[&str]| items.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // (readonly, mount flags, flags applied, flags ignored)
        let table: [(bool, &[&str], c_ulong, &[&str]); 6] = [
            (false, &[], 0, &[]),
            (true, &[], libc::MS_RDONLY, &[]),
            (false, &["ro"], libc::MS_RDONLY, &[]),
            (false, &["nosuid", "nodev", "noexec"], libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC, &[]),
            (false, &["rw", "bind", "noatime"], libc::MS_NOATIME, &[]),
            // Filesystem options mean nothing to a bind mount.
            (true, &["discard", "uid=1000"], libc::MS_RDONLY, &["discard", "uid=1000"]),
        ];
        for (readonly, mount_flags, flags, ignored) in table {
            let got = bind_options(readonly, &strings(mount_flags));
            assert_eq!(got, BindOptions { flags, ignored: strings(ignored) }, "{readonly} {mount_flags:?}");
        }
    }

    #[test]
    fn reads_mount_points_with_escapes() {
        let table = "22 27 0:21 / /proc rw,relatime - proc proc rw\n\
                     90 27 0:45 /vol /var/lib/kubelet/pods/a\\040b/volumes rw - ext4 /dev/sda rw\n\
                     91 27 0:45 /x /tmp/back\\134slash rw - ext4 /dev/sda rw\n";
        let points: Vec<PathBuf> = mount_points(table).collect();
        assert_eq!(
            points,
            [
                PathBuf::from("/proc"),
                PathBuf::from("/var/lib/kubelet/pods/a b/volumes"),
                PathBuf::from("/tmp/back\\slash")
            ]
        );
        assert_eq!(unescape("no\\escape\\9"), "no\\escape\\9");
    }

    #[test]
    fn the_root_is_a_mount_point_and_a_fresh_directory_is_not() {
        assert!(is_mount_point(Path::new("/")).unwrap());
        let dir = tempfile::tempdir().unwrap();
        assert!(!is_mount_point(dir.path()).unwrap());
        assert!(!is_mount_point(&dir.path().join("missing")).unwrap());
        unmount(&dir.path().join("missing")).unwrap();
        let usage = filesystem_usage(dir.path()).unwrap();
        assert!(usage.total_bytes > 0 && usage.available_bytes <= usage.total_bytes, "{usage:?}");
        assert!(usage.used_bytes <= usage.total_bytes, "{usage:?}");
    }
}
