//! The node-backed cluster (`CLUSTER_NODE=1 e2e/cluster.sh up`, `make node-e2e`): our images run as pods on one
//! kubelet, installed by the charts or by manifests; the tests share the node through namespaces (and take turns:
//! `make node-e2e` runs them one at a time).
//!
//! [`Node::shared`] brings the node up (or reuses it) and imports the images `e2e/node-images.sh` packs from
//! target/debug, once per test binary. Objects are written as a user writes them, YAML through `kubectl apply`;
//! waits read them with the API.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;

use crate::charts::run;
use crate::control_plane::cluster::{Cluster, repo_root};
use crate::wait::wait_for;

/// The node's name (`CLUSTER_NODE_NAME`'s default).
pub const NODE_NAME: &str = "e2e-node";
/// The test pods' image: Debian's busybox-static (`e2e/node-images.sh`).
pub const BUSYBOX: &str = "e2e.local/busybox:1";
/// The user the charts run the sidecars as (and, by default, the controller pod's driver).
pub const CHART_USER: u32 = 65532;
/// Every wait on the node: pods start in seconds, but two cores may be busy.
pub const NODE_TIMEOUT: Duration = Duration::from_secs(180);

/// The running node.
#[derive(Debug)]
pub struct Node {
    dir: PathBuf,
}

static NODE: OnceLock<Result<Node, String>> = OnceLock::new();

impl Node {
    /// Brings up the node-backed cluster (or reuses a healthy one) and imports our images; once per test binary.
    pub fn shared() -> &'static Node {
        match NODE.get_or_init(|| Node::up().map_err(|e| format!("{e:#}"))) {
            Ok(node) => node,
            Err(err) => panic!("the node is not available ({err}); `make node-e2e` starts it"),
        }
    }

    fn up() -> anyhow::Result<Node> {
        let root = repo_root();
        let status =
            Command::new("bash").arg(root.join("e2e/cluster.sh")).arg("up").env("CLUSTER_NODE", "1").status()?;
        anyhow::ensure!(status.success(), "CLUSTER_NODE=1 e2e/cluster.sh up failed ({status})");
        let status = Command::new("bash").arg(root.join("e2e/node-images.sh")).status()?;
        anyhow::ensure!(status.success(), "e2e/node-images.sh failed ({status})");
        let kubeconfig = Cluster::shared().kubeconfig();
        let dir = kubeconfig.parent().expect("the kubeconfig sits in the cluster's directory").join("node");
        Ok(Node { dir })
    }

    /// An empty directory on the host for a pod's hostPath (a driver's state), owned by `uid`; it goes with the
    /// cluster (`e2e/cluster.sh down`).
    pub fn host_dir(&self, name: &str, uid: u32) -> PathBuf {
        let dir = self.dir.join("host").join(name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
        std::os::unix::fs::chown(&dir, Some(uid), Some(uid)).expect("chown the host directory");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod the host directory");
        dir
    }

    /// SIGKILL to a container's process, through containerd (`containerd://<id>` from the pod's status): the
    /// kubelet sees it die and restarts it. False when containerd has no such running container.
    pub fn kill9_container(&self, container_id: &str) -> bool {
        self.signal_container(container_id, "SIGKILL")
    }

    /// `signal` (SIGSTOP: the process hangs, alive) to a container's process, through containerd. False when
    /// containerd has no such running container.
    pub fn signal_container(&self, container_id: &str, signal: &str) -> bool {
        let id = container_id.strip_prefix("containerd://").unwrap_or(container_id);
        Command::new("bash")
            .arg(repo_root().join("e2e/cluster.sh"))
            .args(["ctr", "tasks", "kill", "--signal", signal, id])
            .status()
            .expect("running ctr")
            .success()
    }
}

/// The node marked unschedulable until the guard is dropped: a pod deleted meanwhile is not replaced on it (its
/// replacement stays Pending), as when the node that ran it is gone.
pub struct Cordoned;

impl Node {
    pub fn cordon(&self) -> Cordoned {
        run("kubectl", &["cordon", NODE_NAME].map(String::from), None).expect("kubectl cordon");
        Cordoned
    }
}

impl Drop for Cordoned {
    fn drop(&mut self) {
        let _ = run("kubectl", &["uncordon", NODE_NAME].map(String::from), None);
    }
}

/// Our image of `binary`, as the charts name it by default (`<binary>:<workspace version>`).
pub fn image(binary: &str) -> String {
    format!("{binary}:{}", env!("CARGO_PKG_VERSION"))
}

/// A StatefulSet `name` of `replicas` busybox pods (label `app: <name>`, started in parallel) running `script` with
/// a 1Gi claim of `class` each (template `data`, claims `data-<name>-<n>`) mounted at /data.
pub fn statefulset(name: &str, replicas: u32, class: &str, script: &str) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: StatefulSet
metadata: {{name: {name}}}
spec:
  serviceName: {name}
  replicas: {replicas}
  podManagementPolicy: Parallel
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
        - name: {name}
          image: {BUSYBOX}
          imagePullPolicy: Never
          command: [sh, -c, '{script}']
          volumeMounts: [{{name: data, mountPath: /data}}]
  volumeClaimTemplates:
    - metadata: {{name: data}}
      spec:
        accessModes: [ReadWriteOnce]
        storageClassName: {class}
        resources: {{requests: {{storage: 1Gi}}}}
