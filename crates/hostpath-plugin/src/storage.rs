//! Volume and snapshot data on disk.
//!
//! ```text
//! <state-dir>/state.json          what the plugin remembers (see state.rs)
//! <state-dir>/volumes/<id>        a mount volume: a directory; a block volume: a regular file of its size
//! <state-dir>/snapshots/<id>      a copy of the source volume, directory or file alike
//! ```
//!
//! Block files are sparse (`set_len`), and copies keep them sparse by copying only the ranges the
//! filesystem reports as data, so a 10 GiB test volume costs no disk space and no copy time. Copies go
//! to a `.partial` name first and are renamed into place, so a crash never leaves a half-copied volume
//! under a real ID.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt as _, MetadataExt as _};
use std::os::unix::io::AsRawFd as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tonic::Status;

#[derive(Debug, thiserror::Error)]
#[error("{action} {}: {source}", path.display())]
pub struct StorageError {
    action: &'static str,
    path: PathBuf,
    source: io::Error,
}

impl From<StorageError> for Status {
    fn from(error: StorageError) -> Self {
        Status::internal(error.to_string())
    }
}

/// Attaches what was being done, and to which path, to an I/O error.
fn at(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> StorageError {
    let path = path.to_path_buf();
    move |source| StorageError { action, path, source }
}

/// The paths under the state directory.
#[derive(Debug, Clone)]
pub struct Layout {
    root: PathBuf,
}

impl Layout {
    /// Creates the state directory and its `volumes/` and `snapshots/` folders if they are missing.
    pub fn create(root: &Path) -> Result<Self, StorageError> {
        let layout = Self { root: root.to_path_buf() };
        for dir in [layout.root.clone(), layout.volumes_dir(), layout.snapshots_dir()] {
            fs::create_dir_all(&dir).map_err(at("creating", &dir))?;
        }
        Ok(layout)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn state_file(&self) -> PathBuf {
        self.root.join("state.json")
    }

    fn volumes_dir(&self) -> PathBuf {
        self.root.join("volumes")
    }

    fn snapshots_dir(&self) -> PathBuf {
        self.root.join("snapshots")
    }

    pub fn volume(&self, id: &str) -> PathBuf {
        self.volumes_dir().join(id)
    }

    pub fn snapshot(&self, id: &str) -> PathBuf {
        self.snapshots_dir().join(id)
    }
}

/// Creates an empty volume: a directory, or a sparse file of `size` bytes.
pub fn create_empty(access_type: AccessType, path: &Path, size: i64) -> Result<(), StorageError> {
    remove(path)?;
    match access_type {
        AccessType::Mount => fs::create_dir_all(path).map_err(at("creating", path)),
        AccessType::Block => {
            let file = File::create(path).map_err(at("creating", path))?;
            file.set_len(size as u64).map_err(at("sizing", path))?;
            file.sync_all().map_err(at("syncing", path))
        }
    }
}

/// Copies a volume or snapshot to `to` (replacing anything there). A block copy is then grown to
/// `size` bytes if it is smaller; a copy is never shrunk.
pub fn copy(access_type: AccessType, from: &Path, to: &Path, size: i64) -> Result<(), StorageError> {
    let partial = partial_path(to);
    remove(&partial)?;
    let copied = match access_type {
        AccessType::Mount => copy_tree(from, &partial),
        AccessType::Block => copy_file(from, &partial).and_then(|()| grow(&partial, size)),
    };
    if let Err(error) = copied {
        let _ = remove(&partial);
        return Err(error);
    }
    remove(to)?;
    fs::rename(&partial, to).map_err(at("renaming into place", to))
}

/// Grows a block volume's file to `size` bytes; never shrinks it.
pub fn grow(path: &Path, size: i64) -> Result<(), StorageError> {
    let file = OpenOptions::new().write(true).open(path).map_err(at("opening", path))?;
    let current = file.metadata().map_err(at("reading size of", path))?.len();
    if (size as u64) > current {
        file.set_len(size as u64).map_err(at("growing", path))?;
        file.sync_all().map_err(at("syncing", path))?;
    }
    Ok(())
}

/// Removes a volume's or snapshot's data; data that is already gone is fine.
pub fn remove(path: &Path) -> Result<(), StorageError> {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(at("inspecting", path)(e)),
    };
    let removed = if meta.is_dir() { fs::remove_dir_all(path) } else { fs::remove_file(path) };
    match removed {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(at("removing", path)(e)),
        _ => Ok(()),
    }
}

/// Bytes of disk the data under `path` occupies (allocated blocks, so sparse files count what they use).
pub fn used_bytes(path: &Path) -> Result<i64, StorageError> {
    let meta = fs::symlink_metadata(path).map_err(at("inspecting", path))?;
    if !meta.is_dir() {
        return Ok(allocated(&meta));
    }
    let mut total = 0i64;
    let entries = fs::read_dir(path).map_err(at("listing", path))?;
    for entry in entries {
        let entry = entry.map_err(at("listing", path))?;
        let child = entry.path();
        let meta = fs::symlink_metadata(&child).map_err(at("inspecting", &child))?;
        total = total.saturating_add(if meta.is_dir() { used_bytes(&child)? } else { allocated(&meta) });
    }
    Ok(total)
}

fn allocated(meta: &fs::Metadata) -> i64 {
    // st_blocks is in 512-byte units whatever the filesystem's block size.
    (meta.blocks() as i64).saturating_mul(512)
}

fn partial_path(to: &Path) -> PathBuf {
    let mut name = to.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    to.with_file_name(name)
}

/// Copies a directory tree: directories, regular files (sparse-aware) and symlinks, with permissions.
fn copy_tree(from: &Path, to: &Path) -> Result<(), StorageError> {
    fs::create_dir(to).map_err(at("creating", to))?;
    let entries = fs::read_dir(from).map_err(at("listing", from))?;
    for entry in entries {
        let entry = entry.map_err(at("listing", from))?;
        let source = entry.path();
        let target = to.join(entry.file_name());
        let kind = entry.file_type().map_err(at("inspecting", &source))?;
        if kind.is_dir() {
            copy_tree(&source, &target)?;
        } else if kind.is_file() {
            copy_file(&source, &target)?;
        } else if kind.is_symlink() {
            let link = fs::read_link(&source).map_err(at("reading link", &source))?;
            std::os::unix::fs::symlink(&link, &target).map_err(at("creating link", &target))?;
        }
        // Sockets, FIFOs and device nodes are not data; a snapshot leaves them out.
    }
    let permissions = fs::metadata(from).map_err(at("inspecting", from))?.permissions();
    fs::set_permissions(to, permissions).map_err(at("setting permissions of", to))
}

/// Copies one regular file, keeping holes as holes.
fn copy_file(from: &Path, to: &Path) -> Result<(), StorageError> {
    let input = File::open(from).map_err(at("opening", from))?;
    let meta = input.metadata().map_err(at("inspecting", from))?;
    let output = OpenOptions::new().write(true).create_new(true).open(to).map_err(at("creating", to))?;
    output.set_len(meta.len()).map_err(at("sizing", to))?;
    let mut buffer = vec![0u8; 1 << 20];
    for (start, end) in data_ranges(&input, meta.len()).map_err(at("scanning", from))? {
        copy_range(&input, &output, start, end, &mut buffer).map_err(at("copying to", to))?;
    }
    output.set_permissions(meta.permissions()).map_err(at("setting permissions of", to))?;
    output.sync_all().map_err(at("syncing", to))
}

/// The byte ranges of `file` that hold data, from SEEK_DATA/SEEK_HOLE; the whole file where the
/// filesystem cannot tell.
fn data_ranges(file: &File, len: u64) -> io::Result<Vec<(u64, u64)>> {
    let fd = file.as_raw_fd();
    let mut ranges = Vec::new();
    let mut offset = 0u64;
    while offset < len {
        // SAFETY: lseek only reads the descriptor, which `file` keeps open for the whole call; the file
        // position it moves is not used, since copying uses positioned reads.
        let data = unsafe { libc::lseek(fd, offset as libc::off_t, libc::SEEK_DATA) };
        if data < 0 {
            let error = io::Error::last_os_error();
            return match error.raw_os_error() {
                // No data after `offset`: the rest is one hole.
                Some(libc::ENXIO) => Ok(ranges),
                // The filesystem does not support SEEK_DATA: copy everything from here.
                Some(libc::EINVAL) => {
                    ranges.push((offset, len));
                    Ok(ranges)
                }
                _ => Err(error),
            };
        }
        // SAFETY: as above.
        let hole = unsafe { libc::lseek(fd, data, libc::SEEK_HOLE) };
        if hole < 0 {
            return Err(io::Error::last_os_error());
        }
        let (start, end) = (data as u64, (hole as u64).min(len));
        if end > start {
            ranges.push((start, end));
        }
        offset = end.max(start + 1);
    }
    Ok(ranges)
}

/// Copies `[start, end)` with positioned I/O, skipping blocks of zeroes so they stay holes.
fn copy_range(input: &File, output: &File, start: u64, end: u64, buffer: &mut [u8]) -> io::Result<()> {
    let mut offset = start;
    while offset < end {
        let want = buffer.len().min((end - offset) as usize);
        let read = input.read_at(&mut buffer[..want], offset)?;
        if read == 0 {
            break;
        }
        let chunk = &buffer[..read];
        if chunk.iter().any(|b| *b != 0) {
            output.write_all_at(chunk, offset)?;
        }
        offset += read as u64;
    }
    Ok(())
}

/// Block volume (a regular file) or mount volume (a directory).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AccessType {
    Mount,
    Block,
}

