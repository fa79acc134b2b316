//! Counters the KEP names and upstream never shipped (deliberate difference): every ControllerModifyVolume and
//! ControllerExpandVolume attempt, and the failed ones. The encoder adds the `_total` suffix.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;

#[derive(Clone, Default)]
pub struct ResizerMetrics {
    modify: Counter,
    modify_errors: Counter,
    expand: Counter,
    expand_errors: Counter,
}

impl ResizerMetrics {
    pub fn register(registry: &mut Registry) -> ResizerMetrics {
        let m = ResizerMetrics::default();
        registry.register("controller_modify_volume", "ControllerModifyVolume attempts.", m.modify.clone());
        registry.register(
            "controller_modify_volume_errors",
            "ControllerModifyVolume attempts that failed.",
            m.modify_errors.clone(),
        );
        registry.register("controller_expand_volume", "ControllerExpandVolume attempts.", m.expand.clone());
        registry.register(
            "controller_expand_volume_errors",
            "ControllerExpandVolume attempts that failed.",
            m.expand_errors.clone(),
        );
        m
    }

    pub fn modify_attempt(&self, failed: bool) {
        self.modify.inc();
        if failed {
            self.modify_errors.inc();
        }
    }

    pub fn expand_attempt(&self, failed: bool) {
        self.expand.inc();
        if failed {
            self.expand_errors.inc();
        }
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;

    use super::*;

    #[test]
    fn counters_are_exposed_under_the_kep_names() {
        let mut registry = Registry::default();
        let metrics = ResizerMetrics::register(&mut registry);
        metrics.modify_attempt(true);
        metrics.modify_attempt(false);
        metrics.expand_attempt(false);
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        assert!(text.contains("controller_modify_volume_total 2"), "{text}");
        assert!(text.contains("controller_modify_volume_errors_total 1"), "{text}");
        assert!(text.contains("controller_expand_volume_total 1"), "{text}");
        assert!(text.contains("controller_expand_volume_errors_total 0"), "{text}");
    }
}
