//! The upstream library's provisioning and deletion metrics, same names and labels
//! (sig-storage-lib-external-provisioner controller/metrics/metrics.go).

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Prometheus' Go client default buckets, which the library's histograms use.
const DEFAULT_BUCKETS: [f64; 11] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClaimLabels {
    class: String,
    source: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VolumeLabels {
    class: String,
}

fn histogram() -> Histogram {
    Histogram::new(DEFAULT_BUCKETS)
}

/// `controller_persistentvolumeclaim_provision_*` and `controller_persistentvolume_delete_*`.
#[derive(Clone)]
pub struct ProvisioningMetrics {
    provisioned: Family<ClaimLabels, Counter>,
    provision_failed: Family<ClaimLabels, Counter>,
    provision_duration: Family<ClaimLabels, Histogram, fn() -> Histogram>,
    deleted: Family<VolumeLabels, Counter>,
    delete_failed: Family<VolumeLabels, Counter>,
    delete_duration: Family<VolumeLabels, Histogram, fn() -> Histogram>,
}

impl Default for ProvisioningMetrics {
    fn default() -> Self {
        ProvisioningMetrics {
            provisioned: Family::default(),
            provision_failed: Family::default(),
            provision_duration: Family::new_with_constructor(histogram),
            deleted: Family::default(),
            delete_failed: Family::default(),
            delete_duration: Family::new_with_constructor(histogram),
        }
    }
}

impl ProvisioningMetrics {
    /// Registers the six metrics (counters get their `_total` suffix from the encoder).
    pub fn register(registry: &mut Registry) -> ProvisioningMetrics {
        let m = ProvisioningMetrics::default();
        registry.register(
            "controller_persistentvolumeclaim_provision",
            "Volumes provisioned, by StorageClass and claim data source kind.",
            m.provisioned.clone(),
        );
        registry.register(
            "controller_persistentvolumeclaim_provision_failed",
            "Failed provisioning attempts, by StorageClass and claim data source kind.",
            m.provision_failed.clone(),
        );
        registry.register(
            "controller_persistentvolumeclaim_provision_duration_seconds",
            "Seconds taken by successful provisioning attempts, by StorageClass and claim data source kind.",
            m.provision_duration.clone(),
        );
        registry.register("controller_persistentvolume_delete", "Volumes deleted, by StorageClass.", m.deleted.clone());
        registry.register(
            "controller_persistentvolume_delete_failed",
            "Failed deletion attempts, by StorageClass.",
            m.delete_failed.clone(),
        );
        registry.register(
            "controller_persistentvolume_delete_duration_seconds",
            "Seconds taken by successful deletions, by StorageClass.",
            m.delete_duration.clone(),
        );
        m
    }

    pub fn provisioned(&self, class: &str, source: &str, took: Duration) {
        let labels = ClaimLabels { class: class.to_string(), source: source.to_string() };
        self.provision_duration.get_or_create(&labels).observe(took.as_secs_f64());
        self.provisioned.get_or_create(&labels).inc();
    }

    pub fn provision_failed(&self, class: &str, source: &str) {
        let labels = ClaimLabels { class: class.to_string(), source: source.to_string() };
        self.provision_failed.get_or_create(&labels).inc();
    }

    pub fn deleted(&self, class: &str, took: Duration) {
        let labels = VolumeLabels { class: class.to_string() };
        self.delete_duration.get_or_create(&labels).observe(took.as_secs_f64());
        self.deleted.get_or_create(&labels).inc();
    }

    pub fn delete_failed(&self, class: &str) {
        self.delete_failed.get_or_create(&VolumeLabels { class: class.to_string() }).inc();
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;

    use super::*;

    #[test]
    fn names_and_labels_match_the_library() {
        let mut registry = Registry::default();
        let metrics = ProvisioningMetrics::register(&mut registry);
        metrics.provisioned("fast", "", Duration::from_millis(300));
        metrics.provision_failed("fast", "PersistentVolumeClaim");
        metrics.deleted("fast", Duration::from_millis(20));
        metrics.delete_failed("slow");
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        for line in [
            "controller_persistentvolumeclaim_provision_total{class=\"fast\",source=\"\"} 1",
            "controller_persistentvolumeclaim_provision_failed_total{class=\"fast\",source=\"PersistentVolumeClaim\"} 1",
            "controller_persistentvolumeclaim_provision_duration_seconds_count{class=\"fast\",source=\"\"} 1",
            "controller_persistentvolume_delete_total{class=\"fast\"} 1",
            "controller_persistentvolume_delete_failed_total{class=\"slow\"} 1",
            "controller_persistentvolume_delete_duration_seconds_count{class=\"fast\"} 1",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
    }
}
