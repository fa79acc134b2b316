//! Which PersistentVolumes are monitored and where their reports go (external-health-monitor
//! pkg/controller/pv_monitor_controller.go AddPVsToQueue and checkPVWorker, pkg/csi-handler/pv_checker.go).

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};

/// A monitored volume: its CSI volume handle and the claim its reports go to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Monitored {
    pub volume_handle: String,
    pub claim_namespace: String,
    pub claim_name: String,
}

impl Monitored {
    /// The claim's `namespace/name`.
    pub fn claim_key(&self) -> String {
        format!("{}/{}", self.claim_namespace, self.claim_name)
    }
}

/// Whether a PV is this driver's CSI volume (the PVs queued, whatever their phase).
pub fn is_drivers(volume: &PersistentVolume, driver: &str) -> bool {
    volume.spec.as_ref().and_then(|s| s.csi.as_ref()).is_some_and(|csi| csi.driver == driver)
}

/// What a PV's health is checked for: this driver's, Bound, not being deleted, with a volume handle and a claim
/// reference; `None` otherwise.
pub fn monitored(volume: &PersistentVolume, driver: &str) -> Option<Monitored> {
    if !is_drivers(volume, driver) || volume.metadata.deletion_timestamp.is_some() {
        return None;
    }
    if volume.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Bound") {
        return None;
    }
    let spec = volume.spec.as_ref()?;
    let handle = spec.csi.as_ref().map(|csi| csi.volume_handle.clone()).filter(|h| !h.is_empty())?;
    let claim = spec.claim_ref.as_ref()?;
    Some(Monitored {
        volume_handle: handle,
        claim_namespace: claim.namespace.clone().filter(|n| !n.is_empty())?,
        claim_name: claim.name.clone().filter(|n| !n.is_empty())?,
    })
}

/// Whether a change of a PV queues it: a new PV, or one that became monitored (bound) since.
pub fn update_needs_sync(old: Option<&PersistentVolume>, new: &PersistentVolume, driver: &str) -> bool {
    let now = monitored(new, driver);
    now.is_some() && old.is_none_or(|old| monitored(old, driver) != now)
}

/// The claim UID reports are remembered by.
pub fn claim_uid(claim: &PersistentVolumeClaim) -> String {
    claim.metadata.uid.clone().unwrap_or_default()
}

#[cfg(test)]
pub(crate) mod tests {
    use k8s_openapi::api::core::v1::{
        CSIPersistentVolumeSource, ObjectReference, PersistentVolumeSpec, PersistentVolumeStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    use super::*;

    pub(crate) fn volume(driver: &str, handle: &str, phase: &str, claim: Option<(&str, &str)>) -> PersistentVolume {
        PersistentVolume {
            metadata: ObjectMeta { name: Some("pv-1".into()), ..Default::default() },
            spec: Some(PersistentVolumeSpec {
                csi: Some(CSIPersistentVolumeSource {
                    driver: driver.into(),
                    volume_handle: handle.into(),
                    ..Default::default()
                }),
                claim_ref: claim.map(|(namespace, name)| ObjectReference {
                    namespace: Some(namespace.into()),
                    name: Some(name.into()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            status: Some(PersistentVolumeStatus { phase: Some(phase.into()), ..Default::default() }),
        }
    }

    const D: &str = "hostpath.csi.k8s.io";

    #[test]
    fn which_volumes_are_monitored() {
        let bound = volume(D, "vol-1", "Bound", Some(("ns", "claim")));
        let mut deleting = bound.clone();
        deleting.metadata.deletion_timestamp = Some(Time(Default::default()));
        let mut in_tree = bound.clone();
        in_tree.spec.as_mut().unwrap().csi = None;
        let rows = [
            ("a bound PV of the driver", bound.clone(), true),
            ("another driver's PV", volume("other.csi", "vol-1", "Bound", Some(("ns", "claim"))), false),
            ("a PV without a CSI source", in_tree, false),
            ("a PV not bound (Released)", volume(D, "vol-1", "Released", Some(("ns", "claim"))), false),
            ("a PV not bound (Available)", volume(D, "vol-1", "Available", None), false),
            ("a PV being deleted", deleting, false),
            ("a PV without a volume handle", volume(D, "", "Bound", Some(("ns", "claim"))), false),
            ("a bound PV without a claim reference", volume(D, "vol-1", "Bound", None), false),
        ];
        for (rule, pv, want) in rows {
            assert_eq!(monitored(&pv, D).is_some(), want, "{rule}");
        }
        let m = monitored(&bound, D).unwrap();
        assert_eq!((m.volume_handle.as_str(), m.claim_key()), ("vol-1", "ns/claim".to_string()));
    }

    #[test]
    fn which_changes_queue() {
        let available = volume(D, "vol-1", "Available", None);
        let bound = volume(D, "vol-1", "Bound", Some(("ns", "claim")));
        assert!(update_needs_sync(None, &bound, D), "a new bound PV");
        assert!(update_needs_sync(Some(&available), &bound, D), "a PV that became bound");
        assert!(!update_needs_sync(Some(&bound), &bound, D), "an unchanged bound PV: the resync queues it");
        assert!(!update_needs_sync(None, &available, D), "a PV not bound");
    }
}
