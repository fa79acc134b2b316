//! What the plugin remembers: volumes, snapshots, group snapshots and node attachments, kept in
//! `<state-dir>/state.json`.
//!
//! Every change is made on a copy, written to disk (temporary file, fsync, rename, fsync of the
//! directory) and only then made current, so a change is durable before the caller hears about it and a
//! failed change leaves nothing behind. A restarted plugin, or one killed at any instruction, reads back
//! exactly what it last answered.
//!
//! Processes that share one state directory (`--shared-state`: a driver's controller and node pods on one machine)
//! each read `state.json` again, under the plugin's file lock, when another one has replaced it since.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tonic::Status;

use crate::creations::{Creations, Kind, Outcome};
use crate::instant::Instant;
use crate::prng::Prng;
pub use crate::storage::AccessType;
use crate::storage::Layout;

/// The state file format this build writes and reads.
const FORMAT_VERSION: u32 = 1;

/// Where a volume's initial content came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContentSource {
    Snapshot(String),
    Volume(String),
}

/// How a volume is staged or published at one path on this node. Two requests for the same path are
/// compatible exactly when their attachments are equal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    pub access_type: AccessType,
    /// The access mode's proto name, e.g. `SINGLE_NODE_WRITER`.
    pub access_mode: String,
    #[serde(default)]
    pub fs_type: String,
    #[serde(default)]
    pub mount_flags: Vec<String>,
    #[serde(default)]
    pub readonly: bool,
    #[serde(default)]
    pub staging_target_path: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Volume {
    pub id: String,
    pub name: String,
    /// Creation order; list paging follows it so that pages stay stable while volumes come and go.
    pub sequence: u64,
    pub capacity_bytes: i64,
    pub access_type: AccessType,
    /// The access modes CreateVolume asked for (proto names, e.g. `SINGLE_NODE_WRITER`), in request order.
    #[serde(default)]
    pub access_modes: Vec<String>,
    #[serde(default)]
    pub parameters: BTreeMap<String, String>,
    /// Current mutable parameters: those given at creation, updated by each ControllerModifyVolume.
    #[serde(default)]
    pub mutable_parameters: BTreeMap<String, String>,
    #[serde(default)]
    pub content_source: Option<ContentSource>,
    /// Staging target path → how it was staged.
    #[serde(default)]
    pub staged: BTreeMap<String, Attachment>,
    /// Target path → how it was published.
    #[serde(default)]
    pub published: BTreeMap<String, Attachment>,
    /// The node ControllerPublishVolume attached the volume to (`--attach-required` only).
    #[serde(default)]
    pub controller_publication: Option<ControllerPublication>,
}

/// A volume attached to a node by ControllerPublishVolume. Its `id` is new for every attachment and travels in the
/// publish context, so NodeStageVolume can tell the current attachment from a stale context of an earlier one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerPublication {
    pub node_id: String,
    pub readonly: bool,
    pub id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub id: String,
    /// Empty for the members of a group snapshot, which are created without a name of their own.
    pub name: String,
    pub sequence: u64,
    pub source_volume_id: String,
    pub size_bytes: i64,
    pub access_type: AccessType,
    #[serde(default)]
    pub parameters: BTreeMap<String, String>,
    pub created: Instant,
    #[serde(default)]
    pub group_snapshot_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupSnapshot {
    pub id: String,
    pub name: String,
    pub sequence: u64,
    pub source_volume_ids: Vec<String>,
    /// Member snapshots, in the order of `source_volume_ids`.
    pub snapshot_ids: Vec<String>,
    #[serde(default)]
    pub parameters: BTreeMap<String, String>,
    pub created: Instant,
}

/// Everything in `state.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    pub version: u32,
    pub next_sequence: u64,
    #[serde(default)]
    pub volumes: BTreeMap<String, Volume>,
    #[serde(default)]
    pub snapshots: BTreeMap<String, Snapshot>,
    #[serde(default)]
    pub group_snapshots: BTreeMap<String, GroupSnapshot>,
    /// What each successful Create call did with its name (see [`crate::creations`]).
    #[serde(default)]
    pub creations: Creations,
}

impl Default for State {
    fn default() -> Self {
        Self {
            version: FORMAT_VERSION,
            next_sequence: 1,
            volumes: BTreeMap::new(),
            snapshots: BTreeMap::new(),
            group_snapshots: BTreeMap::new(),
            creations: Creations::default(),
        }
    }
}

