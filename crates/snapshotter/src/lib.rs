//! Snapshots of single volumes, split as upstream splits them so that existing deployments map one to one:
//!
//! - the **snapshot-controller** (one per cluster) binds VolumeSnapshots to VolumeSnapshotContents, creates the
//!   content of a dynamic snapshot, keeps the finalizers and carries the content's status back to the snapshot;
//! - **csi-snapshotter** (beside each driver) cuts and deletes the snapshots of its driver's contents.
//!
//! - [`translate`]: the pure rules of both (upstream: kubernetes-csi/external-snapshotter pkg/common-controller and
//!   pkg/sidecar-controller).
//! - [`flags`]: the command lines of both (upstream: cmd/snapshot-controller/main.go, cmd/csi-snapshotter/main.go).
//! - [`controller`]: the I/O halves: watches, queues, driver calls and writes.
//! - [`start`]: the wiring of both: checked flags, then the loops on a started runtime.
pub mod controller;
pub mod flags;
pub mod start;
pub mod translate;
