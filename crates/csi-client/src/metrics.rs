//! `csi_sidecar_operations_seconds`, the histogram every upstream sidecar
//! exposes for its CSI calls: same name, help text, labels, label order and
//! buckets as csi-lib-utils, so existing dashboards and alerts keep working.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use prometheus_client::encoding::{EncodeLabel, EncodeLabelSet, LabelSetEncoder};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Upstream's bucket boundaries, in seconds.
pub const BUCKETS: [f64; 13] = [0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 25.0, 50.0, 120.0, 300.0, 600.0];

/// Recorded as the driver name until GetPluginInfo has answered.
pub const UNKNOWN_DRIVER: &str = "unknown-driver";

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct OperationLabels {
    driver_name: String,
    method_name: String,
    grpc_status_code: String,
    /// `"true"`/`"false"` for sidecars of drivers that take over an in-tree plugin; no label otherwise.
    migrated: Option<&'static str>,
}

// Written by hand rather than derived: the `migrated` label must be absent, not empty, for other drivers.
impl EncodeLabelSet for OperationLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        ("driver_name", self.driver_name.as_str()).encode(encoder.encode_label())?;
        ("method_name", self.method_name.as_str()).encode(encoder.encode_label())?;
        ("grpc_status_code", self.grpc_status_code.as_str()).encode(encoder.encode_label())?;
        if let Some(migrated) = self.migrated {
            ("migrated", migrated).encode(encoder.encode_label())?;
        }
        Ok(())
    }
}

/// Durations of CSI calls by driver, full gRPC method path and Go-style code.
#[derive(Clone)]
pub struct OperationMetrics {
    family: Family<OperationLabels, Histogram>,
    driver_name: Arc<RwLock<String>>,
    /// Whether every observation carries the `migrated` label (as upstream's `WithMigration`).
    migration_label: Arc<std::sync::atomic::AtomicBool>,
}

impl std::fmt::Debug for OperationMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OperationMetrics").field("driver_name", &self.driver_name()).finish()
    }
}

impl Default for OperationMetrics {
    fn default() -> Self {
        OperationMetrics {
            family: Family::new_with_constructor(|| Histogram::new(BUCKETS)),
            driver_name: Arc::new(RwLock::new(UNKNOWN_DRIVER.to_string())),
            migration_label: Arc::default(),
        }
    }
}

impl OperationMetrics {
    /// Creates the histogram and registers it as `csi_sidecar_operations_seconds`.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = OperationMetrics::default();
        registry.register(
            "csi_sidecar_operations_seconds",
            "[ALPHA] Container Storage Interface operation duration with gRPC error code status total",
            metrics.family.clone(),
        );
        metrics
    }

    /// Sets the `driver_name` label for later observations.
    pub fn set_driver_name(&self, name: &str) {
        *self.driver_name.write().unwrap_or_else(|e| e.into_inner()) = name.to_string();
    }

    pub fn driver_name(&self) -> String {
        self.driver_name.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// From now on every observation carries `migrated="true"` or `migrated="false"`: the driver takes over an
    /// in-tree plugin (CSI migration).
    pub fn enable_migration_label(&self) {
        self.migration_label.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Records one call: `method` is the full gRPC path, `code` the Go-style name, `migrated` whether the call
    /// serves an in-tree volume (shown only with [`Self::enable_migration_label`]).
    pub fn observe(&self, method: &str, code: &str, elapsed: Duration, migrated: bool) {
        let labelled = self.migration_label.load(std::sync::atomic::Ordering::Relaxed);
        let labels = OperationLabels {
            driver_name: self.driver_name(),
            method_name: method.to_string(),
            grpc_status_code: code.to_string(),
            migrated: labelled.then_some(if migrated { "true" } else { "false" }),
        };
        self.family.get_or_create(&labels).observe(elapsed.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;

    fn render(registry: &Registry) -> String {
        let mut out = String::new();
        encode(&mut out, registry).unwrap();
        out
    }

    #[test]
    fn exposes_upstream_name_labels_and_buckets() {
        let mut registry = Registry::default();
        let metrics = OperationMetrics::register(&mut registry);
        metrics.observe("/csi.v1.Identity/GetPluginInfo", "OK", Duration::from_millis(30), false);
        metrics.set_driver_name("hostpath.csi.k8s.io");
        metrics.observe("/csi.v1.Controller/CreateVolume", "DeadlineExceeded", Duration::from_secs(3), true);

        let text = render(&registry);
        assert!(text.contains("# HELP csi_sidecar_operations_seconds [ALPHA] Container Storage Interface operation duration with gRPC error code status total"), "{text}");
        assert!(text.contains("# TYPE csi_sidecar_operations_seconds histogram"), "{text}");
        assert!(text.contains(r#"csi_sidecar_operations_seconds_count{driver_name="unknown-driver",method_name="/csi.v1.Identity/GetPluginInfo",grpc_status_code="OK"} 1"#), "{text}");
        assert!(text.contains(r#"csi_sidecar_operations_seconds_bucket{le="5.0",driver_name="hostpath.csi.k8s.io",method_name="/csi.v1.Controller/CreateVolume",grpc_status_code="DeadlineExceeded"} 1"#), "{text}");
        assert!(text.contains(r#"csi_sidecar_operations_seconds_bucket{le="2.5",driver_name="hostpath.csi.k8s.io",method_name="/csi.v1.Controller/CreateVolume",grpc_status_code="DeadlineExceeded"} 0"#), "{text}");
        for bound in [
            "0.1", "0.25", "0.5", "1.0", "2.5", "5.0", "10.0", "15.0", "25.0", "50.0", "120.0", "300.0", "600.0",
            "+Inf",
        ] {
            assert!(
                text.contains(&format!("le=\"{bound}\",driver_name=\"hostpath.csi.k8s.io\"")),
                "bucket {bound} missing: {text}"
            );
        }
        assert!(!text.contains("migrated"), "no migrated label unless asked for: {text}");
    }

    #[test]
    fn migration_label_follows_each_call() {
        let mut registry = Registry::default();
        let metrics = OperationMetrics::register(&mut registry);
        metrics.set_driver_name("ebs.csi.aws.com");
        metrics.enable_migration_label();
        metrics.observe("/csi.v1.Controller/CreateVolume", "OK", Duration::from_millis(30), true);
        metrics.observe("/csi.v1.Controller/DeleteVolume", "OK", Duration::from_millis(30), false);
        let text = render(&registry);
        assert!(text.contains(r#"csi_sidecar_operations_seconds_count{driver_name="ebs.csi.aws.com",method_name="/csi.v1.Controller/CreateVolume",grpc_status_code="OK",migrated="true"} 1"#), "{text}");
        assert!(text.contains(r#"csi_sidecar_operations_seconds_count{driver_name="ebs.csi.aws.com",method_name="/csi.v1.Controller/DeleteVolume",grpc_status_code="OK",migrated="false"} 1"#), "{text}");
    }
}