impl State {
    pub fn volume_by_name(&self, name: &str) -> Option<&Volume> {
        self.volumes.values().find(|v| v.name == name)
    }

    pub fn snapshot_by_name(&self, name: &str) -> Option<&Snapshot> {
        self.snapshots.values().find(|s| !s.name.is_empty() && s.name == name)
    }

    pub fn group_snapshot_by_name(&self, name: &str) -> Option<&GroupSnapshot> {
        self.group_snapshots.values().find(|g| g.name == name)
    }

    /// Bytes promised to volumes; what GetCapacity subtracts from the configured capacity.
    pub fn provisioned_bytes(&self) -> i64 {
        self.volumes.values().map(|v| v.capacity_bytes).fold(0i64, i64::saturating_add)
    }

    /// The next creation sequence number (volumes, snapshots and groups share one counter).
    pub fn take_sequence(&mut self) -> u64 {
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        sequence
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("reading {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path} is not a valid state file: {source}")]
    Parse { path: PathBuf, source: serde_json::Error },
    #[error("{path} has format version {version}; this build reads version {FORMAT_VERSION}")]
    Version { path: PathBuf, version: u32 },
    #[error("writing {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
}

impl From<StoreError> for Status {
    fn from(error: StoreError) -> Self {
        Status::internal(error.to_string())
    }
}

/// A change in progress: a draft of the state, the data directory layout and the ID generator.
pub struct Change<'a> {
    pub state: &'a mut State,
    pub layout: &'a Layout,
    prng: &'a mut Prng,
}

impl Change<'_> {
    /// A fresh ID for a volume, snapshot or group snapshot. IDs double as file names under the state
    /// directory, so they never come from a request.
    pub fn new_id(&mut self) -> String {
        self.prng.uuid()
    }

    /// Counts a successful Create call in the same change as what it made, so the count is exactly as durable.
    /// A second object made under one name is the duplicated side effect tests look for: worth a warning.
    pub fn count_create(&mut self, kind: Kind, name: &str, outcome: Outcome) {
        let made = self.state.creations.record(kind, name, outcome, Instant::now());
        if made > 1 {
            tracing::warn!(method = kind.method(), name, made, "a backend object was made again under this name");
        }
    }
}

/// The state and its file. Callers hold it under the plugin's mutex.
pub struct Store {
    layout: Layout,
    state: State,
    prng: Prng,
    /// Which `state.json` the state was last read from or written to.
    read: Option<FileStamp>,
}

/// What tells one `state.json` from the next: every write replaces the file (a rename), so a new inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileStamp {
    inode: u64,
    len: u64,
    modified: Option<std::time::SystemTime>,
}

fn stamp(path: &Path) -> Option<FileStamp> {
    use std::os::unix::fs::MetadataExt as _;
    let meta = std::fs::metadata(path).ok()?;
    Some(FileStamp { inode: meta.ino(), len: meta.len(), modified: meta.modified().ok() })
}

