//! `csi-sidecars --sidecars=registrar,livenessprobe`, the node pod's one sidecar container, as a process: with a
//! kubeconfig that does not exist (it builds no Kubernetes client), against the hostpath-plugin and a kubelet
//! stand-in calling the registration socket as the kubelet's plugin watcher does. One `/healthz` on
//! `--http-endpoint` fails when the driver's Probe or the registration socket does; one `/metrics`; SIGTERM ends it
//! with 0 and takes the socket away, the kubelet's refusal with 1. No control plane needed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use csi_sidecars_e2e::http::{free_port, try_http_get};
use csi_sidecars_e2e::processes::scenario::{Process, Scenario, binary};
use csi_sidecars_e2e::wait::wait_for;
use node_driver_registrar::health_server::registration_client;
use node_driver_registrar::proto::{InfoRequest, RegistrationStatus};

const DRIVER: &str = "hostpath.csi.k8s.io";
const HOST_SOCKET: &str = "/var/lib/kubelet/plugins/csi-hostpath/csi.sock";

/// A node: the driver serving with fault rules read from `faults.json`, and the kubelet's plugin registry.
struct Node {
    scenario: Scenario,
    socket: PathBuf,
    _driver: Process,
}

impl Node {
    fn with_driver(name: &str) -> Node {
        let mut scenario = Scenario::new(name);
        std::fs::create_dir(scenario.path("plugins_registry")).unwrap();
        std::fs::write(scenario.path("faults.json"), "{}").unwrap();
        let faults = format!("--fault-config={}", scenario.path("faults.json").display());
        let (driver, socket) = scenario.hostpath_plugin("hostpath-plugin", &[&faults, "--driver-name", DRIVER]);
        Node { scenario, socket, _driver: driver }
    }

    fn set_faults(&self, json: &str) {
        let next = self.scenario.path("faults.json.next");
        std::fs::write(&next, json).unwrap();
        std::fs::rename(&next, self.scenario.path("faults.json")).unwrap();
    }

    fn registration_socket(&self) -> PathBuf {
        self.scenario.path("plugins_registry").join(format!("{DRIVER}-reg.sock"))
    }

    /// csi-sidecars with the flags a node DaemonSet passes, and `extra`.
    fn start_sidecars(&mut self, extra: &[&str]) -> Process {
        let mut args = vec![
            "--sidecars=registrar,livenessprobe".to_string(),
            format!("-csi-address={}", self.socket.display()),
            format!("-kubelet-registration-path={HOST_SOCKET}"),
            format!("-plugin-registration-path={}", self.scenario.path("plugins_registry").display()),
            "--probe-timeout=1s".to_string(),
            "-v=2".to_string(),
        ];
        args.extend(extra.iter().map(|a| a.to_string()));
        let env = [("KUBECONFIG", "/nonexistent/kubeconfig"), ("KUBERNETES_SERVICE_HOST", "")];
        self.scenario.start_with_env("csi-sidecars", &binary("csi-sidecars"), &args, &env)
    }
}

/// The kubelet's side of the registration socket, once it is there: GetInfo's name and host socket, then the
/// verdict.
async fn kubelet_registers(socket: &Path, registered: bool) -> (String, String) {
    wait_for("the registration socket", Duration::from_secs(10), || async { socket.exists().then_some(()) }).await;
    let mut kubelet = registration_client(socket).await.unwrap();
    let info = kubelet.get_info(InfoRequest {}).await.unwrap().into_inner();
    let error = if registered { String::new() } else { "driver refused".to_string() };
    let notified =
        kubelet.notify_registration_status(RegistrationStatus { plugin_registered: registered, error }).await;
    // A refused driver's registrar may be gone before it answers.
    assert!(notified.is_ok() || !registered, "{notified:?}");
    (info.name, info.endpoint)
}

/// Polls `/healthz` until it answers `status`; answers the body.
async fn healthz_until(port: u16, status: u16) -> String {
    let answered = || async move { try_http_get(port, "/healthz").await.filter(|(got, _)| *got == status) };
    wait_for(&format!("/healthz to answer {status}"), Duration::from_secs(15), answered).await.1
}

#[tokio::test]
async fn registers_and_serves_one_healthz_of_the_driver_and_the_registration() {
    let mut node = Node::with_driver("combined-node-pod");
    let port = free_port();
    let mut sidecars = node.start_sidecars(&[&format!("--http-endpoint=127.0.0.1:{port}")]);
    let socket = node.registration_socket();
    assert_eq!(kubelet_registers(&socket, true).await, (DRIVER.to_string(), HOST_SOCKET.to_string()));
    assert_eq!(healthz_until(port, 200).await, "ok");

    node.set_faults(r#"{"Probe": {"code": "Unavailable", "message": "backend restarting"}}"#);
    assert_eq!(healthz_until(port, 500).await, "rpc error: code = Unavailable desc = backend restarting");
    node.set_faults("{}");
    assert_eq!(healthz_until(port, 200).await, "ok");

    let moved = node.scenario.path("moved.sock");
    std::fs::rename(&socket, &moved).unwrap();
    assert_eq!(healthz_until(port, 500).await, "registration socket does not exist");
    std::fs::rename(&moved, &socket).unwrap();
    assert_eq!(healthz_until(port, 200).await, "ok");

    // One /metrics: the one driver connection's Probes, under the driver's name.
    let (status, metrics) = try_http_get(port, "/metrics").await.unwrap();
    assert_eq!(status, 200);
    let probes = metrics.lines().find(|l| l.starts_with("csi_sidecar_operations_seconds_count") && l.contains("Probe"));
    assert!(probes.is_some_and(|l| l.contains(&format!("driver_name=\"{DRIVER}\""))), "{metrics}");

    sidecars.send_sigterm();
    assert_eq!(sidecars.wait_exit(Duration::from_secs(10)).await, 0);
    assert!(!socket.exists(), "the registration socket goes with the process");
}

#[tokio::test]
async fn livenessprobe_on_its_port_and_a_refused_registration_ends_the_process() {
    let mut node = Node::with_driver("combined-node-pod-refused");
    let port = free_port();
    let mut sidecars = node.start_sidecars(&[&format!("--livenessprobe.health-port={port}")]);
    assert_eq!(healthz_until(port, 200).await, "ok", "livenessprobe's /healthz on its --health-port");
    assert_eq!(try_http_get(port, "/metrics").await.unwrap().0, 404, "no metrics beside --health-port, as upstream");

    kubelet_registers(&node.registration_socket(), false).await;
    assert_eq!(sidecars.wait_exit(Duration::from_secs(10)).await, 1, "the kubelet's refusal ends the process");
}
