//! The selected sidecars, from their command lines to their running loops. Each is wired by its own crate's
//! `start`, as in its single binary.

use std::ffi::OsString;
use std::time::Duration;

use sidecar_runtime::flags::try_parse_from;
use sidecar_runtime::{Driver, SetupError, Sidecar, SidecarLoop};

use crate::flags::Kind;

/// A sidecar whose flags passed its own checks, ready to start once the runtime and the driver are up.
pub enum Configured {
    Provisioner(provisioner::start::Config),
    Resizer(resizer::start::Config),
    Snapshotter(snapshot_binaries::snapshotter::Config),
    GroupSnapshotter(snapshot_binaries::group_snapshotter::GroupConfig),
    Attacher(attacher::start::Config),
    /// Started with [`crate::node::start`], as the registrar is: neither runs under a Lease.
    LivenessProbe(crate::node::LivenessProbe),
    Registrar(crate::node::Registrar),
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

impl Configured {
    /// Parses and checks `argv` (program name first) with `kind`'s own parser and checks.
    pub fn parse(kind: Kind, argv: Vec<OsString>) -> Result<Configured, ConfigError> {
        let sidecar = kind.name();
        let flags = |source| ConfigError::Flags { sidecar, source };
        let refused = |source| ConfigError::Refused { sidecar, source };
        Ok(match kind {
            Kind::Provisioner => {
                let args = try_parse_from(argv).map_err(flags)?;
                Configured::Provisioner(provisioner::start::Config::from_args(args).map_err(refused)?)
            }
            Kind::Resizer => {
                let args = try_parse_from(argv).map_err(flags)?;
                Configured::Resizer(resizer::start::Config::from_args(args).map_err(refused)?)
            }
            Kind::Snapshotter => {
                let args = try_parse_from(argv).map_err(flags)?;
                Configured::Snapshotter(snapshot_binaries::snapshotter::Config::from_args(args).map_err(refused)?)
            }
            Kind::GroupSnapshotter => {
                let args = try_parse_from(argv).map_err(flags)?;
                let config = snapshot_binaries::group_snapshotter::config(args).map_err(refused)?;
                Configured::GroupSnapshotter(config)
            }
            Kind::Attacher => {
                let args = try_parse_from(argv).map_err(flags)?;
                Configured::Attacher(attacher::start::Config::from_args(args).map_err(refused)?)
            }
            Kind::LivenessProbe => {
                let args = try_parse_from(argv).map_err(flags)?;
                Configured::LivenessProbe(crate::node::LivenessProbe::from_args(args).map_err(refused)?)
            }
            Kind::Registrar => {
                let args = try_parse_from(argv).map_err(flags)?;
                Configured::Registrar(crate::node::Registrar::from_args(args).map_err(refused)?)
            }
        })
    }

    pub fn kind(&self) -> Kind {
        match self {
            Configured::Provisioner(_) => Kind::Provisioner,
            Configured::Resizer(_) => Kind::Resizer,
            Configured::Snapshotter(_) => Kind::Snapshotter,
            Configured::GroupSnapshotter(_) => Kind::GroupSnapshotter,
            Configured::Attacher(_) => Kind::Attacher,
            Configured::LivenessProbe(_) => Kind::LivenessProbe,
            Configured::Registrar(_) => Kind::Registrar,
        }
    }

    /// Its `--timeout` (livenessprobe's `--probe-timeout`).
    pub fn timeout(&self) -> Duration {
        match self {
            Configured::Provisioner(config) => config.timeout(),
            Configured::Resizer(config) => config.timeout(),
            Configured::Snapshotter(config) => config.timeout(),
            Configured::GroupSnapshotter(config) => config.timeout(),
            Configured::Attacher(config) => config.timeout(),
            Configured::LivenessProbe(config) => config.timeout(),
            Configured::Registrar(config) => config.timeout(),
        }
    }

    /// Splits off the node pod's sidecars (livenessprobe, registrar), which [`crate::node::start`] starts.
    pub fn into_node_sidecar(self) -> Result<crate::node::NodeSidecar, Box<Configured>> {
        match self {
            Configured::LivenessProbe(config) => Ok(crate::node::NodeSidecar::LivenessProbe(config)),
            Configured::Registrar(config) => Ok(crate::node::NodeSidecar::Registrar(config)),
            other => Err(Box::new(other)),
        }
    }

    /// Starts a sidecar that runs under a Lease on the shared runtime and driver. `group_sidecar`:
    /// `group-snapshotter` runs too, so the snapshotter leaves the group loop to it (one loop per group content,
    /// under one Lease). The node pod's sidecars are started by [`crate::node::start`] instead.
    pub async fn start(
        self,
        sidecar: &mut Sidecar,
        driver: &Driver,
        group_sidecar: bool,
    ) -> Result<SidecarLoop, SetupError> {
        match self {
            Configured::Attacher(config) => attacher::start::start(config, sidecar, driver).await,
            Configured::LivenessProbe(_) | Configured::Registrar(_) => {
                Err(SetupError::message("livenessprobe and the registrar run under no Lease"))
            }
            Configured::Provisioner(config) => provisioner::start::start(config, sidecar, driver).await,
            Configured::Resizer(config) => resizer::start::start(config, sidecar, driver).await,
            Configured::Snapshotter(config) => {
                snapshot_binaries::snapshotter::start(config, sidecar, driver, !group_sidecar).await
            }
            Configured::GroupSnapshotter(config) => {
                snapshot_binaries::group_snapshotter::start(config, sidecar, driver).await
            }
        }
    }
}

/// The Lease of `--leader-election-shared`: `csi-sidecars-<driver>`, sanitized as upstream's Lease names are.
pub fn shared_lease_name(driver: &str) -> String {
    sidecar_runtime::leader_election::sanitize_name(&format!("csi-sidecars-{driver}"))
}
