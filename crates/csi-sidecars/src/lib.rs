//! `csi-sidecars`: any set of the sidecars in one process. Each sidecar is wired by its own crate's `start` (the
//! same code its single binary runs); this crate only splits the command line between them ([`flags`]) and starts
//! them on one runtime ([`sidecars`]): one Kubernetes client, one driver connection, one watch cache per kind, one
//! `/metrics` and health endpoint, one Lease per sidecar (or one for all with `--leader-election-shared`). The
//! sidecars without a Lease (livenessprobe, the registrar) are [`node`]'s.

pub mod flags;
pub mod node;
pub mod sidecars;
