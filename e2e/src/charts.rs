//! The Helm charts (`charts/`) and the examples (`examples/`) as a user meets them: through `helm` and `kubectl`,
//! both built by `e2e/tools.sh`, against the shared control plane with the admin kubeconfig.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::control_plane::cluster::{Cluster, repo_root};

/// The repository's charts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chart {
    CsiSidecars,
    SnapshotController,
}

impl Chart {
    pub const ALL: [Chart; 2] = [Chart::CsiSidecars, Chart::SnapshotController];

    pub fn name(self) -> &'static str {
        match self {
            Chart::CsiSidecars => "csi-sidecars",
            Chart::SnapshotController => "snapshot-controller",
        }
    }

    pub fn dir(self) -> PathBuf {
        repo_root().join("charts").join(self.name())
    }

    /// `ci/full-values.yaml`: every option of the chart turned on.
    pub fn full_values(self) -> PathBuf {
        self.dir().join("ci/full-values.yaml")
    }

    /// The value sets every chart is checked with: the defaults, and everything on.
    pub fn value_sets(self) -> [(&'static str, Vec<String>); 2] {
        [("default values", Vec::new()), ("full values", vec!["-f".into(), self.full_values().display().to_string()])]
    }
}

/// The path of a tool `e2e/tools.sh` builds (`helm`, `kubectl`), building it if it is missing.
pub fn tool(name: &str) -> PathBuf {
    let output = Command::new("bash")
        .arg(repo_root().join("e2e/tools.sh"))
        .args(["path", name])
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("running e2e/tools.sh path {name}: {e}"));
    assert!(output.status.success(), "e2e/tools.sh path {name} failed");
    PathBuf::from(String::from_utf8(output.stdout).expect("a path").trim())
}

/// Runs `tool` with `args` (and `stdin`) against the shared control plane: its stdout, or what it printed on
/// failure.
pub fn run(tool_name: &str, args: &[String], stdin: Option<&str>) -> Result<String, String> {
    let mut command = Command::new(tool(tool_name));
    command.args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    if needs_cluster(args) {
        command.env("KUBECONFIG", Cluster::shared().kubeconfig());
    }
    let mut child = command.spawn().unwrap_or_else(|e| panic!("starting {tool_name}: {e}"));
    let mut input = child.stdin.take().expect("piped stdin");
    input.write_all(stdin.unwrap_or_default().as_bytes()).expect("writing stdin");
    drop(input);
    let output = child.wait_with_output().expect("waiting for the tool");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if output.status.success() {
        Ok(stdout)
    } else {
        Err(format!("{tool_name} {}: {}\n{stdout}", args.join(" "), String::from_utf8_lossy(&output.stderr)))
    }
}

