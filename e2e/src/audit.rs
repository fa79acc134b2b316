//! The control plane's audit log (e2e/cluster.sh keeps one of every request a ServiceAccount makes): what a sidecar
//! under test asked of the API server, to count requests per object.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::Cluster;

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
    let path = Cluster::shared().kubeconfig().with_file_name("logs").join("audit.log");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    text.lines()
        .filter_map(|line| serde_json::from_str::<Entry>(line).ok())
        .filter(|entry| entry.user.username == username)
        .map(|entry| {
            let object =
                entry.object.unwrap_or(ObjectRef { resource: None, subresource: None, api_group: None, name: None });
            let mut resource = object.resource.unwrap_or_default();
            if let Some(group) = object.api_group.filter(|g| !g.is_empty()) {
                resource = format!("{resource}.{group}");
            }
            if let Some(sub) = object.subresource {
                resource = format!("{resource}/{sub}");
            }
            let name = object.name.unwrap_or_default();
            Request { verb: entry.verb, resource, name, code: entry.status.and_then(|s| s.code).unwrap_or_default() }
        })
        .collect()
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
