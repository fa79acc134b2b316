//! The few calls a sidecar's `main.rs` makes, in order:
//!
//! ```ignore
//! let args: Args = sidecar_runtime::flags::parse();
//! args.common.exit_if_version_requested(env!("CARGO_PKG_VERSION"));
//! let mut sidecar = Sidecar::start(&args.common).await?;      // logging, signals, Kubernetes client
//! let driver = sidecar.connect_driver(args.timeout).await?;  // socket, probe, name, exit on loss
//! let driver = driver.name;
//! sidecar.serve_http().await?;                                  // metrics + health, on every replica
//! let lease = leader_election::provisioner_lease_name(&driver);
//! sidecar.run(&lease, args.timeout, |stop| controller.run(stop)).await?;
//! ```
//!
//! A sidecar crate's `start` does the middle steps into a [`SidecarLoop`]; `csi-sidecars` starts several on one
//! `Sidecar` (one driver connection, one cache per kind, one `/metrics`) and runs them with [`Sidecar::run_all`].

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

use crate::events::EventRecorder;
use crate::flags::{CommonArgs, FeatureGates};
use crate::http::{HealthCheck, HttpError, HttpOptions};
use crate::kube_client::{KubeClientError, KubeClientOptions};
use crate::leader_election::{self, LeaderElectionConfig, LeaderElector, LeaderStatus};
use crate::logging::LoggingError;
use crate::queue::QueueMetrics;
use crate::run::{self, LeadershipLost, RELEASE_LEADER_ELECTION_ON_EXIT};
use crate::shutdown::Shutdown;
use crate::supervise::{self, SidecarFailure, SidecarLoop, supervise};
use crate::watch::CacheProvider;

