//! Cross-namespace data sources: a claim may use a source in another namespace only when a Gateway API ReferenceGrant
//! in that namespace allows it (external-provisioner pkg/controller/util.go, `IsGranted`).

pub use snapshot_api::reference_grant::{ReferenceGrant, ReferenceGrantFrom, ReferenceGrantSpec, ReferenceGrantTo};

use super::data_source::DataSource;
use super::names::KIND_PERSISTENT_VOLUME_CLAIM;
use super::refusal::Refusal;

/// Whether the source is in another namespace than the claim, so that a grant is needed.
pub fn needs_grant(claim_namespace: &str, source: &DataSource) -> bool {
    source.namespace != claim_namespace
}

/// Allows the claim `claim_namespace/claim_name` to use `source` when one of `grants` (those of the source's
/// namespace) lets PersistentVolumeClaims of the claim's namespace refer to it. A refusal leaves the claim waiting:
/// the grant may still come.
pub fn check_grant<'a>(
    claim_namespace: &str,
    claim_name: &str,
    source: &DataSource,
    grants: impl IntoIterator<Item = &'a ReferenceGrant>,
) -> Result<(), Refusal> {
    let granted = grants.into_iter().any(|grant| {
        let in_source_namespace = grant.metadata.namespace.as_deref() == Some(source.namespace.as_str());
        let from_claims = grant.spec.from.iter().any(|from| {
            from.group.is_empty() && from.kind == KIND_PERSISTENT_VOLUME_CLAIM && from.namespace == claim_namespace
        });
        let to_source = grant.spec.to.iter().any(|to| {
            to.group == source.api_group
                && to.kind == source.kind
                && to.name.as_deref().is_none_or(|name| name.is_empty() || name == source.name)
        });
        in_source_namespace && from_claims && to_source
    });
    if granted {
        return Ok(());
    }
    Err(Refusal::no_change(format!(
        "accessing {}/{} of {} dataSource from {claim_namespace}/{claim_name} isn't allowed",
        source.namespace, source.name, source.kind
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::translate::refusal::ProvisioningState;

    fn grant(namespace: &str, from: (&str, &str, &str), to: (&str, &str, Option<&str>)) -> ReferenceGrant {
        let mut grant = ReferenceGrant::new(
            "allow",
            ReferenceGrantSpec {
                from: vec![ReferenceGrantFrom { group: from.0.into(), kind: from.1.into(), namespace: from.2.into() }],
                to: vec![ReferenceGrantTo { group: to.0.into(), kind: to.1.into(), name: to.2.map(str::to_string) }],
            },
        );
        grant.metadata.namespace = Some(namespace.into());
        grant
    }

    fn snapshot_source() -> DataSource {
        DataSource {
            kind: "VolumeSnapshot".into(),
            name: "snap".into(),
            api_group: "snapshot.storage.k8s.io".into(),
            namespace: "src".into(),
        }
    }

    fn claim_source() -> DataSource {
        DataSource {
            kind: "PersistentVolumeClaim".into(),
            name: "data".into(),
            api_group: String::new(),
            namespace: "src".into(),
        }
    }

    #[test]
    fn grants() {
        let pvc_from = ("", "PersistentVolumeClaim", "apps");
        let snapshots = ("snapshot.storage.k8s.io", "VolumeSnapshot", None);
        // (rule, source, grants, allowed)
        let table = [
            ("57: no grant", snapshot_source(), vec![], false),
            ("57: a grant for every snapshot", snapshot_source(), vec![grant("src", pvc_from, snapshots)], true),
            (
                "57: a grant naming the snapshot",
                snapshot_source(),
                vec![grant("src", pvc_from, ("snapshot.storage.k8s.io", "VolumeSnapshot", Some("snap")))],
                true,
            ),
            (
                "57: an empty name grants every snapshot",
                snapshot_source(),
                vec![grant("src", pvc_from, ("snapshot.storage.k8s.io", "VolumeSnapshot", Some("")))],
                true,
            ),
            (
                "57: a grant naming another snapshot",
                snapshot_source(),
                vec![grant("src", pvc_from, ("snapshot.storage.k8s.io", "VolumeSnapshot", Some("other")))],
                false,
            ),
            ("57: a grant in another namespace", snapshot_source(), vec![grant("apps", pvc_from, snapshots)], false),
            (
                "57: a grant from another namespace",
                snapshot_source(),
                vec![grant("src", ("", "PersistentVolumeClaim", "elsewhere"), snapshots)],
                false,
            ),
            (
                "57: a grant from another kind",
                snapshot_source(),
                vec![grant("src", ("", "Pod", "apps"), snapshots)],
                false,
            ),
            (
                "57: a grant from a non-core group",
                snapshot_source(),
                vec![grant("src", ("example.com", "PersistentVolumeClaim", "apps"), snapshots)],
                false,
            ),
            (
                "57: a grant for claims",
                claim_source(),
                vec![grant("src", pvc_from, ("", "PersistentVolumeClaim", None))],
                true,
            ),
            (
                "57: a grant with a group does not cover core claims",
                claim_source(),
                vec![grant("src", pvc_from, ("example.com", "PersistentVolumeClaim", None))],
                false,
            ),
            (
                "57: a snapshot grant does not cover claims",
                claim_source(),
                vec![grant("src", pvc_from, snapshots)],
                false,
            ),
        ];
        for (rule, source, grants, allowed) in table {
            let result = check_grant("apps", "restored", &source, grants.iter());
            assert_eq!(result.is_ok(), allowed, "{rule}");
            if let Err(refusal) = result {
                assert_eq!(refusal.state, ProvisioningState::NoChange, "{rule}");
                assert_eq!(
                    refusal.message,
                    format!(
                        "accessing src/{} of {} dataSource from apps/restored isn't allowed",
                        source.name, source.kind
                    ),
                    "{rule}"
                );
            }
        }
        assert!(needs_grant("apps", &snapshot_source()));
        assert!(!needs_grant("src", &snapshot_source()));
    }
}
