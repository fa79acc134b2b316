//! What every CSI sidecar shares, written once so that a driver author can
//! swap the upstream images for ours by changing only the image: the same
//! flags, Lease names, metric names, health endpoints and events.
//!
//! - [`flags`]: the common command line, in Go syntax (`-csi-address=/x`, `--v=5`, `15s`).
//! - [`kube_client`] and [`rate_limit`]: the Kubernetes client with client-go's QPS/burst limit.
//! - [`leader_election`]: Lease-based leader election that interoperates with client-go.
//! - [`http`]: `/metrics`, `/healthz`, `/healthz/leader-election`; [`rest_metrics`] and [`process_metrics`]: the
//!   `rest_client_*` and `process_*` series client-go and Prometheus' Go client export from upstream's sidecars.
//! - [`watch`]: watch caches, one per kind for the whole process ([`watch::CacheProvider`]), and the loop that
//!   fills them before any worker starts.
//! - [`queue`]: the controllers' deduplicating work queue with per-key backoff.
//! - [`control_loop`]: the one loop every controller declares ([`Loop`]): caches, queues and workers, resyncs, tasks.
//! - [`names`]: Kubernetes and CSI names more than one sidecar uses.
//! - [`node_affinity`]: which nodes a PersistentVolume's node affinity admits, as Kubernetes reads a NodeSelector.
//! - [`object_names`]: Kubernetes' DNS-1123 rules for the names and namespaces templates resolve to.
//! - [`quantity`]: Kubernetes quantities as byte counts and back.
//! - [`snapshot_operations`]: the snapshot-controller's operation histogram, shared by its single and group loops.
//! - [`time`]: the current time as Kubernetes objects record it.
//! - [`update`]: guarded updates (the verb upstream's roles grant), and finalizers added and removed with them.
//! - [`events`]: core/v1 Events as client-go records them.
//! - [`journal`]: work in flight remembered in one Lease, written with group commit.
//! - [`logging`]: tracing to stderr, text or JSON, verbosity from `-v`.
//! - [`shutdown`] and [`run`]: SIGTERM handling, draining, leading while running.
//! - [`supervise`]: one or several sidecars' controllers in one process, which stops when one of them fails.
//! - [`Sidecar::connect_driver`]: the CSI driver connection every sidecar opens the same way.
//! - [`Sidecar`]: the handful of calls a sidecar's `main.rs` makes.

pub mod api_error;
pub mod control_loop;
pub mod describe;
mod driver;
pub mod events;
pub mod flags;
pub mod go_expand;
pub mod http;
pub mod journal;
pub mod kube_client;
pub mod leader_election;
pub mod logging;
pub mod names;
pub mod node_affinity;
pub mod object_names;
pub mod process_metrics;
pub mod quantity;
pub mod queue;
pub mod rate_limit;
pub mod rest_metrics;
pub mod run;
pub mod secrets;
pub mod setup;
pub mod shutdown;
mod sidecar;
pub mod snapshot_operations;
pub mod supervise;
pub mod time;
pub mod update;
pub mod watch;

pub use control_loop::Loop;
pub use describe::{Beside, ConfigError, Configured, Described, Description, Registration, Started, register};
pub use driver::{Driver, DriverError, wait_for_driver, wait_for_socket};
pub use events::{EventRecorder, EventType, PlannedEvent, object_reference};
pub use flags::{CommonArgs, FeatureGates, LoggingFormat, RetryArgs, StandardArgs};
pub use queue::{Outcome, QueueMetrics, RetryPolicy, WorkItem, WorkQueue};
pub use run::{LeadershipLost, RELEASE_LEADER_ELECTION_ON_EXIT};
pub use setup::{SetupError, SetupResult};
pub use shutdown::Shutdown;
pub use sidecar::{Sidecar, StartError};
pub use supervise::{SidecarFailure, SidecarLoop};
