//! The VolumeSnapshotContent of a dynamic snapshot, built as a value (external-snapshotter
//! pkg/common-controller/snapshot_controller.go, createSnapshotContent).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, PersistentVolume};
use kube::ResourceExt;
use sidecar_runtime::events::PlannedEvent;
use sidecar_runtime::node_affinity::node_matches;
use snapshot_api::names::{
    ANN_DELETION_SECRET_NAME, ANN_DELETION_SECRET_NAMESPACE, FINALIZER_VOLUME_SNAPSHOT_CONTENT_BOUND, LABEL_MANAGED_BY,
};
use snapshot_api::{
    VolumeSnapshot, VolumeSnapshotClass, VolumeSnapshotContent, VolumeSnapshotContentSource, VolumeSnapshotContentSpec,
};

use super::names::{dynamic_content_name, go_quoted, snapshot_key, snapshot_reference};
use super::reasons::{CREATE_SNAPSHOT_CONTENT_FAILED, CREATING_SNAPSHOT, SNAPSHOT_CONTENT_CREATION_FAILED};
use super::secrets::{SnapshotSecret, secret_reference};
use super::source_volume::SourceVolumeError;
use super::status_error::SnapshotFailure;

/// The controller's flags that shape a content.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContentOptions {
    /// `--prevent-volume-mode-conversion` (default true): record the volume's mode in `spec.sourceVolumeMode`.
    pub prevent_volume_mode_conversion: bool,
    /// `--enable-distributed-snapshotting`: the node matching the volume's node affinity ([`managing_node`]), found
    /// by the controller for each content.
    pub managed_by_node: Option<String>,
}

/// `--enable-distributed-snapshotting`: the node whose csi-snapshotter (`--node-deployment`) cuts the snapshot of
/// `volume`, for the content's `managed-by` label: a node its required node affinity admits, the first by name
/// (upstream takes the first its node lister returns). A volume without required node affinity, or one no node
/// matches, gets no label (external-snapshotter pkg/common-controller/snapshot_controller.go, getManagedByNode).
pub fn managing_node<'a>(volume: &PersistentVolume, nodes: impl IntoIterator<Item = &'a Node>) -> Option<String> {
    let required = volume.spec.as_ref()?.node_affinity.as_ref()?.required.as_ref()?;
    nodes.into_iter().filter(|node| node_matches(required, node)).filter_map(|node| node.metadata.name.clone()).min()
}

/// The content of `snapshot`, taken with `class` of the claim's `volume` (already checked by
/// [`super::source_volume`]). Errors are upstream's "input parameters" failures, reported as
/// `SnapshotContentCreationFailed`.
pub fn dynamic_content(
    snapshot: &VolumeSnapshot,
    class: Option<&VolumeSnapshotClass>,
    volume: &PersistentVolume,
    options: &ContentOptions,
) -> Result<VolumeSnapshotContent, SnapshotFailure> {
    let input_failed = |error: String| {
        creation_failed(&format!(
            "failed to get input parameters to create snapshot {}: {}",
            snapshot.name_any(),
            go_quoted(&error)
        ))
    };
    let class = class.ok_or_else(|| {
        input_failed(format!("failed to take snapshot {} without a snapshot class", snapshot.name_any()))
    })?;
    let name = dynamic_content_name(snapshot);
    let secret = secret_reference(SnapshotSecret::Snapshotter, class.spec.parameters.as_ref(), &name, Some(snapshot))
        .map_err(input_failed)?;
    let spec = volume.spec.clone().unwrap_or_default();
    let csi = spec
        .csi
        .as_ref()
        .ok_or_else(|| creation_failed(&SourceVolumeError::NoCsiSource(volume.name_any()).to_string()))?;

    let mut content = VolumeSnapshotContent::new(
        &name,
        VolumeSnapshotContentSpec {
            volume_snapshot_ref: snapshot_reference(snapshot),
            deletion_policy: class.spec.deletion_policy,
            driver: class.spec.driver.clone(),
            volume_snapshot_class_name: Some(class.name_any()),
            source: VolumeSnapshotContentSource {
                volume_handle: Some(csi.volume_handle.clone()),
                snapshot_handle: None,
            },
            source_volume_mode: if options.prevent_volume_mode_conversion { spec.volume_mode.clone() } else { None },
        },
    );
    // Protected from its creation, where upstream adds the finalizer on the content's first sync: csi-snapshotter may
    // call CreateSnapshot before that write lands (it kept conflicting with csi-snapshotter's own writes under
    // `make chaos`), and a snapshot deleted meanwhile took the unprotected content with it, leaking the storage
    // snapshot being cut.
    content.metadata.finalizers = Some(vec![FINALIZER_VOLUME_SNAPSHOT_CONTENT_BOUND.to_string()]);
    if let Some(node) = &options.managed_by_node {
        content.metadata.labels = Some(BTreeMap::from([(LABEL_MANAGED_BY.to_string(), node.clone())]));
    }
    if let Some(secret) = secret {
        content.metadata.annotations = Some(BTreeMap::from([
            (ANN_DELETION_SECRET_NAME.to_string(), secret.name),
            (ANN_DELETION_SECRET_NAMESPACE.to_string(), secret.namespace),
        ]));
    }
    Ok(content)
}

