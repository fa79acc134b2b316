//! The control plane's audit log (e2e/cluster.sh keeps one of every request a ServiceAccount makes): what a sidecar
//! under test asked of the API server, to count requests per object.

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Mutex;

use serde::Deserialize;

use crate::control_plane::cluster::Cluster;

/// One answered request.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Request {
    pub verb: String,
    /// `resource` or `resource/subresource`, with the API group (`volumesnapshots.snapshot.storage.k8s.io`).
    pub resource: String,
    /// The object's name (empty for lists and creates of generated names).
    pub name: String,
    pub code: u16,
}

#[derive(Deserialize)]
struct Entry {
    user: User,
    verb: String,
    #[serde(rename = "objectRef")]
    object: Option<ObjectRef>,
    #[serde(rename = "responseStatus")]
    status: Option<Status>,
}

#[derive(Deserialize)]
struct User {
    username: String,
}

#[derive(Deserialize)]
struct ObjectRef {
    resource: Option<String>,
    subresource: Option<String>,
    #[serde(rename = "apiGroup")]
    api_group: Option<String>,
    name: Option<String>,
}

#[derive(Deserialize)]
struct Status {
    code: Option<u16>,
}

/// Every request `username` made so far, in order.
pub fn requests_of(username: &str) -> Vec<Request> {
    with_requests_of(username, <[Request]>::to_vec)
}

/// How many requests `username` made so far: what a wait for quiet polls, without copying them.
pub fn request_count_of(username: &str) -> usize {
    with_requests_of(username, <[Request]>::len)
}

/// `read` applied to the requests of `username` in the log as written so far.
fn with_requests_of<T>(username: &str, read: impl FnOnce(&[Request]) -> T) -> T {
    let path = Cluster::shared().kubeconfig().with_file_name("logs").join("audit.log");
    static LOG: Mutex<Option<AuditLog>> = Mutex::new(None);
    let mut log = LOG.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let log = log.get_or_insert_with(AuditLog::default);
    log.catch_up(&path);
    read(log.by_user.get(username).map(Vec::as_slice).unwrap_or_default())
}

/// The audit log as read so far. The bench asks for a sidecar's requests every 250 ms while it waits for quiet, and
/// the log grows to tens of megabytes over a run: read and parsed whole each time, that kept a core busy beside the
/// sidecars being measured. Only the lines written since the last look are read.
#[derive(Default)]
struct AuditLog {
    /// Bytes of the file read so far, up to the end of its last complete line.
    offset: u64,
    /// The file's identity (inode), so that a new log (a cluster started again) is read from its start.
    inode: u64,
    by_user: HashMap<String, Vec<Request>>,
}

impl AuditLog {
    fn catch_up(&mut self, path: &Path) {
        let mut file = std::fs::File::open(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let meta = file.metadata().unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        if meta.ino() != self.inode || meta.len() < self.offset {
            *self = AuditLog { inode: meta.ino(), ..AuditLog::default() };
        }
        let mut fresh = Vec::new();
        file.seek(SeekFrom::Start(self.offset))
            .and_then(|_| file.read_to_end(&mut fresh))
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        // A line the API server is still writing is left for the next look.
        let Some(end) = fresh.iter().rposition(|&b| b == b'\n') else { return };
        self.offset += end as u64 + 1;
        for line in fresh[..end].split(|&b| b == b'\n') {
            if let Some((username, request)) = parse(line) {
                self.by_user.entry(username).or_default().push(request);
            }
        }
    }
}

/// One line of the log: who asked, and what.
fn parse(line: &[u8]) -> Option<(String, Request)> {
    let entry = serde_json::from_slice::<Entry>(line).ok()?;
    let object = entry.object.unwrap_or(ObjectRef { resource: None, subresource: None, api_group: None, name: None });
    let mut resource = object.resource.unwrap_or_default();
    if let Some(group) = object.api_group.filter(|g| !g.is_empty()) {
        resource = format!("{resource}.{group}");
    }
    if let Some(sub) = object.subresource {
        resource = format!("{resource}/{sub}");
    }
    let name = object.name.unwrap_or_default();
    let request =
        Request { verb: entry.verb, resource, name, code: entry.status.and_then(|s| s.code).unwrap_or_default() };
    Some((entry.user.username, request))
}

/// The requests of a stretch of work, by (verb, resource), leaving out what does not scale with the objects: Lease
/// renewals and the watches' lists and watches. The provisioner's in-flight journal is a Lease too, but its writes
/// are work: they are counted, as `leases (in-flight journal)` (with any Lease request the log does not name).
pub fn work_requests(requests: &[Request]) -> BTreeMap<(String, String), usize> {
    let mut counts = BTreeMap::new();
    for request in requests {
        let lease = request.resource.starts_with("leases.");
        // A create may not name its object in the log: counted, so that nothing of the journal's goes unseen.
        let journal = lease && (request.name.contains("-in-flight") || request.name.is_empty());
        let background = (lease && !journal) || matches!(request.verb.as_str(), "list" | "watch");
        if !background {
            let resource =
                if journal { format!("{} (in-flight journal)", request.resource) } else { request.resource.clone() };
            *counts.entry((request.verb.clone(), resource)).or_default() += 1;
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn line(user: &str, verb: &str, name: &str) -> String {
        format!(
            r#"{{"user":{{"username":"{user}"}},"verb":"{verb}","objectRef":{{"resource":"persistentvolumes","name":"{name}"}},"responseStatus":{{"code":201}}}}"#
        )
    }

    fn verbs(log: &AuditLog, user: &str) -> Vec<String> {
        log.by_user.get(user).map(|r| r.iter().map(|r| format!("{} {}", r.verb, r.name)).collect()).unwrap_or_default()
    }

    #[test]
    fn reads_only_new_complete_lines_and_starts_over_on_a_new_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let (a, b) = (line("sa:a", "create", "pv-1"), line("sa:b", "delete", "pv-2"));
        let half = line("sa:a", "patch", "pv-3");
        let (head, tail) = half.split_at(40);
        std::fs::write(&path, format!("{a}\n{b}\nnot json\n{head}")).unwrap();
        let mut log = AuditLog::default();
        log.catch_up(&path);
        assert_eq!(verbs(&log, "sa:a"), ["create pv-1"]);
        assert_eq!(verbs(&log, "sa:b"), ["delete pv-2"]);

        // The rest of the line being written, then nothing new: each request is counted once.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(format!("{tail}\n").as_bytes())
            .unwrap();
        log.catch_up(&path);
        log.catch_up(&path);
        assert_eq!(verbs(&log, "sa:a"), ["create pv-1", "patch pv-3"]);
        assert_eq!(log.by_user["sa:a"][1].code, 201);

        // A cluster started again writes a new log: what was read of the old one is forgotten.
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, format!("{b}\n")).unwrap();
        log.catch_up(&path);
        assert_eq!(verbs(&log, "sa:a"), Vec::<String>::new());
        assert_eq!(verbs(&log, "sa:b"), ["delete pv-2"]);
    }
}
