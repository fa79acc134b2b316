//! The Kubernetes client, configured as the upstream sidecars configure theirs:
//! `--kubeconfig`, else `$KUBECONFIG`, else the in-cluster service account;
//! `--master` overrides the server address; `--kube-api-qps` / `--kube-api-burst`
//! limit the request rate on the client side.
//!
//! (external-provisioner lets `$KUBECONFIG` win over `--kubeconfig`; the other
//! sidecars ignore the variable. Flag first is the order a user expects, and in
//! a pod neither is normally set.)

use std::path::{Path, PathBuf};

use kube::client::ClientBuilder;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::flags::CommonArgs;
use crate::rate_limit::RateLimitLayer;
use crate::rest_metrics::{RestClientMetrics, host_label};

#[derive(Debug, thiserror::Error)]
pub enum KubeClientError {
    #[error("reading kubeconfig {path}: {source}")]
    ReadKubeconfig { path: PathBuf, source: kube::config::KubeconfigError },
    #[error("reading $KUBECONFIG: {0}")]
    KubeconfigEnv(kube::config::KubeconfigError),
    #[error("using kubeconfig: {0}")]
    Kubeconfig(#[from] kube::config::KubeconfigError),
    #[error("no kubeconfig given and not running in a cluster: {0}")]
    InCluster(#[from] kube::config::InClusterError),
    #[error("invalid --master {master:?}: {reason}")]
    Master { master: String, reason: String },
    #[error("building the client: {0}")]
    Build(#[from] kube::Error),
}

/// Where the client's configuration comes from, and its rate limit.
#[derive(Debug, Clone, PartialEq)]
pub struct KubeClientOptions {
    pub kubeconfig: Option<PathBuf>,
    pub master: Option<String>,
    pub qps: f32,
    pub burst: u32,
}

impl KubeClientOptions {
    pub fn from_args(args: &CommonArgs) -> KubeClientOptions {
        KubeClientOptions {
            kubeconfig: args.kubeconfig().map(Path::to_path_buf),
            master: args.master().map(str::to_string),
            qps: args.kube_api_qps,
            burst: args.kube_api_burst,
        }
    }
}

/// The client configuration, without the rate limit.
pub async fn config(options: &KubeClientOptions) -> Result<kube::Config, KubeClientError> {
    let kubeconfig = match &options.kubeconfig {
        Some(path) => Some(
            Kubeconfig::read_from(path)
                .map_err(|source| KubeClientError::ReadKubeconfig { path: path.clone(), source })?,
        ),
        // Handles a list of files in $KUBECONFIG, as client-go does.
        None => Kubeconfig::from_env().map_err(KubeClientError::KubeconfigEnv)?,
    };
    let mut config = match kubeconfig {
        Some(kubeconfig) => kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?,
        None => match &options.master {
            Some(master) => kube::Config::new(parse_master(master)?),
            None => kube::Config::incluster()?,
        },
    };
    if let Some(master) = &options.master {
        config.cluster_url = parse_master(master)?;
    }
    Ok(config)
}

/// A client built from `options`, limited to `qps` requests per second.
pub async fn client(options: &KubeClientOptions) -> Result<kube::Client, KubeClientError> {
    let config = config(options).await?;
    client_from_config(config, options.qps, options.burst)
}

/// A rate-limited client for an already loaded configuration. Each call makes a
/// client with its own bucket (leader election gets one of its own). Its requests are counted in
/// [`RestClientMetrics::global`].
pub fn client_from_config(config: kube::Config, qps: f32, burst: u32) -> Result<kube::Client, KubeClientError> {
    let metered = RestClientMetrics::global().layer(host_label(&config.cluster_url));
    let builder = ClientBuilder::try_from(config)?.with_layer(&metered);
    Ok(builder.with_layer(&RateLimitLayer::new(qps, burst)).build())
}

/// Two clients on one rate limit: the work's, and one for background requests (events) that only takes a token
/// while no work request waits for one (see [`crate::rate_limit`]).
pub fn prioritized_clients_from_config(
    config: kube::Config,
    qps: f32,
    burst: u32,
) -> Result<(kube::Client, kube::Client), KubeClientError> {
    let layer = RateLimitLayer::new(qps, burst);
    // Inside the limiter: a request's duration starts once the limiter has let it go, as client-go's does.
    let metered = RestClientMetrics::global().layer(host_label(&config.cluster_url));
    let work = ClientBuilder::try_from(config.clone())?.with_layer(&metered).with_layer(&layer).build();
    let background = ClientBuilder::try_from(config)?.with_layer(&metered).with_layer(&layer.background()).build();
    Ok((work, background))
}

/// Whether the API server serves kind `K` at `K`'s group and version (API discovery, one request).
pub async fn api_resource_exists<K: kube::Resource<DynamicType = ()>>(
    client: &kube::Client,
) -> Result<bool, kube::Error> {
    let (group, version, kind) = (K::group(&()), K::version(&()), K::kind(&()));
    let resources = if group.is_empty() {
        client.list_core_api_resources(&version).await?
    } else {
        client.list_api_group_resources(&format!("{group}/{version}")).await?
    };
    Ok(resources.resources.iter().any(|r| r.kind == kind))
}

fn parse_master(master: &str) -> Result<http::Uri, KubeClientError> {
    let invalid = |reason: String| KubeClientError::Master { master: master.to_string(), reason };
    let uri: http::Uri = master.parse().map_err(|err: http::uri::InvalidUri| invalid(err.to_string()))?;
    if uri.scheme().is_none() || uri.host().is_none() {
        return Err(invalid("expected a URL such as https://10.0.0.1:6443".to_string()));
    }
    Ok(uri)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBECONFIG: &str = r#"
apiVersion: v1
kind: Config
current-context: test
clusters:
- name: test
  cluster:
    server: https://127.0.0.1:6443
    insecure-skip-tls-verify: true
users:
- name: test
  user:
    token: abc
contexts:
- name: test
  context:
    cluster: test
    user: test
    namespace: apps
"#;

    fn options(kubeconfig: Option<PathBuf>, master: Option<&str>) -> KubeClientOptions {
        KubeClientOptions { kubeconfig, master: master.map(String::from), qps: 5.0, burst: 10 }
    }

    #[tokio::test]
    async fn kubeconfig_flag_and_master_override() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        std::fs::write(&path, KUBECONFIG).unwrap();

        let loaded = config(&options(Some(path.clone()), None)).await.unwrap();
        assert_eq!(loaded.cluster_url.to_string(), "https://127.0.0.1:6443/");
        assert_eq!(loaded.default_namespace, "apps");

        let overridden = config(&options(Some(path.clone()), Some("https://10.0.0.1:7443"))).await.unwrap();
        assert_eq!(overridden.cluster_url.to_string(), "https://10.0.0.1:7443/");

        client(&options(Some(path), None)).await.expect("a client builds from the kubeconfig");
    }

    #[tokio::test]
    async fn bad_inputs_name_the_problem() {
        let missing = config(&options(Some(PathBuf::from("/nonexistent/kubeconfig")), None)).await.unwrap_err();
        assert!(missing.to_string().contains("/nonexistent/kubeconfig"), "{missing}");
        for master in ["not a url", "10.0.0.1:6443"] {
            let err = parse_master(master).unwrap_err();
            assert!(err.to_string().contains("--master"), "{err}");
        }
        assert!(parse_master("https://10.0.0.1:6443").is_ok());
    }
}
