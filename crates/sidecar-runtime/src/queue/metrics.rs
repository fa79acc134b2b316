//! client-go's workqueue metrics (`workqueue_depth`, `workqueue_adds_total`,
//! `workqueue_retries_total`, `workqueue_queue_duration_seconds`,
//! `workqueue_work_duration_seconds`), labelled with the queue's `name`, so
//! existing dashboards keep working.

use std::time::Duration;

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
    queue_duration: Family<Labels, Histogram, fn() -> Histogram>,
    work_duration: Family<Labels, Histogram, fn() -> Histogram>,
}

impl QueueMetrics {
    pub fn register(registry: &mut Registry) -> QueueMetrics {
        let metrics = QueueMetrics {
            depth: Family::default(),
            adds: Family::default(),
            retries: Family::default(),
            queue_duration: Family::new_with_constructor(duration_histogram),
            work_duration: Family::new_with_constructor(duration_histogram),
        };
        registry.register("workqueue_depth", "Current depth of workqueue", metrics.depth.clone());
        registry.register("workqueue_adds", "Total number of adds handled by workqueue", metrics.adds.clone());
        registry.register("workqueue_retries", "Total number of retries handled by workqueue", metrics.retries.clone());
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
        metrics
    }

    pub(crate) fn for_queue(&self, name: &str) -> BoundQueueMetrics {
        let labels = vec![("name".to_string(), name.to_string())];
        BoundQueueMetrics {
            depth: self.depth.get_or_create(&labels).clone(),
            adds: self.adds.get_or_create(&labels).clone(),
            retries: self.retries.get_or_create(&labels).clone(),
            queue_duration: self.queue_duration.get_or_create(&labels).clone(),
            work_duration: self.work_duration.get_or_create(&labels).clone(),
        }
    }
}

/// One queue's series.
#[derive(Clone)]
pub(crate) struct BoundQueueMetrics {
    pub depth: Gauge,
    pub adds: Counter,
    pub retries: Counter,
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
