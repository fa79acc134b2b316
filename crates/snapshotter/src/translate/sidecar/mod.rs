//! csi-snapshotter's rules (external-snapshotter pkg/sidecar-controller): what the sidecar beside a CSI driver does
//! with each VolumeSnapshotContent of that driver, in the order a sync takes them.
//!
//! 1. [`filter`]: which contents are ours, and which update events are worth a sync.
//! 2. [`sync::sync_step`]: delete, create, poll for readiness, or nothing.
//! 3. Deleting ([`deletion`]): DeleteSnapshot while the policy says so, clear the status, drop the finalizer.
//! 4. Creating ([`creation`]): the being-created annotation first, then CreateSnapshot; [`outcome`] turns the answer
//!    (or the error, final or not) into the status to write and the annotation to drop.
//! 5. Polling ([`readiness`]): CreateSnapshot again for a dynamic content, ListSnapshots for a pre-provisioned one or
//!    a group member.
//!
//! Writes are values ([`patch`]); Secrets are references ([`secrets`]); events are
//! [`PlannedEvent`](sidecar_runtime::events::PlannedEvent)s.

pub mod content;
pub mod creation;
pub mod deletion;
pub mod filter;
pub mod outcome;
pub mod patch;
pub mod readiness;
pub mod secrets;
pub mod sync;

#[cfg(test)]
mod fixtures;

pub use sidecar_runtime::leader_election::snapshotter_lease_name as lease_name;

/// The flags and driver facts every rule of the sidecar reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshotter {
    /// The driver's name from GetPluginInfo.
    pub driver_name: String,
    /// `--snapshot-name-prefix`.
    pub snapshot_name_prefix: String,
    /// `--snapshot-name-uuid-length`: -1 keeps the whole UID.
    pub snapshot_name_uuid_length: i64,
    /// `--extra-create-metadata`.
    pub extra_create_metadata: bool,
    /// Whether ControllerGetCapabilities listed LIST_SNAPSHOTS.
    pub list_snapshots: bool,
}

impl Snapshotter {
    /// The upstream defaults for `driver_name`.
    pub fn new(driver_name: &str) -> Snapshotter {
        Snapshotter {
            driver_name: driver_name.to_string(),
            snapshot_name_prefix: "snapshot".to_string(),
            snapshot_name_uuid_length: -1,
            extra_create_metadata: false,
            list_snapshots: false,
        }
    }

    /// The source component of the sidecar's events: `csi-snapshotter <driver>`.
    pub fn event_component(&self) -> String {
        format!("csi-snapshotter {}", self.driver_name)
    }

    /// The sidecar's leader-election Lease: `external-snapshotter-leader-<driver>`, sanitised.
    pub fn lease_name(&self) -> String {
        lease_name(&self.driver_name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_of_the_sidecar() {
        // (driver, event component, Lease)
        let table = [
            (
                "hostpath.csi.k8s.io",
                "csi-snapshotter hostpath.csi.k8s.io",
                "external-snapshotter-leader-hostpath-csi-k8s-io",
            ),
            ("example.com/csi_", "csi-snapshotter example.com/csi_", "external-snapshotter-leader-example-com-csi-X"),
        ];
        for (driver, component, lease) in table {
            let snapshotter = Snapshotter::new(driver);
            assert_eq!(snapshotter.event_component(), component);
            assert_eq!(snapshotter.lease_name(), lease);
        }
    }
}