/// `$POD_NAME`, the leader-election identity when set: in a pod it is the hostname (upstream's identity), and it also
/// tells apart replicas that share a host.
fn pod_name() -> Option<String> {
    std::env::var("POD_NAME").ok().filter(|p| !p.is_empty())
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Logging(#[from] LoggingError),
    #[error(transparent)]
    KubeClient(#[from] KubeClientError),
    #[error(transparent)]
    Http(#[from] HttpError),
    #[error(transparent)]
    LeaderElection(#[from] leader_election::ConfigError),
}

/// The shared runtime of one sidecar process.
pub struct Sidecar {
    args: CommonArgs,
    kube_config: kube::Config,
    client: kube::Client,
    /// The same rate limit as `client`, yielding to it: for events, which nobody waits for.
    background_client: kube::Client,
    registry: Option<Registry>,
    leader_status: LeaderStatus,
    leader_identity: Option<String>,
    shutdown: Shutdown,
    caches: CacheProvider,
    queue_metrics: Option<QueueMetrics>,
    health_checks: Vec<HealthCheck>,
}

impl Sidecar {
    /// Installs logging (`-v`, `--logging-format`), starts listening for
    /// SIGTERM/SIGINT and builds the rate-limited Kubernetes client.
    pub async fn start(args: &CommonArgs) -> Result<Sidecar, StartError> {
        crate::logging::init(args)?;
        if args.standard.vmodule.is_some() {
            tracing::warn!("--vmodule is accepted but has no effect; use -v or RUST_LOG");
        }
        let shutdown = Shutdown::on_signals();
        let options = KubeClientOptions::from_args(args);
        let kube_config = crate::kube_client::config(&options).await?;
        let (client, background_client) =
            crate::kube_client::prioritized_clients_from_config(kube_config.clone(), options.qps, options.burst)?;
        Ok(Sidecar {
            args: args.clone(),
            kube_config,
            client,
            background_client,
            registry: Some(Registry::default()),
            leader_status: LeaderStatus::new(),
            leader_identity: pod_name(),
            shutdown,
            caches: CacheProvider::default(),
            queue_metrics: None,
            health_checks: Vec::new(),
        })
    }

    /// The Kubernetes client every controller shares (and its rate limit).
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// The process's leadership: its first Lease, and through it every other ([`LeaderStatus::another_lease`]).
    pub fn leader_status(&self) -> &LeaderStatus {
        &self.leader_status
    }

    pub fn args(&self) -> &CommonArgs {
        &self.args
    }

    pub fn feature_gates(&self) -> FeatureGates {
        self.args.feature_gates()
    }

    /// Fires on SIGTERM/SIGINT.
    pub fn shutdown(&self) -> &Shutdown {
        &self.shutdown
    }

    /// An event recorder whose events come from `component` (upstream
    /// examples: `external-resizer <driver>`, `csi-snapshotter <driver>`).
    /// Its requests share the client's rate limit but never make the work wait.
    pub fn events(&self, component: impl Into<String>) -> EventRecorder {
        EventRecorder::new(self.background_client.clone(), component)
    }

    /// The metrics registry, for registering before [`Sidecar::serve_http`].
    ///
    /// # Panics
    /// After `serve_http`: the registry is being served then.
    pub fn registry(&mut self) -> &mut Registry {
        self.registry.as_mut().expect("register metrics before serve_http")
    }

    /// The process's watch caches, one per kind, shared by every controller that asks.
    pub fn caches(&self) -> CacheProvider {
        self.caches.clone()
    }

    /// The workqueue metric families, registered once however many sidecars run here.
    pub fn queue_metrics(&mut self) -> QueueMetrics {
        if let Some(metrics) = &self.queue_metrics {
            return metrics.clone();
        }
        let metrics = QueueMetrics::register(self.registry());
        self.queue_metrics = Some(metrics.clone());
        metrics
    }

    /// Overrides the leader-election identity (default: `$POD_NAME`, else the
    /// hostname). Only for tests and tools that run several electors on one host.
    pub fn set_leader_identity(&mut self, identity: impl Into<String>) {
        self.leader_identity = Some(identity.into());
    }

    /// Adds a check to `/healthz` (for example the driver's Probe, [`crate::http::driver_probe_check`]), served
    /// from [`Sidecar::serve_http`] on.
    pub fn add_health_check(&mut self, check: HealthCheck) {
        self.health_checks.push(check);
    }

    /// Serves metrics and health checks on `--http-endpoint` (or the deprecated
    /// `--metrics-address`) if set. Returns the bound address.
    pub async fn serve_http(&mut self) -> Result<Option<SocketAddr>, StartError> {
        let mut registry = self.registry.take().unwrap_or_default();
        crate::rest_metrics::RestClientMetrics::global().register(&mut registry);
        crate::process_metrics::register(&mut registry);
        let leader = self.args.leader_election.then(|| self.leader_status.clone());
        if let Some(leader) = &leader {
            leader.register(&mut registry);
        }
        let Some(options) = HttpOptions::from_args(&self.args) else { return Ok(None) };
        let checks = std::mem::take(&mut self.health_checks);
        Ok(Some(crate::http::serve(&options, Arc::new(registry), leader, checks).await?))
    }

    /// Runs `controllers` until shutdown, under leader election on `lease_name`
    /// when `--leader-election` is set. The token passed to `controllers` fires
    /// on SIGTERM/SIGINT; after that they get `drain` to finish in-flight work.
    /// If the Lease is lost, the process exits 1 at once, as upstream.
    pub async fn run<F, Fut>(self, lease_name: &str, drain: Duration, controllers: F) -> Result<(), StartError>
    where
        F: FnOnce(CancellationToken) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let sidecar = SidecarLoop::new(lease_name, lease_name, drain, controllers);
        self.run_all(vec![sidecar], None).await
    }

    /// Runs every sidecar until shutdown. With `--leader-election` each leads under its own Lease, or all under
    /// `shared_lease` when given. A sidecar that fails ([`SidecarFailure`]) ends the process with exit status 1
    /// and a message naming it; a single sidecar keeps upstream's behaviour and message.
    pub async fn run_all(self, loops: Vec<SidecarLoop>, shared_lease: Option<&str>) -> Result<(), StartError> {
        let alone = loops.len() == 1;
        let drain = loops.iter().map(|l| l.drain).max().unwrap_or_default();
        let fail = move |failure: SidecarFailure| -> ! {
            match failure {
                SidecarFailure::LeadershipLost(_) if alone => LeadershipLost.exit(),
                failure => failure.exit(),
            }
        };
        let supervised = move |loops: Vec<SidecarLoop>| {
            move |stop: CancellationToken| async move {
                if let Err(failure) = supervise(loops, stop, alone).await {
                    fail(failure)
                }
            }
        };
        if !self.args.leader_election {
            run::run_without_leader_election(&self.shutdown, drain, supervised(loops)).await;
            return Ok(());
        }
        let release = self.feature_gates().enabled(RELEASE_LEADER_ELECTION_ON_EXIT, false);
        if let Some(lease) = shared_lease {
            let names = supervise::names(&loops);
            let elector = self.elector(lease, self.leader_status.clone())?;
            let led = run::run_with_leader_election(elector, &self.shutdown, release, drain, supervised(loops)).await;
            return led.map_err(|_| fail(SidecarFailure::LeadershipLost(names)));
        }
        let mut each = Vec::new();
        for (index, sidecar) in loops.into_iter().enumerate() {
            // The first Lease reports through the process's status; the others through statuses beside it.
            let status = if index == 0 { self.leader_status.clone() } else { self.leader_status.another_lease() };
            let elector = self.elector(&sidecar.lease, status)?;
            let (name, drain) = (sidecar.name.clone(), sidecar.drain);
            let shutdown = &self.shutdown;
            each.push(async move {
                let led = run::run_with_leader_election(elector, shutdown, release, drain, supervised(vec![sidecar]));
                if led.await.is_err() {
                    fail(SidecarFailure::LeadershipLost(name))
                }
            });
        }
        futures::future::join_all(each).await;
        Ok(())
    }

    fn elector(&self, lease_name: &str, status: LeaderStatus) -> Result<LeaderElector, StartError> {
        let mut config = LeaderElectionConfig::from_args(&self.args, lease_name)?;
        if let Some(identity) = &self.leader_identity {
            config.identity = leader_election::sanitize_name(identity);
        }
        // A client of its own, as csi-lib-utils gives the elector: controller
        // traffic must not hold up renewals in the shared rate limiter.
        let client = crate::kube_client::client_from_config(
            self.kube_config.clone(),
            self.args.kube_api_qps,
            self.args.kube_api_burst,
        )?;
        Ok(LeaderElector::new(client, config, status))
    }
}
