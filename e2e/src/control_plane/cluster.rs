//! The shared control plane: brought up once per test binary by
//! `e2e/cluster.sh up` (idempotent: a healthy cluster is reused).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use anyhow::{Context, bail};

/// The running control plane.
#[derive(Debug)]
pub struct Cluster {
    kubeconfig: PathBuf,
}

/// The repository's top folder (the workspace root).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("e2e/ sits in the repository").to_path_buf()
}

static CLUSTER: OnceLock<Result<Cluster, String>> = OnceLock::new();

impl Cluster {
    /// Starts the control plane if needed and returns it. Blocking; run once
    /// per test binary however many tests ask.
    pub fn shared() -> &'static Cluster {
        let cluster = CLUSTER.get_or_init(|| Cluster::up().map_err(|e| format!("{e:#}")));
        match cluster {
            Ok(cluster) => cluster,
            Err(err) => panic!("the e2e control plane is not available: {err}"),
        }
    }

    fn up() -> anyhow::Result<Cluster> {
        let root = repo_root();
        let script = root.join("e2e/cluster.sh");
        let status = Command::new("bash")
            .arg(&script)
            .arg("up")
            .status()
            .with_context(|| format!("running {}", script.display()))?;
        if !status.success() {
            bail!("{} up failed ({status})", script.display());
        }
        // cluster.sh keeps its state in CLUSTER_DIR when set (a second cluster on other ports), else e2e/.cluster.
        let dir = std::env::var_os("CLUSTER_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("e2e/.cluster"));
        let kubeconfig = dir.join("kubeconfig");
        if !kubeconfig.exists() {
            bail!("{} up did not write {}", script.display(), kubeconfig.display());
        }
        Ok(Cluster { kubeconfig })
    }

    /// Path of the admin kubeconfig, for processes the tests start.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// A new admin client. Each test makes its own: a client's connections
    /// belong to the tokio runtime that made it, and every test has one.
    pub async fn client(&self) -> kube::Client {
        let options = kube::config::KubeConfigOptions::default();
        let kubeconfig = kube::config::Kubeconfig::read_from(&self.kubeconfig).expect("kubeconfig readable");
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options).await.expect("kubeconfig valid");
        kube::Client::try_from(config).expect("client from kubeconfig")
    }
}

/// Runs cleanup `work` with a client of its own, on a thread with a runtime of its own, and waits for it. For
/// `Drop`: it cannot await, and the test's runtime may be shutting down. Failures are ignored (best effort).
pub fn clean_up<F, Fut>(work: F)
where
    F: FnOnce(kube::Client) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    let kubeconfig = Cluster::shared().kubeconfig().to_path_buf();
    let cleaning = std::thread::spawn(move || {
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
        runtime.block_on(async move {
            let Ok(kubeconfig) = kube::config::Kubeconfig::read_from(&kubeconfig) else { return };
            let Ok(config) = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await else {
                return;
            };
            let Ok(client) = kube::Client::try_from(config) else { return };
            work(client).await;
        });
    });
    let _ = cleaning.join();
}
