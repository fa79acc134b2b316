//! client-go's workqueue metrics (`workqueue_depth`, `workqueue_adds_total`,
//! `workqueue_retries_total`, `workqueue_queue_duration_seconds`,
//! `workqueue_work_duration_seconds`), labelled with the queue's `name`, so
//! existing dashboards keep working; and one client-go lacks,
//! `workqueue_oldest_item_age_seconds`: how long the key at the head of each
//! queue has waited for a worker, read at each scrape, so a backlog shows as
//! its age and not only its depth; and `workqueue_panics_total`: runs of a
//! key whose handler panicked (each is retried with backoff).

use std::fmt;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::gauge::ConstGauge;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

type Labels = Vec<(String, String)>;

fn duration_histogram() -> Histogram {
    // client-go: ExponentialBuckets(10e-9, 10, 10), 10 ns to 10 s.
    Histogram::new(exponential_buckets(1e-8, 10.0, 10))
}

/// The metric families, shared by every queue of a process. Cheap to clone.
#[derive(Clone)]
pub struct QueueMetrics {
    depth: Family<Labels, Gauge>,
    adds: Family<Labels, Counter>,
    retries: Family<Labels, Counter>,
    panics: Family<Labels, Counter>,
    queue_duration: Family<Labels, Histogram, fn() -> Histogram>,
    work_duration: Family<Labels, Histogram, fn() -> Histogram>,
    /// The queues `workqueue_oldest_item_age_seconds` reports.
    backlogs: Backlogs,
}

type Backlogs = Arc<Mutex<Vec<(String, Weak<dyn Backlog>)>>>;

impl QueueMetrics {
    pub fn register(registry: &mut Registry) -> QueueMetrics {
        let metrics = QueueMetrics {
            depth: Family::default(),
            adds: Family::default(),
            retries: Family::default(),
            panics: Family::default(),
            queue_duration: Family::new_with_constructor(duration_histogram),
            work_duration: Family::new_with_constructor(duration_histogram),
            backlogs: Backlogs::default(),
        };
        registry.register("workqueue_depth", "Current depth of workqueue", metrics.depth.clone());
        registry.register("workqueue_adds", "Total number of adds handled by workqueue", metrics.adds.clone());
        registry.register("workqueue_retries", "Total number of retries handled by workqueue", metrics.retries.clone());
        registry.register(
            "workqueue_panics",
            "Total number of runs of a key whose handler panicked (the key is retried)",
            metrics.panics.clone(),
        );
        registry.register(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested.",
            metrics.queue_duration.clone(),
        );
        registry.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            metrics.work_duration.clone(),
        );
        registry.register_collector(Box::new(OldestItemAge {
            name: "workqueue_oldest_item_age_seconds",
            help: "How long in seconds the oldest item in workqueue has waited for a worker (0: none waits).",
            queues: metrics.backlogs.clone(),
        }));
        metrics
    }

    /// Reports the age of `backlog`'s oldest waiting key under `name` for as long as the queue lives.
    pub(crate) fn watch_backlog(&self, name: &str, backlog: Weak<dyn Backlog>) {
        self.backlogs.lock().unwrap_or_else(|p| p.into_inner()).push((name.to_string(), backlog));
    }

    pub(crate) fn for_queue(&self, name: &str) -> BoundQueueMetrics {
        let labels = vec![("name".to_string(), name.to_string())];
        BoundQueueMetrics {
            depth: self.depth.get_or_create(&labels).clone(),
            adds: self.adds.get_or_create(&labels).clone(),
            retries: self.retries.get_or_create(&labels).clone(),
            panics: self.panics.get_or_create(&labels).clone(),
            queue_duration: self.queue_duration.get_or_create(&labels).clone(),
            work_duration: self.work_duration.get_or_create(&labels).clone(),
        }
    }
}

/// A queue as the oldest-item gauge sees it.
pub(crate) trait Backlog: Send + Sync {
    /// How long the key a worker would get next has waited; `None` when no key waits.
    fn oldest_wait(&self) -> Option<Duration>;
}

/// `workqueue_oldest_item_age_seconds{name}`: 0 for an empty queue.
struct OldestItemAge {
    name: &'static str,
    help: &'static str,
    queues: Backlogs,
}

impl fmt::Debug for OldestItemAge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

impl Collector for OldestItemAge {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let ages: Vec<(String, f64)> = {
            let mut queues = self.queues.lock().unwrap_or_else(|p| p.into_inner());
            queues.retain(|(_, queue)| queue.strong_count() > 0);
            let age = |queue: &Weak<dyn Backlog>| queue.upgrade().and_then(|q| q.oldest_wait());
            queues.iter().map(|(name, queue)| (name.clone(), age(queue).unwrap_or_default().as_secs_f64())).collect()
        };
        let gauge = prometheus_client::metrics::MetricType::Gauge;
        let mut family = encoder.encode_descriptor(self.name, self.help, None, gauge)?;
        for (name, seconds) in ages {
            let labels = vec![("name".to_string(), name)];
            ConstGauge::new(seconds).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

/// One queue's series.
#[derive(Clone)]
pub(crate) struct BoundQueueMetrics {
    pub depth: Gauge,
    pub adds: Counter,
    pub retries: Counter,
    pub panics: Counter,
    pub queue_duration: Histogram,
    pub work_duration: Histogram,
}

impl BoundQueueMetrics {
    pub fn observe_queued(&self, waited: Duration) {
        self.queue_duration.observe(waited.as_secs_f64());
    }

    pub fn observe_work(&self, took: Duration) {
        self.work_duration.observe(took.as_secs_f64());
    }
}
