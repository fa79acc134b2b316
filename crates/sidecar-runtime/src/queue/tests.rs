//! Queue behaviour under tokio's paused clock: delays are exact and a test
//! that waits for nothing finishes at once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::registry::Registry;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::*;

fn queue() -> WorkQueue<&'static str> {
    WorkQueue::new("test", RetryPolicy::default())
}

/// The next key, or `None` if nothing arrives within `wait` (of paused time).
async fn next_within(queue: &WorkQueue<&'static str>, wait: Duration) -> Option<WorkItem<&'static str>> {
    tokio::time::timeout(wait, queue.next()).await.ok().flatten()
}

#[tokio::test(start_paused = true)]
async fn a_key_added_twice_runs_once() {
    let queue = queue();
    queue.add("a");
    queue.add("b");
    queue.add("a");
    assert_eq!(queue.len(), 2);
    let first = queue.next().await.unwrap();
    let second = queue.next().await.unwrap();
    assert_eq!((*first.key(), *second.key()), ("a", "b"));
    assert!(next_within(&queue, Duration::from_secs(60)).await.is_none());
}

#[tokio::test(start_paused = true)]
async fn a_key_re_added_while_running_waits_for_the_run_to_end() {
    let queue = queue();
    queue.add("a");
    let running = queue.next().await.unwrap();
    queue.add("a");
    queue.add("a");
    assert!(next_within(&queue, Duration::from_secs(60)).await.is_none(), "never handed out twice at once");
    drop(running);
    let again = next_within(&queue, Duration::from_secs(1)).await.expect("runs again after the first run");
    assert_eq!(*again.key(), "a");
    drop(again);
    assert!(next_within(&queue, Duration::from_secs(60)).await.is_none(), "and only once more");
}

#[tokio::test(start_paused = true)]
async fn failures_back_off_exponentially_and_forget_resets() {
    let queue = queue();
    for expected_secs in [1, 2, 4, 8] {
        let start = Instant::now();
        queue.add_rate_limited("a");
        let item = queue.next().await.unwrap();
        assert_eq!(start.elapsed(), Duration::from_secs(expected_secs));
        drop(item);
    }
    assert_eq!(queue.failures(&"a"), 4);
    queue.forget(&"a");
    assert_eq!(queue.failures(&"a"), 0);
    let start = Instant::now();
    queue.add_rate_limited("a");
    drop(queue.next().await.unwrap());
    assert_eq!(start.elapsed(), Duration::from_secs(1), "back to the start after forget");
}

#[tokio::test(start_paused = true)]
async fn backoff_is_per_key() {
    let queue = queue();
    for _ in 0..3 {
        queue.add_rate_limited("a"); // 1 s, 2 s, 4 s: folded into the earliest
    }
    drop(queue.next().await.unwrap());
    let start = Instant::now();
    queue.add_rate_limited("a");
    queue.add_rate_limited("b");
    let item = queue.next().await.unwrap();
    assert_eq!((*item.key(), start.elapsed()), ("b", Duration::from_secs(1)), "b starts its own schedule");
    let item = queue.next().await.unwrap();
    assert_eq!((*item.key(), start.elapsed()), ("a", Duration::from_secs(8)), "a continues its own");
    assert_eq!((queue.failures(&"a"), queue.failures(&"b")), (4, 1));
}

#[tokio::test(start_paused = true)]
async fn add_after_keeps_the_earliest_time() {
    let queue = queue();
    let start = Instant::now();
    queue.add_after("a", Duration::from_secs(10));
    queue.add_after("a", Duration::from_secs(3));
    queue.add_after("a", Duration::from_secs(20));
    let item = queue.next().await.unwrap();
    assert_eq!(start.elapsed(), Duration::from_secs(3));
    drop(item);
    assert!(next_within(&queue, Duration::from_secs(60)).await.is_none(), "the later ones were folded in");
}

#[tokio::test(start_paused = true)]
async fn a_sleeping_worker_sees_an_earlier_delayed_key() {
    let queue = queue();
    queue.add_after("late", Duration::from_secs(100));
    let worker = {
        let queue = queue.clone();
        tokio::spawn(async move {
            let item = queue.next().await.unwrap();
            (*item.key(), Instant::now())
        })
    };
    tokio::task::yield_now().await;
    let start = Instant::now();
    queue.add_after("soon", Duration::from_secs(2));
    let (key, at) = worker.await.unwrap();
    assert_eq!((key, at - start), ("soon", Duration::from_secs(2)));
}

#[tokio::test(start_paused = true)]
async fn shut_down_stops_handing_out_work_and_lets_running_work_finish() {
    let queue = queue();
    queue.add("a");
    queue.add("b");
    let running = queue.next().await.unwrap();
    let waiter = {
        let queue = queue.clone();
        tokio::spawn(async move { queue.next().await.map(|item| *item.key()) })
    };
    queue.shut_down();
    assert_eq!(waiter.await.unwrap(), None, "no new work after shutdown, though b is queued");
    assert!(queue.next().await.is_none());
    queue.add("c");
    assert_eq!(queue.in_flight(), 1);

    let idle = {
        let queue = queue.clone();
        tokio::spawn(async move { queue.wait_idle().await })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!idle.is_finished(), "a is still running");
    drop(running);
    idle.await.unwrap();
    assert_eq!(queue.in_flight(), 0);
}

#[tokio::test(start_paused = true)]
async fn workers_never_run_a_key_concurrently_with_itself() {
    let queue: WorkQueue<u32> = WorkQueue::new("test", RetryPolicy::default());
    let running: Arc<Mutex<HashMap<u32, usize>>> = Arc::default();
    let runs = Arc::new(AtomicUsize::new(0));
    let max_parallel = Arc::new(AtomicUsize::new(0));
    let stop = CancellationToken::new();

    let run = {
        let (queue, running, runs, max_parallel) = (queue.clone(), running.clone(), runs.clone(), max_parallel.clone());
        let stop = stop.clone();
        tokio::spawn(async move {
            queue
                .run(8, stop, move |key| {
                    let (running, runs, max_parallel) = (running.clone(), runs.clone(), max_parallel.clone());
                    async move {
                        {
                            let mut running = running.lock().unwrap();
                            let count = running.entry(key).or_default();
                            *count += 1;
                            // Recorded, not asserted: run() turns a handler panic into a retry.
                            if *count > 1 {
                                max_parallel.store(usize::MAX, Ordering::SeqCst);
                            }
                            let total: usize = running.values().sum();
                            max_parallel.fetch_max(total, Ordering::SeqCst);
                        }
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        *running.lock().unwrap().get_mut(&key).unwrap() -= 1;
                        runs.fetch_add(1, Ordering::SeqCst);
                        Outcome::Done
                    }
                })
                .await
        })
    };

    // Keep re-adding three keys faster than they run.
    for _ in 0..50 {
        for key in 0..3 {
            queue.add(key);
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.cancel();
    run.await.unwrap();

    let runs = runs.load(Ordering::SeqCst);
    assert!(runs >= 3 * 10, "keys ran again after re-adds ({runs} runs)");
    assert!(runs <= 3 * 50, "re-adds while queued were folded ({runs} runs)");
    let max_parallel = max_parallel.load(Ordering::SeqCst);
    assert_ne!(max_parallel, usize::MAX, "a key ran twice at once");
    assert!(max_parallel > 1, "different keys do run in parallel");
}

#[tokio::test(start_paused = true)]
async fn run_applies_outcomes() {
    let queue = queue();
    let attempts: Arc<Mutex<Vec<(&'static str, Instant)>>> = Arc::default();
    let stop = CancellationToken::new();
    let start = Instant::now();
    let run = {
        let (queue, attempts, stop) = (queue.clone(), attempts.clone(), stop.clone());
        tokio::spawn(async move {
            queue
                .run(2, stop, move |key| {
                    let attempts = attempts.clone();
                    async move {
                        let n = {
                            let mut attempts = attempts.lock().unwrap();
                            attempts.push((key, Instant::now()));
                            attempts.iter().filter(|(k, _)| *k == key).count()
                        };
                        match (key, n) {
                            ("flaky", 1..=2) => Outcome::Retry,
                            ("slow", 1) => Outcome::RetryAfter(Duration::from_secs(30)),
                            ("panics", 1) => panic!("handler bug"),
                            _ => Outcome::Done,
                        }
                    }
                })
                .await
        })
    };
    queue.add("flaky");
    queue.add("slow");
    queue.add("panics");
    tokio::time::sleep(Duration::from_secs(60)).await;
    stop.cancel();
    run.await.unwrap();

    let attempts = attempts.lock().unwrap();
    let times = |key: &str| -> Vec<Duration> {
        attempts.iter().filter(|(k, _)| *k == key).map(|(_, at)| *at - start).collect()
    };
    let secs = |list: &[u64]| list.iter().map(|s| Duration::from_secs(*s)).collect::<Vec<_>>();
    assert_eq!(times("flaky"), secs(&[0, 1, 3]), "retried after 1 s, then 2 s, then done");
    assert_eq!(times("slow"), secs(&[0, 30]));
    assert_eq!(times("panics"), secs(&[0, 1]), "a panic is retried like a failure");
    assert_eq!(queue.failures(&"flaky"), 0, "success forgot the failures");
}

#[tokio::test(start_paused = true)]
async fn metrics_follow_the_queue() {
    let mut registry = Registry::default();
    let metrics = QueueMetrics::register(&mut registry);
    let queue: WorkQueue<&'static str> = WorkQueue::with_metrics("claims", RetryPolicy::default(), &metrics);
    queue.add("a");
    queue.add("a");
    queue.add("b");
    let item = queue.next().await.unwrap();
    item.finish(Outcome::Retry);

    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    assert!(text.contains("workqueue_depth{name=\"claims\"} 1"), "{text}");
    assert!(text.contains("workqueue_adds_total{name=\"claims\"} 2"), "{text}");
    assert!(text.contains("workqueue_retries_total{name=\"claims\"} 1"), "{text}");
    assert!(text.contains("workqueue_work_duration_seconds_count{name=\"claims\"} 1"), "{text}");
    assert!(text.contains("workqueue_queue_duration_seconds_count{name=\"claims\"} 1"), "{text}");
}

#[tokio::test(start_paused = true)]
async fn a_panicking_run_is_counted_and_the_others_go_on() {
    let mut registry = Registry::default();
    let metrics = QueueMetrics::register(&mut registry);
    let queue: WorkQueue<&'static str> = WorkQueue::with_metrics("claims", RetryPolicy::default(), &metrics);
    let done: Arc<Mutex<Vec<&'static str>>> = Arc::default();
    let stop = CancellationToken::new();
    let run = {
        let (queue, done, stop) = (queue.clone(), done.clone(), stop.clone());
        tokio::spawn(async move {
            queue
                .run(1, stop, move |key| {
                    let done = done.clone();
                    async move {
                        if key == "bad" {
                            panic!("bug on {key}");
                        }
                        done.lock().unwrap().push(key);
                        Outcome::Done
                    }
                })
                .await
        })
    };
    queue.add("bad");
    queue.add("good");
    // The bad key runs at 0 s, 1 s and 3 s (backoff 1 s, 2 s) within 4 s; the good one once.
    tokio::time::sleep(Duration::from_secs(4)).await;
    stop.cancel();
    run.await.unwrap();
    assert_eq!(*done.lock().unwrap(), ["good"], "one key's panic stops no other key");
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    assert!(text.contains("workqueue_panics_total{name=\"claims\"} 3"), "{text}");
    assert!(text.contains("workqueue_retries_total{name=\"claims\"} 3"), "{text}");
}

#[tokio::test(start_paused = true)]
async fn the_oldest_waiting_key_shows_its_age_per_queue() {
    let mut registry = Registry::default();
    let metrics = QueueMetrics::register(&mut registry);
    let attach: WorkQueue<&'static str> = WorkQueue::with_metrics("attach", RetryPolicy::default(), &metrics);
    let detach: WorkQueue<&'static str> = WorkQueue::with_metrics("detach", RetryPolicy::default(), &metrics);
    let age_of = |registry: &Registry, name: &str| {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
        let prefix = format!("workqueue_oldest_item_age_seconds{{name=\"{name}\"}} ");
        let line = text.lines().find(|l| l.starts_with(&prefix)).unwrap_or_else(|| panic!("{prefix}: {text}"));
        line[prefix.len()..].parse::<f64>().unwrap()
    };
    detach.add("old");
    tokio::time::advance(Duration::from_secs(30)).await;
    detach.add("new");
    attach.add("a");
    tokio::time::advance(Duration::from_secs(5)).await;
    assert_eq!(age_of(&registry, "detach"), 35.0, "the head of the queue, not the newest key");
    assert_eq!(age_of(&registry, "attach"), 5.0, "each queue its own age");
    let taken = detach.next().await.unwrap();
    assert_eq!(*taken.key(), "old");
    assert_eq!(age_of(&registry, "detach"), 5.0, "a key a worker holds no longer waits");
    drop(taken);
    let _ = detach.next().await.unwrap();
    assert_eq!(age_of(&registry, "detach"), 0.0, "an empty queue reads 0");
    drop(attach);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    assert!(!text.contains("oldest_item_age_seconds{name=\"attach\"}"), "a dropped queue is no longer reported");
}

#[test]
fn the_more_urgent_outcome_wins() {
    let s = Duration::from_secs;
    // (a, b, combined)
    let table = [
        (Outcome::Done, Outcome::Done, Outcome::Done),
        (Outcome::Done, Outcome::Retry, Outcome::Retry),
        (Outcome::RetryAfter(s(5)), Outcome::Retry, Outcome::Retry),
        (Outcome::RetryAfter(s(5)), Outcome::RetryAfter(s(2)), Outcome::RetryAfter(s(2))),
        (Outcome::Done, Outcome::RetryAfter(s(2)), Outcome::RetryAfter(s(2))),
    ];
    for (a, b, want) in table {
        assert_eq!(a.most_urgent(b), want, "{a:?} + {b:?}");
        assert_eq!(b.most_urgent(a), want, "{b:?} + {a:?}");
    }
}
