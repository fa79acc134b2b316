//! The writer against an in-memory Lease endpoint: group commit, merging after a Conflict, refusals.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Method, Request, Response, StatusCode};
use k8s_openapi::api::coordination::v1::Lease;
use kube::client::Body;
use tokio_util::sync::CancellationToken;

use super::*;

/// One Lease as an API server keeps it, and what was asked of it.
#[derive(Default)]
struct FakeLeases {
    lease: Option<Lease>,
    version: u64,
    writes: usize,
    /// Answer every request with this status instead (e.g. 403).
    refuse: Option<u16>,
}

impl FakeLeases {
    fn store(&mut self, mut lease: Lease) -> Lease {
        self.version += 1;
        lease.metadata.resource_version = Some(self.version.to_string());
        self.lease = Some(lease.clone());
        lease
    }

    /// Someone else writes the Lease (another annotation), so our next guarded write meets a Conflict.
    fn foreign_write(&mut self, key: &str) {
        let mut lease = self.lease.clone().unwrap_or_default();
        lease.metadata.annotations.get_or_insert_default().insert(key.into(), "theirs".into());
        self.store(lease);
    }
}

fn status(code: u16) -> Response<Body> {
    let reason = match code {
        403 => "Forbidden",
        404 => "NotFound",
        409 => "Conflict",
        _ => "MethodNotAllowed",
    };
    let body = serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
        "reason": reason, "message": format!("status {code}")});
    Response::builder().status(code).body(Body::from(serde_json::to_vec(&body).unwrap())).unwrap()
}

fn ok(code: StatusCode, lease: &Lease) -> Response<Body> {
    Response::builder().status(code).body(Body::from(serde_json::to_vec(lease).unwrap())).unwrap()
}

fn client(leases: Arc<Mutex<FakeLeases>>) -> kube::Client {
    let service = tower::service_fn(move |request: Request<Body>| {
        let leases = leases.clone();
        async move {
            let method = request.method().clone();
            let bytes = request.into_body().collect_bytes().await.unwrap();
            let mut leases = leases.lock().unwrap();
            if let Some(code) = leases.refuse {
                return Ok::<_, std::convert::Infallible>(status(code));
            }
            let response = match method {
                Method::GET => match &leases.lease {
                    Some(lease) => ok(StatusCode::OK, lease),
                    None => status(404),
                },
                Method::POST | Method::PUT => {
                    let lease: Lease = serde_json::from_slice(&bytes).unwrap();
                    let current = leases.lease.as_ref().and_then(|l| l.metadata.resource_version.clone());
                    match (method == Method::POST, current) {
                        (true, Some(_)) => status(409),
                        (false, None) => status(404),
                        (false, Some(version))
                            if lease.metadata.resource_version.as_deref() != Some(version.as_str()) =>
                        {
                            status(409)
                        }
                        (created, _) => {
                            leases.writes += 1;
                            let stored = leases.store(lease);
                            ok(if created { StatusCode::CREATED } else { StatusCode::OK }, &stored)
                        }
                    }
                }
                _ => status(405),
            };
            Ok(response)
        }
    });
    kube::Client::new(service, "default")
}

fn journal() -> Journal {
    Journal::new(JournalOptions {
        namespace: "default".into(),
        name: "driver-in-flight".into(),
        prefix: "example.com/in-flight-".into(),
        bounds: Bounds::default(),
        removal_delay: Duration::from_secs(3),
        linger: Duration::from_millis(10),
    })
}

fn start(leases: &Arc<Mutex<FakeLeases>>) -> (Journal, CancellationToken) {
    let journal = journal();
    let stop = CancellationToken::new();
    let (writer, client, token) = (journal.clone(), client(leases.clone()), stop.clone());
    tokio::spawn(async move { writer.run(client, token).await });
    (journal, stop)
}

#[tokio::test]
async fn entries_starting_together_cost_one_write() {
    let leases = Arc::new(Mutex::new(FakeLeases::default()));
    let (journal, stop) = start(&leases);
    journal.loaded().await;
    let puts = (0..100).map(|i| {
        let journal = journal.clone();
        async move { journal.put(&format!("claim-{i}"), format!("entry {i}")).await }
    });
    let answers = futures::future::join_all(puts).await;
    assert!(answers.iter().all(Result::is_ok), "{answers:?}");
    assert_eq!(leases.lock().unwrap().writes, 1, "one create for a hundred entries");
    assert_eq!(journal.entries().len(), 100);
    assert_eq!(journal.get("claim-7").as_deref(), Some("entry 7"));
    stop.cancel();
}

