//! VolumeGroupSnapshots: several claims snapshotted together by one CreateVolumeGroupSnapshot call. Upstream splits
//! the work between two programs, and so does this crate:
//!
//! - the **snapshot-controller** (one per cluster) picks the claims, the class and creates the
//!   VolumeGroupSnapshotContent, then turns the driver's answer into one VolumeSnapshot and VolumeSnapshotContent per
//!   member and carries the status back to the VolumeGroupSnapshot;
//! - **csi-snapshotter** (beside each driver) calls CreateVolumeGroupSnapshot and DeleteVolumeGroupSnapshot for its
//!   driver's group contents.
//!
//! - [`translate`]: the pure rules of both, with the upstream function each follows where it helps
//!   (kubernetes-csi/external-snapshotter, pkg/common-controller and pkg/sidecar-controller).
//! - [`controller`]: the watches, queues and writes that carry them out.
//! - [`start`]: the wiring of both loops, for the binaries and `csi-sidecars`.
pub mod controller;
pub mod start;
pub mod translate;