impl AccessType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Mount => "mount",
            Self::Block => "block",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_trees_with_files_links_and_permissions() {
        let dir = tempfile::tempdir().unwrap();
        let from = dir.path().join("from");
        fs::create_dir_all(from.join("sub/deeper")).unwrap();
        fs::write(from.join("a.txt"), "hello").unwrap();
        fs::write(from.join("sub/deeper/b.bin"), vec![7u8; 3 << 20]).unwrap();
        std::os::unix::fs::symlink("a.txt", from.join("link")).unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        fs::set_permissions(from.join("a.txt"), fs::Permissions::from_mode(0o600)).unwrap();

        let to = dir.path().join("to");
        copy(AccessType::Mount, &from, &to, 0).unwrap();
        assert_eq!(fs::read_to_string(to.join("a.txt")).unwrap(), "hello");
        assert_eq!(fs::read(to.join("sub/deeper/b.bin")).unwrap(), vec![7u8; 3 << 20]);
        assert_eq!(fs::read_link(to.join("link")).unwrap(), Path::new("a.txt"));
        assert_eq!(fs::metadata(to.join("a.txt")).unwrap().permissions().mode() & 0o777, 0o600);
        assert!(!partial_path(&to).exists());

        // Copying again replaces the previous copy.
        fs::remove_file(from.join("a.txt")).unwrap();
        copy(AccessType::Mount, &from, &to, 0).unwrap();
        assert!(!to.join("a.txt").exists());
    }

    #[test]
    fn block_copies_stay_sparse_and_grow() {
        let dir = tempfile::tempdir().unwrap();
        let from = dir.path().join("block");
        let size = 8i64 << 30;
        create_empty(AccessType::Block, &from, size).unwrap();
        let file = OpenOptions::new().write(true).open(&from).unwrap();
        file.write_all_at(b"start", 0).unwrap();
        file.write_all_at(b"middle", 4 << 30).unwrap();
        drop(file);

        let to = dir.path().join("copy");
        copy(AccessType::Block, &from, &to, size + 4096).unwrap();
        let copied = File::open(&to).unwrap();
        assert_eq!(copied.metadata().unwrap().len(), (size + 4096) as u64);
        let mut buf = [0u8; 6];
        copied.read_exact_at(&mut buf[..5], 0).unwrap();
        assert_eq!(&buf[..5], b"start");
        copied.read_exact_at(&mut buf, 4 << 30).unwrap();
        assert_eq!(&buf, b"middle");
        assert!(used_bytes(&to).unwrap() < 16 << 20, "the copy stays sparse");

        grow(&to, 10).unwrap();
        assert_eq!(fs::metadata(&to).unwrap().len(), (size + 4096) as u64, "never shrinks");
    }

    #[test]
    fn removing_missing_data_is_fine() {
        let dir = tempfile::tempdir().unwrap();
        remove(&dir.path().join("nothing")).unwrap();
        let volume = dir.path().join("v");
        create_empty(AccessType::Mount, &volume, 0).unwrap();
        fs::write(volume.join("f"), "x").unwrap();
        remove(&volume).unwrap();
        assert!(!volume.exists());
    }
}
