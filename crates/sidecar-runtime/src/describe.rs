//! A sidecar stated once, in its own crate: what it is ([`Description`]: names, Lease, RBAC) and how it starts
//! ([`Described`]: its flags, `Config::from_args`, `start`). `csi-sidecars` runs any set of [`Registration`]s, and
//! the image list, the flag reference, the e2e harness's RBAC and the chart checks read the same descriptions.

use std::ffi::OsString;
use std::future::Future;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::task::JoinHandle;

use crate::http::HealthCheck;
use crate::{Driver, SetupError, Shutdown, Sidecar, SidecarLoop};

/// What is known of a sidecar before it runs.
#[derive(Debug, Clone, Copy)]
pub struct Description {
    /// Its name in `csi-sidecars --sidecars`, in `--<name>.<flag>` prefixes and in messages.
    pub name: &'static str,
    /// Its upstream binary name, which is also its image's name and entrypoint (`/<binary>`) and its ServiceAccount.
    pub binary: &'static str,
    /// Its upstream Lease for a driver's name; `None`: it runs under no Lease (beside the others, unled).
    pub lease: Option<fn(&str) -> String>,
    /// Its upstream RBAC rules, `e2e/rbac/<file>`; `None`: it talks to no Kubernetes API (and needs no credentials).
    pub rbac: Option<&'static str>,
    /// Where its metrics are served: the process's `/metrics`, or its own endpoint beside `/healthz`.
    pub metrics: Metrics,
}

/// Where a sidecar's metrics are served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metrics {
    /// The runtime's `/metrics` on `--http-endpoint`/`--metrics-address` (CSI operations, queues, client, process).
    Runtime,
    /// Its own CSI operation metrics, on the endpoint its own flags name (livenessprobe's `--metrics-address`).
    Own,
    /// None of its own (the registrar: the process's, if any).
    None,
}

impl Description {
    /// Whether it needs a Kubernetes client: every sidecar with RBAC rules.
    pub fn uses_kubernetes(&self) -> bool {
        self.rbac.is_some()
    }
}

/// What the process gives a sidecar to start on.
pub struct Beside<'a> {
    /// The runtime (Kubernetes client, caches, metrics), when any selected sidecar uses Kubernetes.
    pub sidecar: Option<&'a mut Sidecar>,
    /// The one driver connection.
    pub driver: &'a Driver,
    /// Stops what the sidecar serves on its own (SIGTERM/SIGINT).
    pub shutdown: &'a Shutdown,
    /// The names of every sidecar selected in the process, this one included.
    pub selected: &'a [&'static str],
}

impl Beside<'_> {
    /// The runtime of a sidecar that uses Kubernetes; refused when there is none (a description without RBAC).
    pub fn sidecar(&mut self) -> Result<&mut Sidecar, SetupError> {
        self.sidecar.as_deref_mut().ok_or_else(|| SetupError::message("no Kubernetes client in this process"))
    }

    /// Whether `name` is selected too.
    pub fn selected(&self, name: &str) -> bool {
        self.selected.contains(&name)
    }
}

/// What a started sidecar leaves to the process.
pub enum Started {
    /// A loop to run under its Lease (`Sidecar::run_all`).
    Loop(SidecarLoop),
    /// Serving already, under no Lease.
    Serving {
        /// Its health check, for the process's `/healthz` when it serves none of its own.
        check: Option<HealthCheck>,
        /// A task whose end (an exit status) ends the process (the registrar's refusal by the kubelet).
        exit: Option<JoinHandle<i32>>,
    },
}

/// A sidecar's flags and start, as its crate declares them (a unit type per sidecar).
pub trait Described: 'static {
    const DESCRIPTION: Description;
    /// Its command line, as its single binary parses it.
    type Args: clap::Parser + Send;
    /// Its flags, checked.
    type Config: Send + 'static;

    /// Refuses what can be refused before connecting to anything.
    fn from_args(args: Self::Args) -> Result<Self::Config, SetupError>;

    /// Its CSI call limit (`--timeout`; livenessprobe's `--probe-timeout`).
    fn timeout(config: &Self::Config) -> Duration;

    /// Asks the driver what it can do and builds what runs.
    fn start(config: Self::Config, beside: Beside<'_>) -> impl Future<Output = Result<Started, SetupError>> + Send;
}

/// Why a sidecar's command line was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Its parser refused it (clap's message names the flag).
    #[error("{sidecar}: {source}")]
    Flags {
        sidecar: &'static str,
        #[source]
        source: clap::Error,
    },
    #[error("{sidecar}: {source}")]
    Refused {
        sidecar: &'static str,
        #[source]
        source: SetupError,
    },
}

/// A sidecar as a process that runs several finds it: one line per sidecar, `register::<Its>()`.
#[derive(Clone, Copy)]
pub struct Registration {
    pub description: Description,
    /// Its own command line, as its single binary parses it.
    pub command: fn() -> clap::Command,
    /// Parses and checks a command line (program name first) with its own parser and checks.
    pub configure: fn(Vec<OsString>) -> ConfigResult,
}

impl std::fmt::Debug for Registration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Registration").field(&self.description.name).finish()
    }
}

/// The registration of `S`.
pub const fn register<S: Described>() -> Registration {
    Registration {
        description: S::DESCRIPTION,
        command: <S::Args as clap::CommandFactory>::command,
        configure: configure::<S>,
    }
}

/// A sidecar's command line, checked, or why not.
pub type ConfigResult = Result<Box<dyn Configured>, ConfigError>;

fn configure<S: Described>(argv: Vec<OsString>) -> ConfigResult {
    let sidecar = S::DESCRIPTION.name;
    let args = crate::flags::try_parse_from(argv).map_err(|source| ConfigError::Flags { sidecar, source })?;
    let config = S::from_args(args).map_err(|source| ConfigError::Refused { sidecar, source })?;
    Ok(Box::new(Checked::<S>(config)))
}

/// A sidecar whose flags passed its own checks, ready to start once the runtime and the driver are up.
pub trait Configured: Send {
    fn description(&self) -> &'static Description;
    fn timeout(&self) -> Duration;
    fn start<'a>(self: Box<Self>, beside: Beside<'a>) -> BoxFuture<'a, Result<Started, SetupError>>;
}

struct Checked<S: Described>(S::Config);

impl<S: Described> Configured for Checked<S> {
    fn description(&self) -> &'static Description {
        &const { S::DESCRIPTION }
    }

    fn timeout(&self) -> Duration {
        S::timeout(&self.0)
    }

    fn start<'a>(self: Box<Self>, beside: Beside<'a>) -> BoxFuture<'a, Result<Started, SetupError>> {
        Box::pin(S::start(self.0, beside))
    }
}