#[tokio::test]
async fn a_conflict_is_merged_and_keeps_the_other_writer_s_annotations() {
    let leases = Arc::new(Mutex::new(FakeLeases::default()));
    let (journal, stop) = start(&leases);
    journal.loaded().await;
    journal.put("a", "1".into()).await.unwrap();
    leases.lock().unwrap().foreign_write("example.com/in-flight-b");
    journal.put("c", "3".into()).await.unwrap();
    let stored = leases.lock().unwrap().lease.clone().unwrap().metadata.annotations.unwrap();
    let keys: Vec<&str> = stored.keys().map(String::as_str).collect();
    assert_eq!(keys, ["example.com/in-flight-a", "example.com/in-flight-b", "example.com/in-flight-c"]);
    assert_eq!(journal.get("b").as_deref(), Some("theirs"), "the view follows what was read back");
    stop.cancel();
}

#[tokio::test(start_paused = true)]
async fn removals_wait_for_a_quiet_journal_then_go_together() {
    let leases = Arc::new(Mutex::new(FakeLeases::default()));
    let (journal, stop) = start(&leases);
    journal.loaded().await;
    for key in ["a", "b", "c"] {
        journal.put(key, "x".into()).await.unwrap();
    }
    let writes = leases.lock().unwrap().writes;
    journal.remove("a");
    tokio::time::sleep(Duration::from_secs(2)).await;
    journal.remove("b");
    assert_eq!(journal.get("a"), None, "a removal shows at once");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(leases.lock().unwrap().writes, writes, "not written while removals keep coming");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(leases.lock().unwrap().writes, writes + 1, "one write for both, once quiet");
    let stored = leases.lock().unwrap().lease.clone().unwrap().metadata.annotations.unwrap();
    assert_eq!(stored.keys().collect::<Vec<_>>(), ["example.com/in-flight-c"]);
    stop.cancel();
}

#[tokio::test(start_paused = true)]
async fn a_journal_that_cannot_be_read_refuses_entries() {
    let leases = Arc::new(Mutex::new(FakeLeases { refuse: Some(403), ..Default::default() }));
    let (journal, stop) = start(&leases);
    let refused = journal.put("a", "1".into()).await;
    assert!(matches!(refused, Err(Refused::Unavailable(_))), "{refused:?}");
    // Once readable (the RBAC fixed), entries are taken again.
    leases.lock().unwrap().refuse = None;
    journal.loaded().await;
    journal.put("a", "1".into()).await.unwrap();
    stop.cancel();
}

#[tokio::test]
async fn a_journal_that_cannot_be_written_refuses_entries() {
    let leases = Arc::new(Mutex::new(FakeLeases::default()));
    let (journal, stop) = start(&leases);
    journal.loaded().await;
    leases.lock().unwrap().refuse = Some(403);
    let refused = journal.put("a", "1".into()).await;
    assert!(matches!(refused, Err(Refused::Unavailable(_))), "{refused:?}");
    assert_eq!(journal.get("a"), None);
    stop.cancel();
}

/// The keys of the journal's entries in the stored Lease.
fn stored_keys(leases: &Arc<Mutex<FakeLeases>>) -> Vec<String> {
    let lease = leases.lock().unwrap().lease.clone().unwrap_or_default();
    let annotations = lease.metadata.annotations.unwrap_or_default();
    annotations.keys().filter_map(|k| k.strip_prefix("example.com/in-flight-")).map(str::to_string).collect()
}

#[tokio::test(start_paused = true)]
async fn an_entry_put_again_before_its_removal_is_written_can_be_removed_again() {
    // A claim synced twice in a row: its PV saved (the entry removed), then, the PV not yet in the cache, recorded
    // again with the same entry. Nothing needs writing then, but the entry is in the Lease and must stay removable.
    let leases = Arc::new(Mutex::new(FakeLeases::default()));
    let (journal, stop) = start(&leases);
    journal.loaded().await;
    journal.put("a", "x".into()).await.unwrap();
    journal.remove("a");
    journal.put("a", "x".into()).await.unwrap();
    assert_eq!(journal.get("a").as_deref(), Some("x"), "the view holds what the Lease holds");
    journal.remove("a");
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(stored_keys(&leases), Vec::<String>::new());
    assert_eq!(journal.get("a"), None);
    stop.cancel();
}

#[tokio::test(start_paused = true)]
async fn a_removal_asked_for_before_the_lease_is_read_is_written() {
    let leases = Arc::new(Mutex::new(FakeLeases::default()));
    let mut lease = Lease::default();
    lease.metadata.name = Some("driver-in-flight".into());
    let annotations = lease.metadata.annotations.get_or_insert_default();
    for key in ["a", "b"] {
        annotations.insert(format!("example.com/in-flight-{key}"), "left by an earlier run".into());
    }
    leases.lock().unwrap().store(lease);
    let (journal, stop) = start(&leases);
    // The writer has not run yet (this runtime has one thread): the Lease is not read.
    journal.remove("a");
    journal.loaded().await;
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(journal.get("a"), None, "the removal shows once the Lease is read");
    assert_eq!(journal.get("b").as_deref(), Some("left by an earlier run"));
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(stored_keys(&leases), ["b"]);
    stop.cancel();
}