"#
    )
}

/// The mount points on the host at or below `dir` (a pod's volume directory, to see it unpublished).
pub fn mounts_under(dir: &Path) -> Vec<String> {
    let table = std::fs::read_to_string("/proc/self/mountinfo").expect("reading /proc/self/mountinfo");
    let dir = dir.display().to_string();
    table
        .lines()
        .filter_map(|line| line.split_whitespace().nth(4))
        .map(|point| point.replace("\\040", " "))
        .filter(|point| point == &dir || point.starts_with(&format!("{dir}/")))
        .collect()
}

/// `kubectl apply` of `yaml` in `namespace`; panics with kubectl's text.
pub fn apply(namespace: &str, yaml: &str) {
    let args = ["apply", "--namespace", namespace, "-f", "-"].map(String::from);
    run("kubectl", &args, Some(yaml)).unwrap_or_else(|e| panic!("kubectl apply: {e}\n{yaml}"));
}

/// `kubectl logs` of one container (`previous`: of its last run, after a restart).
///
/// Asked again (up to five times) when the API server's connection to the kubelet broke: on these machines its
/// first request to a kubelet now and then fails with "use of closed network connection" (the kubelet logs a TLS
/// handshake that ended early), and the next one goes through.
pub fn logs(namespace: &str, pod: &str, container: &str, previous: bool) -> String {
    let mut args = vec!["logs".to_string(), "--namespace".into(), namespace.into(), pod.into(), "-c".into()];
    args.push(container.into());
    if previous {
        args.push("--previous".into());
    }
    let mut attempt = 0;
    loop {
        match run("kubectl", &args, None) {
            Ok(text) => return text,
            Err(e) if attempt < 4 && e.contains("use of closed network connection") => {
                attempt += 1;
                std::thread::sleep(Duration::from_millis(500));
            }
            Err(e) => return format!("(no logs: {e})"),
        }
    }
}

/// The pods of `namespace` that `selector` picks.
pub async fn pods(client: &kube::Client, namespace: &str, selector: &str) -> Vec<Pod> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    api.list(&ListParams::default().labels(selector)).await.expect("listing pods").items
}

/// Whether every container of `pod` runs and is ready.
pub fn ready(pod: &Pod) -> bool {
    let status = pod.status.as_ref();
    let running = status.and_then(|s| s.phase.as_deref()) == Some("Running");
    let containers = status.and_then(|s| s.container_statuses.as_ref());
    running && containers.is_some_and(|c| !c.is_empty() && c.iter().all(|c| c.ready))
}

/// Waits until exactly `count` pods of `selector` exist and are all ready; returns them.
pub async fn ready_pods(client: &kube::Client, namespace: &str, selector: &str, count: usize) -> Vec<Pod> {
    wait_for(&format!("{count} ready pods {selector} in {namespace}"), NODE_TIMEOUT, || async {
        let found = pods(client, namespace, selector).await;
        let live: Vec<Pod> = found.into_iter().filter(|p| p.metadata.deletion_timestamp.is_none()).collect();
        (live.len() == count && live.iter().all(ready)).then_some(live)
    })
    .await
}

/// Waits until pod `name` runs with every container ready.
pub async fn ready_pod(client: &kube::Client, namespace: &str, name: &str) -> Pod {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    wait_for(&format!("pod {namespace}/{name} ready"), NODE_TIMEOUT, || async {
        api.get(name).await.ok().filter(ready)
    })
    .await
}

/// Waits until pod `name` ends in phase Succeeded; panics with its logs when it fails.
pub async fn succeeded(client: &kube::Client, namespace: &str, name: &str) -> Pod {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    wait_for(&format!("pod {namespace}/{name} to succeed"), NODE_TIMEOUT, || async {
        let pod = api.get(name).await.ok()?;
        match pod.status.as_ref().and_then(|s| s.phase.as_deref()) {
            Some("Succeeded") => Some(pod),
            Some("Failed") => panic!("pod {name} failed: {}", logs(namespace, name, name, false)),
            _ => None,
        }
    })
    .await
}

/// A container's status in `pod`, once the kubelet has reported one.
pub fn container_status<'p>(pod: &'p Pod, name: &str) -> Option<&'p k8s_openapi::api::core::v1::ContainerStatus> {
    let statuses = pod.status.as_ref().and_then(|s| s.container_statuses.as_ref());
    statuses.into_iter().flatten().find(|c| c.name == name)
}

/// One line per pod and container with its image, for the suite's record of what ran.
pub fn describe(pods: &[Pod]) -> String {
    let mut lines = Vec::new();
    for pod in pods {
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        for container in pod.spec.iter().flat_map(|s| s.containers.iter()) {
            lines.push(format!(
                "  pod {name} container {} image {}",
                container.name,
                container.image.as_deref().unwrap_or("-")
            ));
        }
    }
    lines.join("\n")
}
