//! `csi-sidecars`: any set of the sidecars in one process. Each sidecar is described and wired by its own crate
//! (`sidecar_runtime::Described`: the same `Config::from_args` and `start` its single binary runs) and registered
//! in [`sidecars::SIDECARS`]; this crate only splits the command line between them ([`flags`]) and starts them on
//! one runtime: one Kubernetes client, one driver connection, one watch cache per kind, one `/metrics` and health
//! endpoint, one Lease per sidecar (or one for all with `--leader-election-shared`). A set of sidecars none of
//! which uses Kubernetes (livenessprobe, the registrar) runs without a client ([`node`]).

pub mod flags;
pub mod node;
pub mod sidecars;
