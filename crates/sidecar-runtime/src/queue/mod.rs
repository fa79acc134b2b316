//! The controllers' work queue, with client-go's workqueue semantics:
//!
//! - a key added while already queued is queued once;
//! - a key added while a worker processes it is not handed to another worker:
//!   it runs again once the current run ends, never concurrently with itself;
//! - failed keys come back after a per-key exponential delay
//!   ([`RetryPolicy`]) until [`WorkQueue::forget`] resets them on success;
//! - [`WorkQueue::add_after`] delays an add, keeping the earliest time if the
//!   key already waits;
//! - [`WorkQueue::shut_down`] stops handing out work at once; work in flight
//!   finishes and [`WorkQueue::wait_idle`] tells when.
//!
//! Idle workers sleep on a notification or on the next delayed key's time,
//! never in a polling loop.

mod backoff;
mod metrics;

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::future::Future;
use std::hash::Hash;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::FutureExt;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub use backoff::{RetryPolicy, Schedule};
pub use metrics::QueueMetrics;
use metrics::{Backlog, BoundQueueMetrics};

/// What a key needs to be queued: cheap clones, equality and hashing, and `Debug` for the log line of a run that
/// panicked (keys are object names, never secrets).
pub trait QueueKey: Clone + Eq + Hash + std::fmt::Debug + Send + Sync + 'static {}
impl<T: Clone + Eq + Hash + std::fmt::Debug + Send + Sync + 'static> QueueKey for T {}

/// What became of one run of a key, for [`WorkQueue::run`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Finished: the key's failure count is reset.
    Done,
    /// Failed: run again after the key's next backoff delay.
    Retry,
    /// Run again after exactly this delay, without touching the backoff (for
    /// "not yet" answers such as upstream's slow set after an infeasible error).
    RetryAfter(Duration),
}

impl Outcome {
    /// The verdict of a key whose run did two jobs: the more urgent of the two (a retry with backoff beats a fixed
    /// delay, the shorter delay beats the longer, anything beats done).
    pub fn most_urgent(self, other: Outcome) -> Outcome {
        match (self, other) {
            (Outcome::Retry, _) | (_, Outcome::Retry) => Outcome::Retry,
            (Outcome::RetryAfter(x), Outcome::RetryAfter(y)) => Outcome::RetryAfter(x.min(y)),
            (Outcome::RetryAfter(x), Outcome::Done) | (Outcome::Done, Outcome::RetryAfter(x)) => Outcome::RetryAfter(x),
            (Outcome::Done, Outcome::Done) => Outcome::Done,
        }
    }
}

/// A deduplicating, rate-limited work queue. Clones share the queue.
pub struct WorkQueue<K: QueueKey> {
    inner: Arc<Inner<K>>,
}

impl<K: QueueKey> Clone for WorkQueue<K> {
    fn clone(&self) -> Self {
        WorkQueue { inner: self.inner.clone() }
    }
}

struct Inner<K> {
    name: String,
    policy: RetryPolicy,
    state: Mutex<State<K>>,
    /// Wakes workers waiting for a key.
    work: Notify,
    /// Wakes [`WorkQueue::wait_idle`] when the last running key finishes.
    idle: Notify,
    metrics: Option<BoundQueueMetrics>,
}

struct State<K> {
    /// Keys ready to run, in order, each with when it was queued (the queue-duration metric).
    ///
    /// A queued key is one allocation, shared by `queue`, `dirty` and `processing`, and its time rides with it: a
    /// resync queues every object at once, and three copies of each key (a map of queue times the third) were a third
    /// of a provisioner's peak heap among 10,000 claims and PVs.
    queue: VecDeque<(Arc<K>, Instant)>,
    /// Keys that must run (again): queued, or re-added while running.
    dirty: HashSet<Arc<K>>,
    /// Keys a worker holds now.
    processing: HashSet<Arc<K>>,
    /// Delayed keys by ready time (the sequence number keeps entries unique).
    waiting: BTreeMap<(Instant, u64), K>,
    waiting_since: HashMap<K, (Instant, u64)>,
    /// Failure count and the delays still to come, per failing key.
    failures: HashMap<K, (u32, Schedule)>,
    sequence: u64,
    shutting_down: bool,
}

impl<K: QueueKey> WorkQueue<K> {
    /// A queue named `name` (the `name` label of its metrics, and in logs).
    pub fn new(name: impl Into<String>, policy: RetryPolicy) -> WorkQueue<K> {
        WorkQueue::build(name.into(), policy, None)
    }

    /// A queue whose depth, adds, retries and durations show up in `metrics`.
    pub fn with_metrics(name: impl Into<String>, policy: RetryPolicy, metrics: &QueueMetrics) -> WorkQueue<K> {
        let name = name.into();
        let bound = metrics.for_queue(&name);
        let queue = WorkQueue::build(name.clone(), policy, Some(bound));
        let backlog: Arc<dyn Backlog> = queue.inner.clone();
        metrics.watch_backlog(&name, Arc::downgrade(&backlog));
        queue
    }

