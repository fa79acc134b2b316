//! The one controller loop every sidecar declares: caches filled, then queues with their workers, resyncs and
//! side tasks, until the stop token fires; then the queues stop handing out keys and the loop returns once every
//! running sync has finished.
//!
//! A controller's `run` is a declaration; its workers are plain `async fn(Arc<Shared>, Key) -> Outcome`, one entry
//! per file, in the spirit of kube-rs' `Controller::run(reconcile, error_policy, ctx)`:
//!
//! ```ignore
//! Loop::new(shared.clone(), stores::watches(&shared, feeds))
//!     .queue(&shared.claims, workers, provision::sync_claim)
//!     .resync(period, |shared| shared.stores.claim_keys())
//!     .queue(&shared.volumes, workers, delete::sync_volume)
//!     .task(|shared, stop| capacity::run(shared, stop))
//!     .serve(&stop)
//!     .await;
//! ```
//!
//! Why not kube-runtime's `Controller`: it has no per-object retry backoff (kube-rs #1916), and the upstream
//! sidecars retry each object from `--retry-interval-start` to `--retry-interval-max`; [`WorkQueue`] does that.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::queue::{Outcome, QueueKey, WorkQueue};
use crate::watch::Watches;

type Running = Pin<Box<dyn Future<Output = ()> + Send>>;
type OnFilled<S> = Box<dyn FnOnce(&S) + Send>;
type Part<S> = Box<dyn FnOnce(Arc<S>, CancellationToken) -> Running + Send>;

/// No queue declared yet: [`Loop::resync`] needs one before it.
pub struct NoQueue;

/// One controller's loop, declared part by part and run by [`Loop::serve`]. `S` is the controller's shared context;
/// `K` the key type of the queue declared last, which [`Loop::resync`] refers to.
pub struct Loop<S, K = NoQueue> {
    shared: Arc<S>,
    watches: Watches,
    /// Run once the caches are filled, before any worker starts.
    on_filled: Vec<OnFilled<S>>,
    /// Workers, resyncs and tasks: run once the caches are filled, until `stop`.
    parts: Vec<Part<S>>,
    /// Run from the start until every part has returned.
    outliving: Vec<Part<S>>,
    /// How to add a key to the queue declared last.
    last_queue: Option<AddKey<K>>,
}

type AddKey<K> = Arc<dyn Fn(K) + Send + Sync>;

impl<S: Send + Sync + 'static> Loop<S> {
    /// A loop over `shared` whose work starts once every cache of `watches` holds a complete list.
    pub fn new(shared: Arc<S>, watches: Watches) -> Loop<S> {
        Loop { shared, watches, on_filled: Vec::new(), parts: Vec::new(), outliving: Vec::new(), last_queue: None }
    }
}

impl<S: Send + Sync + 'static, K> Loop<S, K> {
    /// `workers` concurrent workers take keys from `queue` and run `worker` on each; what it returns decides
    /// whether and when the key runs again ([`Outcome`]). A worker that panics counts as [`Outcome::Retry`].
    pub fn queue<Q, F, Fut>(mut self, queue: &WorkQueue<Q>, workers: usize, worker: F) -> Loop<S, Q>
    where
        Q: QueueKey,
        F: Fn(Arc<S>, Q) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Outcome> + Send + 'static,
    {
        let running = queue.clone();
        self.parts.push(Box::new(move |shared, stop| {
            Box::pin(async move {
                running.run(workers, stop, move |key| worker(shared.clone(), key)).await;
            })
        }));
        Loop {
            shared: self.shared,
            watches: self.watches,
            on_filled: self.on_filled,
            parts: self.parts,
            outliving: self.outliving,
            last_queue: Some(Arc::new({
                let queue = queue.clone();
                move |key| queue.add(key)
            })),
        }
    }

    /// Runs `f` once the caches are filled, before any worker starts (e.g. queue everything they hold, as an
    /// informer's initial adds do).
    pub fn on_filled(mut self, f: impl FnOnce(&S) + Send + 'static) -> Self {
        self.on_filled.push(Box::new(f));
        self
    }

    /// A task beside the workers, from the moment the caches are filled until `stop` fires; the loop returns only
    /// after it has.
    pub fn task<F, Fut>(mut self, task: F) -> Self
    where
        F: FnOnce(Arc<S>, CancellationToken) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.parts.push(Box::new(move |shared, stop| Box::pin(task(shared, stop))));
        self
    }

    /// A task that runs from the start, before the caches are filled, until every worker and task has returned
    /// (the token it gets fires then): a writer the draining workers still use.
    pub fn outliving<F, Fut>(mut self, task: F) -> Self
    where
        F: FnOnce(Arc<S>, CancellationToken) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.outliving.push(Box::new(move |shared, stop| Box::pin(task(shared, stop))));
        self
    }

    /// Starts the watches, waits for complete caches, then runs every part until `stop` fires; returns once the
    /// running syncs have finished. If `stop` fires before the caches are filled, no worker ever starts.
    pub async fn serve(self, stop: &CancellationToken) {
        let Loop { shared, watches, on_filled, parts, outliving, last_queue: _ } = self;
        let parts_done = CancellationToken::new();
        let outliving = join_all(outliving.into_iter().map(|task| task(shared.clone(), parts_done.clone())));
        let work = async {
            watches
                .serve(stop, || async {
                    for f in on_filled {
                        f(&shared);
                    }
                    join_all(parts.into_iter().map(|part| part(shared.clone(), stop.clone()))).await;
                })
                .await;
            parts_done.cancel();
        };
        tokio::join!(outliving, work);
    }
}

