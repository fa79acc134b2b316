//! Names and texts the health monitor shares with upstream (external-health-monitor pkg/csi-handler/pv_checker.go,
//! pkg/util/util.go, cmd/csi-external-health-monitor-controller/main.go).

use sidecar_runtime::leader_election::sanitize_name;

/// The Warning a claim gets while its volume reports an adverse condition.
pub const REASON_ABNORMAL: &str = "VolumeConditionAbnormal";
/// The Normal event a claim gets once its volume reports none again.
pub const REASON_NORMAL: &str = "VolumeConditionNormal";
/// The recovery event's message (upstream's DefaultRecoveryEventMessage).
pub const RECOVERY_MESSAGE: &str = "The Volume returns to the healthy state";

/// The PV queue of the per-volume mode (upstream's `csi-monitor-pv-queue`).
pub const VOLUME_QUEUE: &str = "csi-monitor-pv-queue";

/// The known feature gate (external-health-monitor pkg/features/features.go).
pub const GATE_RELEASE_LEADER_ELECTION_ON_EXIT: &str = "ReleaseLeaderElectionOnExit";

/// The events' source component: `csi-pv-monitor-controller-<driver>`.
pub fn event_component(driver: &str) -> String {
    format!("csi-pv-monitor-controller-{driver}")
}

/// The Lease: `external-health-monitor-leader-<driver>`, sanitised as csi-lib-utils' leader election does.
pub fn lease_name(driver: &str) -> String {
    sanitize_name(&format!("external-health-monitor-leader-{driver}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_names() {
        assert_eq!(lease_name("hostpath.csi.k8s.io"), "external-health-monitor-leader-hostpath-csi-k8s-io");
        assert_eq!(lease_name("a/b_c"), "external-health-monitor-leader-a-b-c");
        assert_eq!(event_component("hostpath.csi.k8s.io"), "csi-pv-monitor-controller-hostpath.csi.k8s.io");
    }
}