fn read_state(path: &Path) -> Result<State, StoreError> {
    match std::fs::read(path) {
        Ok(bytes) => {
            let state: State = serde_json::from_slice(&bytes)
                .map_err(|source| StoreError::Parse { path: path.to_path_buf(), source })?;
            if state.version != FORMAT_VERSION {
                return Err(StoreError::Version { path: path.to_path_buf(), version: state.version });
            }
            Ok(state)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(State::default()),
        Err(source) => Err(StoreError::Read { path: path.to_path_buf(), source }),
    }
}

impl Store {
    /// Reads `state.json`, or starts empty when there is none yet.
    pub fn open(layout: Layout) -> Result<Self, StoreError> {
        let path = layout.state_file();
        let read = stamp(&path);
        let state = read_state(&path)?;
        Ok(Self { layout, state, prng: Prng::from_entropy(), read })
    }

    /// Reads `state.json` again when another process has written it since this one last read or wrote it. The
    /// caller holds the state directory's file lock, so no write is under way.
    pub fn catch_up(&mut self) -> Result<(), StoreError> {
        let path = self.layout.state_file();
        let now = stamp(&path);
        if now != self.read {
            self.state = read_state(&path)?;
            self.read = now;
        }
        Ok(())
    }

    pub fn state(&self) -> &State {
        &self.state
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Runs `change` on a copy of the state; when it succeeds and changed something, persists the copy
    /// and makes it current. When it fails, nothing of the state changes.
    pub fn update<T>(&mut self, change: impl FnOnce(&mut Change<'_>) -> Result<T, Status>) -> Result<T, Status> {
        let mut draft = self.state.clone();
        let value = change(&mut Change { state: &mut draft, layout: &self.layout, prng: &mut self.prng })?;
        if draft != self.state {
            save(&self.layout.state_file(), &draft)?;
            self.read = stamp(&self.layout.state_file());
            self.state = draft;
        }
        Ok(value)
    }
}

/// Writes the state so that a crash leaves either the old or the new file, never a torn one.
fn save(path: &Path, state: &State) -> Result<(), StoreError> {
    let write_error = |source| StoreError::Write { path: path.to_path_buf(), source };
    let mut bytes = serde_json::to_vec_pretty(state).map_err(|e| write_error(std::io::Error::other(e)))?;
    bytes.push(b'\n');
    let temporary = path.with_extension("json.tmp");
    let mut file = File::create(&temporary).map_err(write_error)?;
    file.write_all(&bytes).map_err(write_error)?;
    file.sync_all().map_err(write_error)?;
    drop(file);
    std::fs::rename(&temporary, path).map_err(write_error)?;
    // The rename itself is only durable once the directory entry is.
    if let Some(dir) = path.parent() {
        File::open(dir).and_then(|d| d.sync_all()).map_err(write_error)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn volume(id: &str, sequence: u64) -> Volume {
        Volume {
            id: id.into(),
            name: format!("name-{id}"),
            sequence,
            capacity_bytes: 10,
            access_type: AccessType::Mount,
            access_modes: vec!["SINGLE_NODE_WRITER".into()],
            parameters: BTreeMap::new(),
            mutable_parameters: BTreeMap::from([("iops".into(), "100".into())]),
            content_source: Some(ContentSource::Volume("other".into())),
            staged: BTreeMap::new(),
            published: BTreeMap::new(),
            controller_publication: None,
        }
    }

    #[test]
    fn changes_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::create(dir.path()).unwrap();
        let mut store = Store::open(layout.clone()).unwrap();
        store
            .update(|change| {
                let sequence = change.state.take_sequence();
                change.state.volumes.insert("a".into(), volume("a", sequence));
                Ok(())
            })
            .unwrap();
        let reopened = Store::open(layout).unwrap();
        assert_eq!(reopened.state(), store.state());
        assert_eq!(reopened.state().volumes["a"].mutable_parameters["iops"], "100");
        assert_eq!(reopened.state().next_sequence, 2);
    }

    #[test]
    fn a_failed_change_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::create(dir.path()).unwrap();
        let mut store = Store::open(layout.clone()).unwrap();
        let result: Result<(), Status> = store.update(|change| {
            change.state.volumes.insert("a".into(), volume("a", 1));
            Err(Status::invalid_argument("no"))
        });
        assert!(result.is_err());
        assert!(store.state().volumes.is_empty());
        assert!(!layout.state_file().exists(), "nothing was written");
    }

    #[test]
    fn a_store_catches_up_with_what_another_process_wrote() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::create(dir.path()).unwrap();
        let (mut controller, mut node) = (Store::open(layout.clone()).unwrap(), Store::open(layout).unwrap());
        let add = |store: &mut Store, id: &str| {
            store
                .update(|change| {
                    let sequence = change.state.take_sequence();
                    change.state.volumes.insert(id.into(), volume(id, sequence));
                    Ok(())
                })
                .unwrap()
        };
        add(&mut controller, "a");
        assert!(node.state().volumes.is_empty(), "read once, at open");
        node.catch_up().unwrap();
        assert_eq!(node.state(), controller.state(), "read again: the file was replaced");
        add(&mut node, "b");
        controller.catch_up().unwrap();
        assert_eq!(controller.state().volumes.keys().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(controller.state().next_sequence, 3, "sequences stay unique across the two");
        let before = controller.state().clone();
        controller.catch_up().unwrap();
        assert_eq!(controller.state(), &before, "nothing new: nothing read");
    }

    #[test]
    fn refuses_a_corrupt_file() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::create(dir.path()).unwrap();
        std::fs::write(layout.state_file(), "{ not json").unwrap();
        assert!(matches!(Store::open(layout.clone()), Err(StoreError::Parse { .. })));
        std::fs::write(layout.state_file(), r#"{"version": 9, "next_sequence": 1}"#).unwrap();
        assert!(matches!(Store::open(layout), Err(StoreError::Version { version: 9, .. })));
    }
}
