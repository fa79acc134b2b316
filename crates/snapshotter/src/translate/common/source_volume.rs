//! The volume a dynamic snapshot is taken of, for its default class and its content: the claim named by the
//! snapshot, which must be Bound, and its PersistentVolume, which must be bound back to the claim and be a CSI volume
//! (external-snapshotter pkg/common-controller/snapshot_controller.go, getVolumeFromVolumeSnapshot).
//!
//! The controller reads in between: the claim from its lister after [`source_claim_name`], the volume with a GET
//! after [`volume_to_read`]. The error texts are upstream's; they end up in `status.error` and in events.

use k8s_openapi::api::core::v1::{CSIPersistentVolumeSource, PersistentVolume, PersistentVolumeClaim};
use kube::ResourceExt;
use snapshot_api::VolumeSnapshot;

use super::names::{go_quoted, snapshot_key};

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SourceVolumeError {
    #[error("the snapshot source PVC name is not specified")]
    NoClaimSource,
    #[error("the PVC name is not specified in snapshot {0}")]
    EmptyClaimName(String),
    /// `error` is the lister's error text (e.g. [`super::names::not_found_text`]).
    #[error("failed to retrieve PVC {name} from the lister: {}", go_quoted(.error))]
    ClaimNotRead { name: String, error: String },
    #[error("the PVC {0} is not yet bound to a PV, will not attempt to take a snapshot")]
    ClaimNotBound(String),
    /// `error` is the API error text of the GET.
    #[error("failed to retrieve PV {name} from the API server: {}", go_quoted(.error))]
    VolumeNotRead { name: String, error: String },
    #[error("claim in dataSource not bound or invalid")]
    BindingBroken,
    /// Found while looking for the default class.
    #[error("snapshotting non-CSI volumes is not supported, snapshot:{0}")]
    NotCsi(String),
    /// Found while building the content.
    #[error("cannot find CSI PersistentVolumeSource for volume {0}")]
    NoCsiSource(String),
}

/// The claim to read: `spec.source.persistentVolumeClaimName`.
pub fn source_claim_name(snapshot: &VolumeSnapshot) -> Result<&str, SourceVolumeError> {
    match snapshot.spec.source.persistent_volume_claim_name.as_deref() {
        None => Err(SourceVolumeError::NoClaimSource),
        Some("") => Err(SourceVolumeError::EmptyClaimName(snapshot_key(snapshot))),
        Some(name) => Ok(name),
    }
}

/// The volume to GET: the claim must be in phase `Bound`.
pub fn volume_to_read(claim: &PersistentVolumeClaim) -> Result<&str, SourceVolumeError> {
    let phase = claim.status.as_ref().and_then(|s| s.phase.as_deref());
    if phase != Some("Bound") {
        return Err(SourceVolumeError::ClaimNotBound(claim.name_any()));
    }
    Ok(claim.spec.as_ref().and_then(|s| s.volume_name.as_deref()).unwrap_or_default())
}

/// The volume read must be bound to the claim: same namespace and name in its `claimRef`, and the same UID when
/// the `claimRef` has one (a volume pre-bound by name only is fine).
pub fn verify_binding(volume: &PersistentVolume, claim: &PersistentVolumeClaim) -> Result<(), SourceVolumeError> {
    let Some(reference) = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
        return Err(SourceVolumeError::BindingBroken);
    };
    let uid = reference.uid.as_deref().unwrap_or_default();
    let bound = reference.name.as_deref().unwrap_or_default() == claim.name_any()
        && reference.namespace.as_deref().unwrap_or_default() == claim.namespace().unwrap_or_default()
        && (uid.is_empty() || uid == claim.uid().unwrap_or_default());
    if bound { Ok(()) } else { Err(SourceVolumeError::BindingBroken) }
}

/// The volume's CSI source; `Err(NotCsi)` names the snapshot, as the default-class lookup reports it.
pub fn csi_source<'a>(
    volume: &'a PersistentVolume,
    snapshot: &VolumeSnapshot,
) -> Result<&'a CSIPersistentVolumeSource, SourceVolumeError> {
    volume.spec.as_ref().and_then(|s| s.csi.as_ref()).ok_or_else(|| SourceVolumeError::NotCsi(snapshot_key(snapshot)))
}

