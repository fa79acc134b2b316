//! The claim's data source, normalised (`spec.dataSource` first, else `spec.dataSourceRef`), and what kind of content
//! it asks for (external-provisioner `dataSource` and `getVolumeContentSource`).
//!
//! Checking the source objects themselves (snapshot readiness, clone source state, ReferenceGrants) needs the API
//! and is the controller's; it ends in a CSI `VolumeContentSource` passed to the request builder.

use csi_client::proto::VolumeContentSource;
use csi_client::proto::volume_content_source::{SnapshotSource, Type, VolumeSource};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;

use super::names::{KIND_PERSISTENT_VOLUME_CLAIM, KIND_VOLUME_SNAPSHOT, SNAPSHOT_API_GROUP};
use super::refusal::Refusal;

/// `spec.dataSource`, else `spec.dataSourceRef`, with the namespace filled in.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DataSource {
    pub kind: String,
    pub name: String,
    /// Empty for the core group.
    pub api_group: String,
    pub namespace: String,
}

/// What the provisioner does with a data source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContentKind {
    /// Restore from a VolumeSnapshot (needs CREATE_DELETE_SNAPSHOT).
    Snapshot,
    /// Clone a PersistentVolumeClaim (needs CLONE_VOLUME).
    Clone,
}

/// The claim's data source. A `dataSourceRef` into another namespace needs the CrossNamespaceVolumeDataSource gate
/// (then a ReferenceGrant, checked by the controller).
pub fn claim_data_source(
    claim: &PersistentVolumeClaim,
    cross_namespace_volume_data_source: bool,
) -> Result<Option<DataSource>, Refusal> {
    let claim_namespace = claim.metadata.namespace.clone().unwrap_or_default();
    let Some(spec) = claim.spec.as_ref() else { return Ok(None) };
    if let Some(source) = &spec.data_source {
        return Ok(Some(DataSource {
            kind: source.kind.clone(),
            name: source.name.clone(),
            api_group: source.api_group.clone().unwrap_or_default(),
            namespace: claim_namespace,
        }));
    }
    let Some(source) = &spec.data_source_ref else { return Ok(None) };
    let namespace = source.namespace.clone().filter(|n| !n.is_empty());
    if namespace.is_some() && !cross_namespace_volume_data_source {
        return Err(Refusal::finished(
            "dataSourceRef namespace specified but the CrossNamespaceVolumeDataSource feature is disabled",
        ));
    }
    Ok(Some(DataSource {
        kind: source.kind.clone(),
        name: source.name.clone(),
        api_group: source.api_group.clone().unwrap_or_default(),
        // Upstream keeps an empty namespace as "" and then looks for a ReferenceGrant in it; it is the claim's here.
        namespace: namespace.unwrap_or(claim_namespace),
    }))
}

/// Whether `claim` names the object `namespace/name` of `kind` in API group `group` ("" for core) as its data
/// source, through `dataSource` or a (possibly cross-namespace) `dataSourceRef`.
pub fn refers_to(claim: &PersistentVolumeClaim, kind: &str, group: &str, namespace: &str, name: &str) -> bool {
    let claim_namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
    let Some(spec) = claim.spec.as_ref() else { return false };
    let matches = |source_kind: &str, source_group: Option<&str>, source_name: &str| {
        source_kind == kind && source_group.unwrap_or_default() == group && source_name == name
    };
    if let Some(source) = &spec.data_source
        && matches(&source.kind, source.api_group.as_deref(), &source.name)
        && claim_namespace == namespace
    {
        return true;
    }
    spec.data_source_ref.as_ref().is_some_and(|source| {
        let source_namespace = source.namespace.as_deref().filter(|n| !n.is_empty()).unwrap_or(claim_namespace);
        matches(&source.kind, source.api_group.as_deref(), &source.name) && source_namespace == namespace
    })
}