    /// [`WorkQueue::with_metrics`] when `metrics` is given, else [`WorkQueue::new`].
    pub fn with_optional_metrics(
        name: impl Into<String>,
        policy: RetryPolicy,
        metrics: Option<&QueueMetrics>,
    ) -> WorkQueue<K> {
        match metrics {
            Some(metrics) => WorkQueue::with_metrics(name, policy, metrics),
            None => WorkQueue::new(name, policy),
        }
    }

    fn build(name: String, policy: RetryPolicy, metrics: Option<BoundQueueMetrics>) -> WorkQueue<K> {
        let state = State {
            queue: VecDeque::new(),
            dirty: HashSet::new(),
            processing: HashSet::new(),
            waiting: BTreeMap::new(),
            waiting_since: HashMap::new(),
            failures: HashMap::new(),
            sequence: 0,
            shutting_down: false,
        };
        let inner = Inner { name, policy, state: Mutex::new(state), work: Notify::new(), idle: Notify::new(), metrics };
        WorkQueue { inner: Arc::new(inner) }
    }

    pub fn name(&self) -> &str {
        &self.inner.name
    }

    fn lock(&self) -> MutexGuard<'_, State<K>> {
        // A panic while holding this lock cannot leave the sets half-updated
        // in a way that matters more than losing the process, so carry on.
        self.inner.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Queues `key` to run now (once, however often it is added).
    pub fn add(&self, key: K) {
        let mut state = self.lock();
        if self.enqueue(&mut state, key) {
            drop(state);
            self.inner.work.notify_one();
        }
    }

    /// Queues `key` to run once `delay` has passed. If it already waits, the
    /// earlier of the two times wins.
    pub fn add_after(&self, key: K, delay: Duration) {
        if delay.is_zero() {
            return self.add(key);
        }
        let ready = Instant::now() + delay;
        let mut state = self.lock();
        if state.shutting_down {
            return;
        }
        if let Some(&(existing, sequence)) = state.waiting_since.get(&key) {
            if existing <= ready {
                return;
            }
            state.waiting.remove(&(existing, sequence));
        }
        state.sequence += 1;
        let slot = (ready, state.sequence);
        state.waiting.insert(slot, key.clone());
        state.waiting_since.insert(key, slot);
        drop(state);
        // Sleeping workers may be waiting for a later time: let them look again.
        self.inner.work.notify_waiters();
    }

    /// Queues `key` after its next backoff delay and counts the failure.
    pub fn add_rate_limited(&self, key: K) {
        let delay = {
            let mut state = self.lock();
            let policy = self.inner.policy;
            let (count, schedule) = state.failures.entry(key.clone()).or_insert_with(|| (0, policy.schedule()));
            *count = count.saturating_add(1);
            schedule.next().unwrap_or(policy.max)
        };
        if let Some(metrics) = &self.inner.metrics {
            metrics.retries.inc();
        }
        tracing::debug!(queue = %self.inner.name, ?delay, "requeueing after failure");
        self.add_after(key, delay);
    }

    /// Resets `key`'s backoff: its next failure waits `start` again.
    pub fn forget(&self, key: &K) {
        self.lock().failures.remove(key);
    }

    /// How many failures of `key` are counted since it was last forgotten.
    pub fn failures(&self, key: &K) -> u32 {
        self.lock().failures.get(key).map_or(0, |(count, _)| *count)
    }

