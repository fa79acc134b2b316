//! When each object reached the state a scenario waits for, seen through the bench's own admin watches (so both
//! sides are timed the same way, and polling intervals do not round the latencies).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::bail;
use futures::StreamExt;
use kube::Api;
use kube::runtime::watcher::{self, Event};
use serde::de::DeserializeOwned;

/// Now, as the API server's timestamps are written (status fields the bench writes itself).
pub fn now() -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now())
}

/// What a watch tells about one object: the claim name it is about (None: not ours), and whether it is done.
pub type Judge<K> = fn(&K, &str) -> Option<(String, bool)>;

#[derive(Default)]
struct State {
    done: HashMap<String, Instant>,
    live: HashSet<String>,
    synced: bool,
}

/// One watch and the first time each claim's object was seen done.
pub struct Tracker {
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl Tracker {
    /// Watches `api`; `judge(object, namespace)` names the claim an object belongs to and says if it is done.
    pub async fn start<K>(api: Api<K>, namespace: &str, judge: Judge<K>) -> Tracker
    where
        K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    {
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        let namespace = namespace.to_string();
        let task = tokio::spawn(async move {
            let mut stream = watcher::watcher(api, watcher::Config::default()).boxed();
            while let Some(event) = stream.next().await {
                let now = Instant::now();
                let mut state = shared.lock().expect("tracker lock");
                match event {
                    Ok(Event::Apply(object)) | Ok(Event::InitApply(object)) => {
                        if let Some((claim, done)) = judge(&object, &namespace) {
                            state.live.insert(claim.clone());
                            if done {
                                state.done.entry(claim).or_insert(now);
                            }
                        }
                    }
                    Ok(Event::Delete(object)) => {
                        if let Some((claim, _)) = judge(&object, &namespace) {
                            state.live.remove(&claim);
                        }
                    }
                    Ok(Event::InitDone) => state.synced = true,
                    Ok(Event::Init) | Err(_) => {}
                }
            }
        });
        let tracker = Tracker { state, task };
        while !tracker.state.lock().expect("tracker lock").synced {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tracker
    }

    /// The moment each claim's object was first seen done.
    pub fn done(&self) -> HashMap<String, Instant> {
        self.state.lock().expect("tracker lock").done.clone()
    }

    pub fn live(&self) -> usize {
        self.state.lock().expect("tracker lock").live.len()
    }

    /// Waits until `count` objects are done; returns when the last one was.
    pub async fn all_done(&self, count: usize, what: &str, timeout: Duration) -> anyhow::Result<Instant> {
        let started = Instant::now();
        loop {
            let done = self.done();
            if done.len() >= count {
                return Ok(done.values().max().copied().unwrap_or(started));
            }
            if started.elapsed() > timeout {
                bail!("{what}: {} of {count} after {timeout:?}", done.len());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until no object of ours is left.
    pub async fn none_left(&self, what: &str, timeout: Duration) -> anyhow::Result<()> {
        let started = Instant::now();
        while self.live() > 0 {
            if started.elapsed() > timeout {
                bail!("{what}: {} left after {timeout:?}", self.live());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }
}

impl Drop for Tracker {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// How many objects the bench itself creates or changes at a time (the "at once" of a scenario).
pub const CREATORS: usize = 50;

/// Generous: at 5 requests/s a side may need several requests per object.
pub fn timeout_for(objects: usize) -> Duration {
    Duration::from_secs(120 + 3 * objects as u64)
}

/// A claim is done once Bound.
pub fn bound(claim: &k8s_openapi::api::core::v1::PersistentVolumeClaim, _namespace: &str) -> Option<(String, bool)> {
    let phase = claim.status.as_ref().and_then(|s| s.phase.as_deref());
    Some((claim.metadata.name.clone()?, phase == Some("Bound")))
}

/// Creates every object through `api`, CREATORS at a time (the user's "at once"); each as stored, and when its
/// create was answered.
pub async fn create_all<K>(api: &Api<K>, objects: Vec<K>) -> anyhow::Result<Vec<(K, Instant)>>
where
    K: kube::Resource + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let created: Vec<anyhow::Result<(K, Instant)>> = futures::stream::iter(objects)
        .map(|object| async move {
            let created = api.create(&kube::api::PostParams::default(), &object).await?;
            Ok((created, Instant::now()))
        })
        .buffer_unordered(CREATORS)
        .collect()
        .await;
    created.into_iter().collect()
}