/// Snapshot, clone, or (any other kind) an external populator's business: a Normal event and nothing more.
pub fn content_kind(source: &DataSource, claim_name: &str) -> Result<ContentKind, Refusal> {
    if source.name.is_empty() {
        return Err(Refusal::finished(format!("the PVC source not found for PVC {claim_name}")));
    }
    match source.kind.as_str() {
        KIND_VOLUME_SNAPSHOT if source.api_group != SNAPSHOT_API_GROUP => Err(Refusal::finished(format!(
            "the PVC source does not belong to the right APIGroup. Expected {SNAPSHOT_API_GROUP}, Got {}",
            source.api_group
        ))),
        KIND_VOLUME_SNAPSHOT => Ok(ContentKind::Snapshot),
        KIND_PERSISTENT_VOLUME_CLAIM => Ok(ContentKind::Clone),
        other => Err(Refusal::external_populator(other)),
    }
}

/// The CSI content source for a restore from `snapshot_handle`.
pub fn snapshot_content_source(snapshot_handle: &str) -> VolumeContentSource {
    VolumeContentSource { r#type: Some(Type::Snapshot(SnapshotSource { snapshot_id: snapshot_handle.to_string() })) }
}

/// The CSI content source for a clone of the volume `volume_handle`.
pub fn volume_content_source(volume_handle: &str) -> VolumeContentSource {
    VolumeContentSource { r#type: Some(Type::Volume(VolumeSource { volume_id: volume_handle.to_string() })) }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{PersistentVolumeClaimSpec, TypedLocalObjectReference, TypedObjectReference};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::translate::refusal::{ProvisioningState, RefusalKind};

    fn claim(
        source: Option<TypedLocalObjectReference>,
        source_ref: Option<TypedObjectReference>,
    ) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("restored".into()),
                namespace: Some("apps".into()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                data_source: source,
                data_source_ref: source_ref,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn local(kind: &str, group: Option<&str>, name: &str) -> TypedLocalObjectReference {
        TypedLocalObjectReference { kind: kind.into(), api_group: group.map(str::to_string), name: name.into() }
    }

    fn typed(kind: &str, group: Option<&str>, name: &str, namespace: Option<&str>) -> TypedObjectReference {
        TypedObjectReference {
            kind: kind.into(),
            api_group: group.map(str::to_string),
            name: name.into(),
            namespace: namespace.map(str::to_string),
        }
    }

    fn source(kind: &str, group: &str, name: &str, namespace: &str) -> DataSource {
        DataSource { kind: kind.into(), name: name.into(), api_group: group.into(), namespace: namespace.into() }
    }

    #[test]
    fn normalised_sources() {
        let snap = Some("snapshot.storage.k8s.io");
        // (rule, claim, gate, result)
        let table = [
            ("50: no source", claim(None, None), false, Ok(None)),
            (
                "50: dataSource in the claim's namespace",
                claim(Some(local("VolumeSnapshot", snap, "s1")), None),
                false,
                Ok(Some(source("VolumeSnapshot", "snapshot.storage.k8s.io", "s1", "apps"))),
            ),
            (
                "50: dataSource preferred over dataSourceRef",
                claim(
                    Some(local("PersistentVolumeClaim", None, "a")),
                    Some(typed("PersistentVolumeClaim", None, "b", None)),
                ),
                false,
                Ok(Some(source("PersistentVolumeClaim", "", "a", "apps"))),
            ),
            (
                "50: dataSourceRef alone",
                claim(None, Some(typed("Populated", Some("example.com"), "p", None))),
                false,
                Ok(Some(source("Populated", "example.com", "p", "apps"))),
            ),
            (
                "50: cross-namespace ref refused with the gate off",
                claim(None, Some(typed("VolumeSnapshot", snap, "s", Some("other")))),
                false,
                Err("dataSourceRef namespace specified but the CrossNamespaceVolumeDataSource feature is disabled"
                    .to_string()),
            ),
            (
                "50: cross-namespace ref with the gate on",
                claim(None, Some(typed("VolumeSnapshot", snap, "s", Some("other")))),
                true,
                Ok(Some(source("VolumeSnapshot", "snapshot.storage.k8s.io", "s", "other"))),
            ),
            (
                "50: empty namespace is the claim's",
                claim(None, Some(typed("VolumeSnapshot", snap, "s", Some("")))),
                false,
                Ok(Some(source("VolumeSnapshot", "snapshot.storage.k8s.io", "s", "apps"))),
            ),
        ];
        for (rule, claim, gate, want) in table {
            let got = claim_data_source(&claim, gate).map_err(|r| {
                assert_eq!(r.state, ProvisioningState::Finished, "{rule}");
                r.message
            });
            assert_eq!(got, want, "{rule}");
        }
    }

    #[test]
    fn references_to_a_source() {
        let snap = Some("snapshot.storage.k8s.io");
        // (rule, claim (namespace apps), kind, group, namespace, name, refers)
        let table = [
            (
                "dataSource in the claim's namespace",
                claim(Some(local("PersistentVolumeClaim", None, "a")), None),
                "PersistentVolumeClaim",
                "",
                "apps",
                "a",
                true,
            ),
            (
                "dataSource is never elsewhere",
                claim(Some(local("PersistentVolumeClaim", None, "a")), None),
                "PersistentVolumeClaim",
                "",
                "other",
                "a",
                false,
            ),
            (
                "another name",
                claim(Some(local("PersistentVolumeClaim", None, "a")), None),
                "PersistentVolumeClaim",
                "",
                "apps",
                "b",
                false,
            ),
            (
                "another group",
                claim(Some(local("VolumeSnapshot", Some("example.com"), "s")), None),
                "VolumeSnapshot",
                "snapshot.storage.k8s.io",
                "apps",
                "s",
                false,
            ),
            (
                "dataSourceRef without namespace",
                claim(None, Some(typed("VolumeSnapshot", snap, "s", None))),
                "VolumeSnapshot",
                "snapshot.storage.k8s.io",
                "apps",
                "s",
                true,
            ),
            (
                "dataSourceRef into another namespace",
                claim(None, Some(typed("PersistentVolumeClaim", None, "a", Some("src")))),
                "PersistentVolumeClaim",
                "",
                "src",
                "a",
                true,
            ),
            (
                "dataSourceRef not in the claim's namespace",
                claim(None, Some(typed("PersistentVolumeClaim", None, "a", Some("src")))),
                "PersistentVolumeClaim",
                "",
                "apps",
                "a",
                false,
            ),
            ("no source", claim(None, None), "PersistentVolumeClaim", "", "apps", "a", false),
        ];
        for (rule, claim, kind, group, namespace, name, want) in table {
            assert_eq!(refers_to(&claim, kind, group, namespace, name), want, "{rule}");
        }
    }

    #[test]
    fn content_kinds() {
        // (rule, source, result: Ok(kind) | Err((message, ignored)))
        let table = [
            ("51: snapshot", source("VolumeSnapshot", "snapshot.storage.k8s.io", "s", "ns"), Ok(ContentKind::Snapshot)),
            ("51: clone", source("PersistentVolumeClaim", "", "c", "ns"), Ok(ContentKind::Clone)),
            (
                "51: snapshot of the wrong group",
                source("VolumeSnapshot", "example.com", "s", "ns"),
                Err(("the PVC source does not belong to the right APIGroup. Expected snapshot.storage.k8s.io, Got example.com".to_string(), false)),
            ),
            (
                "51: empty name",
                source("VolumeSnapshot", "snapshot.storage.k8s.io", "", "ns"),
                Err(("the PVC source not found for PVC restored".to_string(), false)),
            ),
            (
                "51: other kinds go to an external populator",
                source("Populated", "example.com", "p", "ns"),
                Err(("data source (Populated) is not handled by the provisioner, assuming an external populator will provision it".to_string(), true)),
            ),
        ];
        for (rule, source, want) in table {
            let got = content_kind(&source, "restored")
                .map_err(|r| (r.message, matches!(r.kind, RefusalKind::Ignored { event: Some(_) })));
            assert_eq!(got, want, "{rule}");
        }
        assert_eq!(
            snapshot_content_source("snap-1").r#type,
            Some(Type::Snapshot(SnapshotSource { snapshot_id: "snap-1".into() })),
            "52: content source = snapshot handle"
        );
        assert_eq!(
            volume_content_source("vol-1").r#type,
            Some(Type::Volume(VolumeSource { volume_id: "vol-1".into() })),
            "55: content source = source volume handle"
        );
    }
}