    /// Keys ready to run now (not counting running or delayed ones).
    pub fn len(&self) -> usize {
        self.lock().queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keys a worker holds right now.
    pub fn in_flight(&self) -> usize {
        self.lock().processing.len()
    }

    /// Stops handing out keys: [`WorkQueue::next`] returns `None` from now on,
    /// and adds are ignored. Keys being processed finish normally.
    pub fn shut_down(&self) {
        self.lock().shutting_down = true;
        self.inner.work.notify_waiters();
    }

    pub fn is_shutting_down(&self) -> bool {
        self.lock().shutting_down
    }

    /// Completes when no key is being processed.
    pub async fn wait_idle(&self) {
        loop {
            let idle = self.inner.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if self.lock().processing.is_empty() {
                return;
            }
            idle.await;
        }
    }

    /// Waits for the next key to run. `None` once the queue shuts down. The
    /// key counts as being processed until the returned item is dropped.
    pub async fn next(&self) -> Option<WorkItem<K>> {
        loop {
            let notified = self.inner.work.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();

            let wake_at = {
                let mut state = self.lock();
                if state.shutting_down {
                    return None;
                }
                self.promote_due(&mut state, Instant::now());
                if let Some((key, queued_at)) = state.queue.pop_front() {
                    state.dirty.remove(&*key);
                    state.processing.insert(key.clone());
                    let more = !state.queue.is_empty();
                    drop(state);
                    if let Some(metrics) = &self.inner.metrics {
                        metrics.depth.dec();
                        metrics.observe_queued(queued_at.elapsed());
                    }
                    if more {
                        // Pass the wake-up on, in case a batch arrived at once.
                        self.inner.work.notify_one();
                    }
                    return Some(WorkItem { queue: self.clone(), key: Some(key), started: Instant::now() });
                }
                state.waiting.keys().next().map(|(ready, _)| *ready)
            };

            match wake_at {
                Some(ready) => {
                    tokio::select! {
                        _ = &mut notified => {}
                        _ = tokio::time::sleep_until(ready) => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    /// Runs `handler` on `workers` concurrent workers until `stop` fires, then
    /// shuts the queue down and returns once every running key has finished.
    /// A handler that panics counts as [`Outcome::Retry`]; the worker goes on. The panic is logged with its key and
    /// message and counted (`workqueue_panics_total{name}`), as client-go's `HandleCrash` logs it; upstream's process
    /// would then exit, ours keeps serving every other key and retries this one with backoff.
    pub async fn run<F, Fut>(&self, workers: usize, stop: CancellationToken, handler: F)
    where
        F: Fn(K) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Outcome> + Send + 'static,
    {
        let handler = Arc::new(handler);
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..workers.max(1) {
            let queue = self.clone();
            let handler = handler.clone();
            tasks.spawn(async move {
                while let Some(item) = queue.next().await {
                    let key = item.key().clone();
                    // Boxed: an idle worker then holds a pointer, not room for the largest handler future (a
                    // provisioner's is tens of KB, and it runs 100 workers).
                    let outcome = match AssertUnwindSafe(Box::pin(handler(key.clone()))).catch_unwind().await {
                        Ok(outcome) => outcome,
                        Err(payload) => {
                            let message = crate::supervise::panic_message(payload);
                            tracing::error!(
                                queue = %queue.name(), key = ?key, panic = %message,
                                "worker panicked; the key will be retried"
                            );
                            if let Some(metrics) = &queue.inner.metrics {
                                metrics.panics.inc();
                            }
                            Outcome::Retry
                        }
                    };
                    item.finish(outcome);
                }
            });
        }
        stop.cancelled().await;
        self.shut_down();
        while tasks.join_next().await.is_some() {}
    }

    /// Queues `key` unless it is queued already; true when it was.
    fn enqueue(&self, state: &mut State<K>, key: K) -> bool {
        if state.shutting_down || state.dirty.contains(&key) {
            return false;
        }
        if let Some(metrics) = &self.inner.metrics {
            metrics.adds.inc();
        }
        let key = Arc::new(key);
        state.dirty.insert(key.clone());
        if state.processing.contains(&*key) {
            return false; // runs again when the current run ends
        }
        state.queue.push_back((key, Instant::now()));
        if let Some(metrics) = &self.inner.metrics {
            metrics.depth.inc();
        }
        true
    }

    /// Moves delayed keys whose time has come into the queue.
    fn promote_due(&self, state: &mut State<K>, now: Instant) {
        while let Some(entry) = state.waiting.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let key = entry.remove();
            state.waiting_since.remove(&key);
            self.enqueue(state, key);
        }
    }

    fn done(&self, key: &K) {
        let mut state = self.lock();
        state.processing.remove(key);
        // Re-added while it ran: queued again, as the copy `dirty` holds.
        let requeued = if state.shutting_down { None } else { state.dirty.get(key).cloned() };
        let again = requeued.is_some();
        if let Some(key) = requeued {
            state.queue.push_back((key, Instant::now()));
            if let Some(metrics) = &self.inner.metrics {
                metrics.depth.inc();
            }
        }
        let idle = state.processing.is_empty();
        drop(state);
        if again {
            self.inner.work.notify_one();
        }
        if idle {
            self.inner.idle.notify_waiters();
        }
    }
}

impl<K: QueueKey> Backlog for Inner<K> {
    fn oldest_wait(&self) -> Option<Duration> {
        let state = self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        // Keys are queued at the back, each stamped then: the front one has waited longest.
        state.queue.front().map(|(_, queued)| queued.elapsed())
    }
}

/// A key handed to a worker. Dropping it marks the key done; a key re-added in
/// the meantime is then queued again.
pub struct WorkItem<K: QueueKey> {
    queue: WorkQueue<K>,
    key: Option<Arc<K>>,
    started: Instant,
}

impl<K: QueueKey> WorkItem<K> {
    pub fn key(&self) -> &K {
        self.key.as_deref().expect("a work item holds its key until dropped")
    }

    /// Applies `outcome` (forget, back off, or delay) and marks the key done.
    pub fn finish(self, outcome: Outcome) {
        let key = self.key().clone();
        match outcome {
            Outcome::Done => self.queue.forget(&key),
            Outcome::Retry => self.queue.add_rate_limited(key),
            Outcome::RetryAfter(delay) => self.queue.add_after(key, delay),
        }
    }
}

impl<K: QueueKey> Drop for WorkItem<K> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            if let Some(metrics) = &self.queue.inner.metrics {
                metrics.observe_work(self.started.elapsed());
            }
            self.queue.done(&key);
        }
    }
}

#[cfg(test)]
mod tests;
