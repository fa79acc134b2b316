//! What a VolumeSnapshot is of: exactly one source (upstream checks it in syncSnapshot). The CRD's CEL rules already
//! refuse anything else; this catches objects written before the rules or with validation off.

use snapshot_api::VolumeSnapshot;

use super::reasons::SNAPSHOT_VALIDATION_ERROR;
use super::status_error::SnapshotFailure;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnapshotSource<'a> {
    /// Dynamic: a snapshot of this claim, in the snapshot's namespace.
    Claim(&'a str),
    /// Pre-provisioned: bind to this VolumeSnapshotContent.
    Content(&'a str),
}

pub fn snapshot_source(snapshot: &VolumeSnapshot) -> Result<SnapshotSource<'_>, SnapshotFailure> {
    let source = &snapshot.spec.source;
    match (source.persistent_volume_claim_name.as_deref(), source.volume_snapshot_content_name.as_deref()) {
        (Some(claim), None) => Ok(SnapshotSource::Claim(claim)),
        (None, Some(content)) => Ok(SnapshotSource::Content(content)),
        _ => {
            let text = "Exactly one of PersistentVolumeClaimName and VolumeSnapshotContentName should be specified";
            Err(SnapshotFailure::status_error(SNAPSHOT_VALIDATION_ERROR, text, true, text.to_string()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::translate::common::fixtures::*;
    use crate::translate::common::status_error::Record;

    #[test]
    fn exactly_one_source() {
        let mut both = snapshot_of_claim("ns", "s", "u", "data");
        both.spec.source.volume_snapshot_content_name = Some("c".into());
        let mut neither = snapshot_of_claim("ns", "s", "u", "data");
        neither.spec.source.persistent_volume_claim_name = None;
        // (rule, snapshot, source or invalid)
        let table = [
            ("claim", snapshot_of_claim("ns", "s", "u", "data"), Some(SnapshotSource::Claim("data"))),
            ("content", snapshot_of_content("ns", "s", "u", "c"), Some(SnapshotSource::Content("c"))),
            ("both", both, None),
            ("neither", neither, None),
        ];
        for (rule, vs, want) in table {
            match (snapshot_source(&vs), want) {
                (Ok(got), Some(want)) => assert_eq!(got, want, "{rule}"),
                (Err(failure), None) => {
                    assert_eq!(failure.reason, "SnapshotValidationError", "{rule}");
                    assert_eq!(failure.record, Record::StatusError { ready_to_false: true }, "{rule}");
                    assert_eq!(
                        failure.message,
                        "Exactly one of PersistentVolumeClaimName and VolumeSnapshotContentName should be specified"
                    );
                }
                (got, want) => panic!("{rule}: got {got:?}, want {want:?}"),
            }
        }
    }
}