/// `helm lint` and `helm template` work offline; everything else talks to the control plane.
fn needs_cluster(args: &[String]) -> bool {
    !matches!(args.first().map(String::as_str), Some("lint" | "template"))
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

/// `helm lint --strict` of `chart` with extra `values` arguments.
pub fn lint(chart: Chart, values: &[String]) -> Result<String, String> {
    let mut args = strings(&["lint", "--strict", &chart.dir().display().to_string()]);
    args.extend_from_slice(values);
    run("helm", &args, None)
}

/// `helm template` of `chart` as release `release` in `namespace`, CRDs included.
pub fn template(chart: Chart, release: &str, namespace: &str, values: &[String]) -> Result<String, String> {
    let dir = chart.dir().display().to_string();
    let mut args = strings(&["template", release, &dir, "--namespace", namespace, "--include-crds"]);
    args.extend_from_slice(values);
    run("helm", &args, None)
}

/// The documents of a multi-document YAML text (empty ones left out).
pub fn documents(yaml: &str) -> Vec<serde_json::Value> {
    let documents: Vec<serde_json::Value> = serde_saphyr::from_str_multiple(yaml).expect("rendered YAML parses");
    documents.into_iter().filter(|d| !d.is_null()).collect()
}

/// `kubectl apply --dry-run=server` of `yaml` in `namespace`: the API server validates and admits every object
/// (schemas, CRD schemas, RBAC escalation checks) and stores none.
pub fn dry_run_apply(namespace: &str, yaml: &str) -> Result<String, String> {
    run("kubectl", &strings(&["apply", "--dry-run=server", "--namespace", namespace, "-f", "-"]), Some(yaml))
}

/// An installed release, uninstalled when dropped (its cluster-scoped ClusterRoles and bindings would outlive the
/// test's namespace).
#[derive(Debug)]
pub struct Release {
    pub name: String,
    pub namespace: String,
}

impl Release {
    /// `helm install` of `chart` as `name` in `namespace`, with extra `values` arguments; panics with helm's text.
    pub fn install(chart: Chart, name: &str, namespace: &str, values: &[String]) -> Release {
        Self::install_with(chart, name, namespace, values, "--wait=false")
    }

    /// [`Release::install`] with `--wait`: returns once every Deployment and DaemonSet of the release has its pods
    /// ready (on the node; the plain cluster runs no pods).
    pub fn install_ready(chart: Chart, name: &str, namespace: &str, values: &[String]) -> Release {
        Self::install_with(chart, name, namespace, values, "--wait=true --timeout=180s")
    }

    fn install_with(chart: Chart, name: &str, namespace: &str, values: &[String], wait: &str) -> Release {
        let dir = chart.dir().display().to_string();
        let mut args = strings(&["install", name, &dir, "--namespace", namespace]);
        args.extend(wait.split(' ').map(String::from));
        args.extend_from_slice(values);
        let notes = run("helm", &args, None).unwrap_or_else(|e| panic!("helm install {name}: {e}"));
        eprintln!("{notes}");
        Release { name: name.to_string(), namespace: namespace.to_string() }
    }

    /// `helm upgrade --wait` of this release with `values` (a full set: nothing is reused).
    pub fn upgrade_ready(&self, chart: Chart, values: &[String]) {
        let dir = chart.dir().display().to_string();
        let mut args = strings(&["upgrade", &self.name, &dir, "--namespace", &self.namespace]);
        args.extend(strings(&["--wait=true", "--timeout=180s"]));
        args.extend_from_slice(values);
        run("helm", &args, None).unwrap_or_else(|e| panic!("helm upgrade {}: {e}", self.name));
    }

    /// The manifest helm installed.
    pub fn manifest(&self) -> String {
        run("helm", &strings(&["get", "manifest", &self.name, "--namespace", &self.namespace]), None)
            .unwrap_or_else(|e| panic!("helm get manifest: {e}"))
    }
}

impl Drop for Release {
    fn drop(&mut self) {
        let _ = run("helm", &strings(&["uninstall", &self.name, "--namespace", &self.namespace]), None);
    }
}

/// The container `name` of the Deployment in a rendered `manifest`: its args, with the pod's `$(VAR)`s filled in
/// from `vars`.
pub fn container_args(manifest: &str, name: &str, vars: &[(&str, &str)]) -> Vec<String> {
    let deployment = documents(manifest).into_iter().find(|d| d["kind"] == "Deployment").expect("a Deployment");
    let containers = deployment["spec"]["template"]["spec"]["containers"].as_array().cloned().unwrap_or_default();
    let container = containers.into_iter().find(|c| c["name"] == name).unwrap_or_else(|| panic!("no container {name}"));
    let args = container["args"].as_array().cloned().unwrap_or_default();
    args.iter()
        .map(|arg| {
            let mut arg = arg.as_str().expect("args are strings").to_string();
            for (var, value) in vars {
                arg = arg.replace(&format!("$({var})"), value);
            }
            arg
        })
        .collect()
}

/// A chart's container args made to run on this host: `--http-endpoint` moved to loopback `port` (processes share
/// the host, pods would not), and `--kubeconfig` added (a pod would use its ServiceAccount's mounted token).
pub fn on_this_host(args: Vec<String>, port: u16, kubeconfig: &Path) -> Vec<String> {
    let mut args: Vec<String> = args
        .into_iter()
        .map(|a| if a.starts_with("--http-endpoint=") { format!("--http-endpoint=127.0.0.1:{port}") } else { a })
        .collect();
    args.push(format!("--kubeconfig={}", kubeconfig.display()));
    args
}

/// Every example manifest: `examples/<story>/*.yaml`, by story, in file name order.
pub fn examples() -> Vec<(String, Vec<PathBuf>)> {
    let root = repo_root().join("examples");
    let mut stories: Vec<(String, Vec<PathBuf>)> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("reading {}: {e}", root.display()))
        .filter_map(Result::ok)
        .filter(|entry| entry.path().is_dir())
        .map(|entry| (entry.file_name().to_string_lossy().into_owned(), yaml_files(&entry.path())))
        .collect();
    stories.sort();
    stories
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

/// The Pod Security Standard label of a namespace: what kube-apiserver's PodSecurity admission enforces on its pods.
pub const POD_SECURITY_ENFORCE: &str = "pod-security.kubernetes.io/enforce";

/// Labels `namespace` so that PodSecurity admission enforces `level` (`restricted`, `baseline` or `privileged`,
/// latest version) on every pod created in it from now on.
pub async fn enforce_pod_security(client: &kube::Client, namespace: &str, level: &str) {
    let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client.clone());
    let labels = serde_json::json!({"metadata": {"labels": {
        POD_SECURITY_ENFORCE: level,
        "pod-security.kubernetes.io/enforce-version": "latest",
    }}});
    namespaces
        .patch(namespace, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(labels))
        .await
        .unwrap_or_else(|e| panic!("labelling namespace {namespace} {POD_SECURITY_ENFORCE}={level}: {e}"));
}