/// The status error of a failed creation: `error` is the cause (an input check, or [`create_failed`]'s error).
pub fn creation_failed(error: &str) -> SnapshotFailure {
    SnapshotFailure::status_error(
        SNAPSHOT_CONTENT_CREATION_FAILED,
        format!("Failed to create snapshot content with error {error}"),
        true,
        error.to_string(),
    )
}

/// The claim finalizer could not be added before the content was created (upstream's ensurePVCFinalizer).
pub fn claim_finalizer_failed(claim_name: &str, message: &str) -> SnapshotFailure {
    creation_failed(&format!("snapshot controller failed to update {claim_name} on API server: {message}"))
}

/// The API refused the content (AlreadyExists is not a failure: the existing content is reused): a Warning
/// `CreateSnapshotContentFailed`, then the status error.
pub fn create_failed(snapshot: &VolumeSnapshot, api_error: &str) -> (PlannedEvent, SnapshotFailure) {
    let key = snapshot_key(snapshot);
    let event = PlannedEvent::warning(
        CREATE_SNAPSHOT_CONTENT_FAILED,
        format!("Error creating volume snapshot content object for snapshot {key}: {api_error}."),
    );
    let failure = creation_failed(&format!("snapshot controller failed to update {key} on API server: {api_error}"));
    (event, failure)
}