/// The three checks in order, for a controller that has read both objects (`Err` holds the read's error text).
pub fn source_volume<'a>(
    snapshot: &VolumeSnapshot,
    claim: Result<&PersistentVolumeClaim, String>,
    volume: impl FnOnce(&str) -> Result<&'a PersistentVolume, String>,
) -> Result<&'a PersistentVolume, SourceVolumeError> {
    let claim_name = source_claim_name(snapshot)?;
    let claim = claim.map_err(|error| SourceVolumeError::ClaimNotRead { name: claim_name.to_string(), error })?;
    let volume_name = volume_to_read(claim)?;
    let volume = volume(volume_name)
        .map_err(|error| SourceVolumeError::VolumeNotRead { name: volume_name.to_string(), error })?;
    verify_binding(volume, claim)?;
    Ok(volume)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::translate::common::fixtures::*;
    use crate::translate::common::names::not_found_text;

    #[test]
    fn source_volume_checks() {
        let vs = snapshot_of_claim("ns", "snap", "uid-1", "data");
        let bound = claim("ns", "data", "c-1", "pv-1", "Bound");
        let pending = claim("ns", "data", "c-1", "", "Pending");
        let good = csi_volume("pv-1", "ns", "data", "c-1");
        let prebound_by_name = csi_volume("pv-1", "ns", "data", "");
        let other_uid = csi_volume("pv-1", "ns", "data", "c-2");
        let other_namespace = csi_volume("pv-1", "other", "data", "c-1");
        let mut unbound = good.clone();
        unbound.spec.as_mut().unwrap().claim_ref = None;
        let mut empty_name = vs.clone();
        empty_name.spec.source.persistent_volume_claim_name = Some(String::new());
        let preprovisioned = snapshot_of_content("ns", "snap", "uid-1", "content");
        let missing = || Err(not_found_text("persistentvolumeclaim", "data"));

        // (rule, snapshot, claim read, volume read, result)
        type Row<'a> = (
            &'a str,
            &'a VolumeSnapshot,
            Result<&'a PersistentVolumeClaim, String>,
            Option<&'a PersistentVolume>,
            Result<(), &'a str>,
        );
        let table: Vec<Row> = vec![
            ("bound claim and volume", &vs, Ok(&bound), Some(&good), Ok(())),
            ("claimRef without uid is fine", &vs, Ok(&bound), Some(&prebound_by_name), Ok(())),
            (
                "no claim source",
                &preprovisioned,
                Ok(&bound),
                Some(&good),
                Err("the snapshot source PVC name is not specified"),
            ),
            (
                "empty claim name",
                &empty_name,
                Ok(&bound),
                Some(&good),
                Err("the PVC name is not specified in snapshot ns/snap"),
            ),
            (
                "claim missing",
                &vs,
                missing(),
                Some(&good),
                Err(r#"failed to retrieve PVC data from the lister: "persistentvolumeclaim \"data\" not found""#),
            ),
            (
                "claim not Bound",
                &vs,
                Ok(&pending),
                Some(&good),
                Err("the PVC data is not yet bound to a PV, will not attempt to take a snapshot"),
            ),
            (
                "volume missing",
                &vs,
                Ok(&bound),
                None,
                Err(r#"failed to retrieve PV pv-1 from the API server: "persistentvolumes \"pv-1\" not found""#),
            ),
            (
                "claimRef uid differs",
                &vs,
                Ok(&bound),
                Some(&other_uid),
                Err("claim in dataSource not bound or invalid"),
            ),
            (
                "claimRef namespace differs",
                &vs,
                Ok(&bound),
                Some(&other_namespace),
                Err("claim in dataSource not bound or invalid"),
            ),
            ("no claimRef", &vs, Ok(&bound), Some(&unbound), Err("claim in dataSource not bound or invalid")),
        ];
        for (rule, snapshot, claim, volume, want) in table {
            let got = source_volume(snapshot, claim, |name| {
                volume.ok_or_else(|| r#"persistentvolumes "NAME" not found"#.replace("NAME", name))
            });
            assert_eq!(got.map(|_| ()).map_err(|e| e.to_string()), want.map_err(str::to_string), "{rule}");
        }
    }

    #[test]
    fn only_csi_volumes() {
        let vs = snapshot_of_claim("ns", "snap", "uid-1", "data");
        let volume = csi_volume("pv-1", "ns", "data", "c-1");
        assert_eq!(csi_source(&volume, &vs).unwrap().driver, DRIVER);
        let mut host_path = volume;
        host_path.spec.as_mut().unwrap().csi = None;
        assert_eq!(
            csi_source(&host_path, &vs).unwrap_err().to_string(),
            "snapshotting non-CSI volumes is not supported, snapshot:ns/snap"
        );
    }
}