impl<S: Send + Sync + 'static, K: QueueKey> Loop<S, K> {
    /// Upstream's informer resync for the queue declared last: every `period` (zero: never) each key `keys` lists
    /// is queued again. This is what retries a key the watch missed or whose backoff gave up.
    pub fn resync(mut self, period: Duration, keys: impl Fn(&S) -> Vec<K> + Send + 'static) -> Self {
        let add = self.last_queue.clone().expect("a Loop<S, K> with K a queue key has a queue");
        if period.is_zero() {
            return self;
        }
        self.parts.push(Box::new(move |shared, stop| {
            Box::pin(async move {
                let mut ticker = tokio::time::interval_at(Instant::now() + period, period);
                loop {
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        _ = ticker.tick() => keys(&shared).into_iter().for_each(|key| add(key)),
                    }
                }
            })
        }));
        self
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::queue::RetryPolicy;

    struct Shared {
        queue: WorkQueue<u32>,
        seen: Mutex<Vec<u32>>,
    }

    fn shared() -> Arc<Shared> {
        let policy = RetryPolicy { start: Duration::from_millis(1), max: Duration::from_millis(5) };
        Arc::new(Shared { queue: WorkQueue::new("test", policy), seen: Mutex::default() })
    }

    async fn record(shared: Arc<Shared>, key: u32) -> Outcome {
        shared.seen.lock().unwrap().push(key);
        Outcome::Done
    }

    async fn until(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !done() {
            assert!(Instant::now() < deadline, "timed out waiting until {what}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[tokio::test]
    async fn keys_queued_once_the_caches_fill_reach_the_worker() {
        let shared = shared();
        let stop = CancellationToken::new();
        let running = tokio::spawn({
            let (shared, stop) = (shared.clone(), stop.clone());
            async move {
                Loop::new(shared.clone(), Watches::default())
                    .on_filled(|s: &Shared| [1, 2, 3].into_iter().for_each(|k| s.queue.add(k)))
                    .queue(&shared.queue, 2, record)
                    .serve(&stop)
                    .await
            }
        });
        until("three keys are seen", || shared.seen.lock().unwrap().len() == 3).await;
        stop.cancel();
        running.await.unwrap();
        let mut seen = shared.seen.lock().unwrap().clone();
        seen.sort();
        assert_eq!(seen, vec![1, 2, 3]);
        assert!(shared.queue.is_shutting_down(), "the queue stops handing out keys once stop fires");
    }

    /// Runs a loop with a resync of `period` for 25 s of paused time; returns each run's key and second.
    async fn resync_runs(period: Duration) -> Vec<(u32, u64)> {
        let shared = shared();
        let stop = CancellationToken::new();
        let started = Instant::now();
        let runs = Arc::new(Mutex::new(Vec::new()));
        let running = tokio::spawn({
            let (shared, stop, seen) = (shared.clone(), stop.clone(), runs.clone());
            async move {
                let worker = move |_: Arc<Shared>, key: u32| {
                    let seen = seen.clone();
                    async move {
                        seen.lock().unwrap().push((key, (Instant::now() - started).as_secs()));
                        Outcome::Done
                    }
                };
                Loop::new(shared.clone(), Watches::default())
                    .queue(&shared.queue, 1, worker)
                    .resync(period, |_| vec![1, 2])
                    .serve(&stop)
                    .await
            }
        });
        tokio::time::sleep(Duration::from_secs(25)).await;
        stop.cancel();
        running.await.unwrap();
        runs.lock().unwrap().clone()
    }

    #[tokio::test(start_paused = true)]
    async fn a_resync_queues_every_listed_key_again_each_period() {
        assert_eq!(resync_runs(Duration::from_secs(10)).await, vec![(1, 10), (2, 10), (1, 20), (2, 20)]);
        assert_eq!(resync_runs(Duration::ZERO).await, vec![], "a zero period never resyncs");
    }

    #[tokio::test]
    async fn an_outliving_task_stops_after_the_workers_and_tasks() {
        let shared = shared();
        let stop = CancellationToken::new();
        let order = Arc::new(Mutex::new(Vec::new()));
        let running = tokio::spawn({
            let (shared, stop, order) = (shared.clone(), stop.clone(), order.clone());
            let (task_order, writer_order) = (order.clone(), order.clone());
            async move {
                Loop::new(shared.clone(), Watches::default())
                    .queue(&shared.queue, 1, record)
                    .task(move |_, stop| async move {
                        stop.cancelled().await;
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        task_order.lock().unwrap().push("task");
                    })
                    .outliving(move |_, done| async move {
                        done.cancelled().await;
                        writer_order.lock().unwrap().push("writer");
                    })
                    .serve(&stop)
                    .await;
                order.lock().unwrap().push("returned");
            }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        stop.cancel();
        running.await.unwrap();
        assert_eq!(*order.lock().unwrap(), vec!["task", "writer", "returned"]);
    }

    #[tokio::test]
    async fn stopped_before_the_caches_fill_no_part_runs() {
        use k8s_openapi::api::core::v1::ConfigMap;
        let shared = shared();
        let (_store, feed) = crate::watch::cache::<ConfigMap>();
        // A client whose every request fails: the cache never fills.
        let client = kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap())).unwrap();
        let mut watches = Watches::default();
        watches.watch(feed, kube::Api::all(client), |_| {});
        let stop = CancellationToken::new();
        stop.cancel();
        let started = Arc::new(Mutex::new(false));
        let flag = started.clone();
        Loop::new(shared.clone(), watches)
            .on_filled(|s: &Shared| s.queue.add(1))
            .queue(&shared.queue, 1, record)
            .task(move |_, _| async move { *flag.lock().unwrap() = true })
            .serve(&stop)
            .await;
        assert!(!*started.lock().unwrap());
        assert!(shared.seen.lock().unwrap().is_empty());
    }
}