/// The content was created (or already existed).
pub fn creating_event(snapshot: &VolumeSnapshot) -> PlannedEvent {
    PlannedEvent::normal(
        CREATING_SNAPSHOT,
        format!("Waiting for a snapshot {} to be created by the CSI driver.", snapshot_key(snapshot)),
    )
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ObjectReference;
    use snapshot_api::DeletionPolicy;

    use super::*;
    use crate::translate::common::fixtures::*;

    fn options(prevent: bool, node: Option<&str>) -> ContentOptions {
        ContentOptions { prevent_volume_mode_conversion: prevent, managed_by_node: node.map(str::to_string) }
    }

    #[test]
    fn content_of_a_dynamic_snapshot() {
        let vs = snapshot_of_claim("ns", "snap", "uid-1", "data");
        let mut retain = class("gold", DRIVER, None, &[]);
        retain.spec.deletion_policy = DeletionPolicy::Retain;
        let volume = csi_volume("pv-1", "ns", "data", "c-1");
        let content = dynamic_content(&vs, Some(&retain), &volume, &options(true, None)).unwrap();
        assert_eq!(content.name_any(), "snapcontent-uid-1", "name");
        assert_eq!(
            content.spec.volume_snapshot_ref,
            ObjectReference {
                api_version: Some("snapshot.storage.k8s.io/v1".into()),
                kind: Some("VolumeSnapshot".into()),
                namespace: Some("ns".into()),
                name: Some("snap".into()),
                uid: Some("uid-1".into()),
                resource_version: Some("7".into()),
                field_path: None,
            },
            "full reference"
        );
        assert_eq!(content.spec.source.volume_handle.as_deref(), Some("vol-1"), "volume handle");
        assert_eq!(content.spec.source.snapshot_handle, None);
        assert_eq!(content.spec.volume_snapshot_class_name.as_deref(), Some("gold"), "class");
        assert_eq!(content.spec.deletion_policy, DeletionPolicy::Retain, "policy from the class");
        assert_eq!(content.spec.driver, DRIVER, "driver from the class");
        assert_eq!(content.spec.source_volume_mode.as_deref(), Some("Filesystem"), "volume mode kept");
        assert_eq!(content.metadata.labels, None);
        assert_eq!(content.metadata.annotations, None, "no secret, no annotation");
        assert_eq!(
            content.finalizers(),
            ["snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection"],
            "bound-protection from the creation on, before any CreateSnapshot can run"
        );
    }

    #[test]
    fn content_options_and_annotations() {
        let vs = snapshot_of_claim("ns", "snap", "uid-1", "data");
        let volume = csi_volume("pv-1", "ns", "data", "c-1");
        let plain = class("gold", DRIVER, None, &[]);
        let with_secret = class(
            "gold",
            DRIVER,
            None,
            &[
                ("csi.storage.k8s.io/snapshotter-secret-name", "${volumesnapshot.name}-creds"),
                ("csi.storage.k8s.io/snapshotter-secret-namespace", "${volumesnapshot.namespace}"),
            ],
        );
        let no_mode = dynamic_content(&vs, Some(&plain), &volume, &options(false, None)).unwrap();
        assert_eq!(no_mode.spec.source_volume_mode, None, "mode only with --prevent-volume-mode-conversion");
        let labelled = dynamic_content(&vs, Some(&plain), &volume, &options(true, Some("node-1"))).unwrap();
        assert_eq!(labelled.labels()["snapshot.storage.kubernetes.io/managed-by"], "node-1", "managed-by label");
        let annotated = dynamic_content(&vs, Some(&with_secret), &volume, &options(true, None)).unwrap();
        assert_eq!(annotated.annotations()["snapshot.storage.kubernetes.io/deletion-secret-name"], "snap-creds", "5");
        assert_eq!(annotated.annotations()["snapshot.storage.kubernetes.io/deletion-secret-namespace"], "ns", "5");
    }

    #[test]
    fn the_managing_node_is_one_the_volume_affinity_admits() {
        use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, VolumeNodeAffinity};
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

        const KEY: &str = "topology.hostpath.csi/node";
        let node = |name: &str, value: &str| Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(BTreeMap::from([(KEY.to_string(), value.to_string())])),
                ..Default::default()
            },
            ..Default::default()
        };
        let pinned_to = |values: &[&str]| {
            let mut volume = csi_volume("pv-1", "ns", "data", "c-1");
            volume.spec.as_mut().unwrap().node_affinity = Some(VolumeNodeAffinity {
                required: Some(NodeSelector {
                    node_selector_terms: vec![NodeSelectorTerm {
                        match_expressions: Some(vec![NodeSelectorRequirement {
                            key: KEY.into(),
                            operator: "In".into(),
                            values: Some(values.iter().map(|v| v.to_string()).collect()),
                        }]),
                        match_fields: None,
                    }],
                }),
            });
            volume
        };
        let nodes = [node("node-b", "n2"), node("node-c", "n1"), node("node-a", "n1")];
        // (rule, volume, managing node)
        let table = [
            ("the node the volume lives on", pinned_to(&["n2"]), Some("node-b")),
            ("of several matching nodes the first by name", pinned_to(&["n1"]), Some("node-a")),
            ("no node matches: no label", pinned_to(&["n9"]), None),
            ("no node affinity: no label", csi_volume("pv-1", "ns", "data", "c-1"), None),
        ];
        for (rule, volume, want) in table {
            assert_eq!(managing_node(&volume, &nodes).as_deref(), want, "{rule}");
        }
    }

    #[test]
    fn content_input_failures() {
        let vs = snapshot_of_claim("ns", "snap", "uid-1", "data");
        let volume = csi_volume("pv-1", "ns", "data", "c-1");
        let mut not_csi = volume.clone();
        not_csi.spec.as_mut().unwrap().csi = None;
        let bad_secret = class("gold", DRIVER, None, &[("csi.storage.k8s.io/snapshotter-secret-name", "x")]);
        let gold = class("gold", DRIVER, None, &[]);
        // (rule, class, volume, status error message)
        let table = [
            (
                "a class is required",
                None,
                &volume,
                r#"Failed to create snapshot content with error failed to get input parameters to create snapshot snap: "failed to take snapshot snap without a snapshot class""#,
            ),
            (
                "secret parameters must come in pairs",
                Some(&bad_secret),
                &volume,
                r#"Failed to create snapshot content with error failed to get input parameters to create snapshot snap: "failed to get name and namespace template from params: either name and namespace for Snapshotter secrets specified, Both must be specified""#,
            ),
            (
                "a CSI volume is required",
                Some(&gold),
                &not_csi,
                "Failed to create snapshot content with error cannot find CSI PersistentVolumeSource for volume pv-1",
            ),
        ];
        for (rule, class, volume, want) in table {
            let failure = dynamic_content(&vs, class, volume, &options(true, None)).unwrap_err();
            assert_eq!(failure.reason, "SnapshotContentCreationFailed", "{rule}");
            assert_eq!(failure.message, want, "{rule}");
        }
    }

    #[test]
    fn creation_events() {
        let vs = snapshot_of_claim("ns", "snap", "uid-1", "data");
        assert_eq!(
            creating_event(&vs),
            PlannedEvent::normal("CreatingSnapshot", "Waiting for a snapshot ns/snap to be created by the CSI driver.")
        );
        let (event, failure) = create_failed(&vs, "forbidden");
        assert_eq!(
            event,
            PlannedEvent::warning(
                "CreateSnapshotContentFailed",
                "Error creating volume snapshot content object for snapshot ns/snap: forbidden."
            )
        );
        assert_eq!(
            failure.message,
            "Failed to create snapshot content with error snapshot controller failed to update ns/snap on API server: forbidden"
        );
    }
}
