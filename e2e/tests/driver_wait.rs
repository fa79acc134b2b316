//! A sidecar whose CSI driver never comes up still stops on SIGTERM, as upstream's do: it waits for the driver's
//! socket forever, but a pod being deleted must not hang until the kubelet's grace period runs out and SIGKILLs it.

use std::time::Duration;

use csi_sidecars_e2e::control_plane::cluster::Cluster;
use csi_sidecars_e2e::control_plane::namespace::TestNamespace;
use csi_sidecars_e2e::processes::rbac::{Sidecar, SidecarIdentity};
use csi_sidecars_e2e::processes::scenario::{Scenario, binary};
use csi_sidecars_e2e::wait::eventually;

/// Time to exit once signalled: nothing is in flight yet, so this is only process teardown on a loaded machine.
const EXIT_BOUND: Duration = Duration::from_secs(10);
const STARTUP: Duration = Duration::from_secs(60);

#[tokio::test]
async fn every_sidecar_stops_on_sigterm_while_waiting_for_its_driver() {
    let client = Cluster::shared().client().await;
    let ns = TestNamespace::create(&client, "driver-wait").await;
    let mut scenario = Scenario::new("driver-wait");
    // The socket is never created: no driver will ever answer.
    let socket = scenario.path("never-there.sock");
    let provisioner = SidecarIdentity::create(&client, ns.name(), Sidecar::Provisioner, scenario.dir()).await;
    let resizer = SidecarIdentity::create(&client, ns.name(), Sidecar::Resizer, scenario.dir()).await;
    // csi-group-snapshotter runs under csi-snapshotter's rules, which already list the group resources.
    let snapshotter = SidecarIdentity::create(&client, ns.name(), Sidecar::Snapshotter, scenario.dir()).await;
    let sidecars = [
        ("csi-provisioner", &provisioner),
        ("csi-resizer", &resizer),
        ("csi-snapshotter", &snapshotter),
        ("csi-group-snapshotter", &snapshotter),
    ];
    for (name, identity) in sidecars {
        let args = vec![identity.kubeconfig_flag(), format!("--csi-address={}", socket.display()), "-v=5".to_string()];
        let mut process = scenario.start(name, &binary(name), &args);
        eventually(&format!("{name} to start waiting for its driver"), STARTUP, || {
            let log = process.log();
            async move { log.contains("connecting to CSI driver") }
        })
        .await;
        process.send_sigterm();
        let code = process.wait_exit(EXIT_BOUND).await;
        assert_eq!(code, 0, "{name} exited with {code} on SIGTERM; log:\n{}", process.log());
        assert!(
            process.log().contains("shutdown requested while waiting for the CSI driver"),
            "{name} did not say why it exited; log:\n{}",
            process.log()
        );
    }
}
