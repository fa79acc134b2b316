//! Which claims this provisioner provisions, and when (the upstream library's `shouldProvision` and
//! `provisionClaimOperation`, sig-storage-lib-external-provisioner controller/controller.go).

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::StorageClass;

use super::names::{
    ANN_ALPHA_SELECTED_NODE, ANN_BETA_STORAGE_CLASS, ANN_BETA_STORAGE_PROVISIONER, ANN_MIGRATED_TO, ANN_SELECTED_NODE,
    ANN_STORAGE_PROVISIONER, BINDING_WAIT_FOR_FIRST_CONSUMER,
};
use super::provisioner::Provisioner;

/// What to do with a claim taken from the queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClaimDecision {
    /// Go ahead (emit the `Provisioning` event, then build the request).
    Provision {
        /// From `volume.kubernetes.io/selected-node`, else the alpha key; `None` for immediate binding.
        selected_node: Option<String>,
    },
    /// Nothing to do now; no event, no retry (a later change of the claim or class queues it again).
    Skip(Skip),
    /// The StorageClass is missing: retry with backoff, no event.
    Retry(String),
}

/// Why a claim is left alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Skip {
    /// `spec.volumeName` is set.
    AlreadyBound,
    /// Another provisioner's claim, or no provisioner annotation at all.
    NotOurs,
    /// WaitForFirstConsumer without a selected node.
    WaitingForSelectedNode,
    /// A PV with the library's name for this claim already exists.
    VolumeExists(String),
    /// The class names another provisioner (it changed since the PV controller annotated the claim).
    ClassOfAnotherProvisioner(String),
}

/// The claim's StorageClass name: the legacy beta annotation first, then `spec.storageClassName`, else "".
pub fn claim_class_name(claim: &PersistentVolumeClaim) -> String {
    if let Some(class) = annotation(claim, ANN_BETA_STORAGE_CLASS) {
        return class.to_string();
    }
    claim.spec.as_ref().and_then(|s| s.storage_class_name.clone()).unwrap_or_default()
}

/// The PV name the upstream library checks before provisioning: always `pvc-<uid>`, whatever `--volume-name-prefix`
/// says (`getProvisionedVolumeNameForClaim`).
pub fn library_volume_name(claim: &PersistentVolumeClaim) -> String {
    format!("pvc-{}", claim.metadata.uid.as_deref().unwrap_or_default())
}

/// The selected node: the first of the new and the alpha annotation that is present (even if empty).
pub fn selected_node(claim: &PersistentVolumeClaim) -> Option<String> {
    annotation(claim, ANN_SELECTED_NODE)
        .or_else(|| annotation(claim, ANN_ALPHA_SELECTED_NODE))
        .filter(|n| !n.is_empty())
        .map(str::to_string)
}

fn annotation<'a>(claim: &'a PersistentVolumeClaim, key: &str) -> Option<&'a str> {
    claim.metadata.annotations.as_ref().and_then(|a| a.get(key)).map(String::as_str)
}

/// Whether the claim asks this provisioner for its volume: its provisioner annotation (or the beta one) names the
/// driver or the in-tree name it migrates, or `pv.kubernetes.io/migrated-to` names the driver.
pub fn is_our_claim(claim: &PersistentVolumeClaim, provisioner: &Provisioner) -> bool {
    let requested =
        annotation(claim, ANN_STORAGE_PROVISIONER).or_else(|| annotation(claim, ANN_BETA_STORAGE_PROVISIONER));
    let Some(requested) = requested else { return false };
    let migrated_to = annotation(claim, ANN_MIGRATED_TO).unwrap_or_default();
    (requested == provisioner.driver_name || migrated_to == provisioner.driver_name)
        && provisioner.is_known_provisioner(requested)
}

/// Whether to provision `claim` now. `class` is the StorageClass named by [`claim_class_name`], if it exists;
/// `volume_exists` tells whether a PV named [`library_volume_name`] is in the store.
pub fn claim_decision(
    claim: &PersistentVolumeClaim,
    class: Option<&StorageClass>,
    provisioner: &Provisioner,
    volume_exists: bool,
) -> ClaimDecision {
    if claim.spec.as_ref().and_then(|s| s.volume_name.as_deref()).is_some_and(|v| !v.is_empty()) {
        return ClaimDecision::Skip(Skip::AlreadyBound);
    }
    if !is_our_claim(claim, provisioner) {
        return ClaimDecision::Skip(Skip::NotOurs);
    }
    let Some(class) = class else {
        return ClaimDecision::Retry(format!("storageClass \"{}\" not found", claim_class_name(claim)));
    };
    if class.volume_binding_mode.as_deref() == Some(BINDING_WAIT_FOR_FIRST_CONSUMER)
        && annotation(claim, ANN_SELECTED_NODE).is_none_or(str::is_empty)
    {
        return ClaimDecision::Skip(Skip::WaitingForSelectedNode);
    }
    if volume_exists {
        return ClaimDecision::Skip(Skip::VolumeExists(library_volume_name(claim)));
    }
    if !provisioner.is_known_provisioner(&class.provisioner) {
        return ClaimDecision::Skip(Skip::ClassOfAnotherProvisioner(class.provisioner.clone()));
    }
    ClaimDecision::Provision { selected_node: selected_node(claim) }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::PersistentVolumeClaimSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    const DRIVER: &str = "hostpath.csi.k8s.io";

    fn claim(annotations: &[(&str, &str)], class: Option<&str>, volume_name: Option<&str>) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("data".into()),
                namespace: Some("apps".into()),
                uid: Some("0b6f-11".into()),
                annotations: Some(annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                storage_class_name: class.map(str::to_string),
                volume_name: volume_name.map(str::to_string),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn class(provisioner: &str, mode: Option<&str>) -> StorageClass {
        StorageClass {
            metadata: ObjectMeta { name: Some("fast".into()), ..Default::default() },
            provisioner: provisioner.into(),
            volume_binding_mode: mode.map(str::to_string),
            ..Default::default()
        }
    }

    const OURS: (&str, &str) = (ANN_STORAGE_PROVISIONER, DRIVER);

    #[test]
    fn decisions() {
        use ClaimDecision::*;
        let mut migrating = Provisioner::new(DRIVER);
        migrating.migrated_in_tree_name = Some("kubernetes.io/gce-pd".into());
        let plain = Provisioner::new(DRIVER);
        let immediate = class(DRIVER, Some("Immediate"));
        let late = class(DRIVER, Some("WaitForFirstConsumer"));
        let provision = |node: Option<&str>| Provision { selected_node: node.map(str::to_string) };
        // (rule, claim, class, provisioner, pv exists, decision)
        let table = [
            (
                "1: our annotation",
                claim(&[OURS], Some("fast"), None),
                Some(immediate.clone()),
                &plain,
                false,
                provision(None),
            ),
            (
                "1: beta annotation when the new one is absent",
                claim(&[(ANN_BETA_STORAGE_PROVISIONER, DRIVER)], Some("fast"), None),
                Some(immediate.clone()),
                &plain,
                false,
                provision(None),
            ),
            (
                "1: the new annotation wins over the beta one",
                claim(
                    &[(ANN_STORAGE_PROVISIONER, "other"), (ANN_BETA_STORAGE_PROVISIONER, DRIVER)],
                    Some("fast"),
                    None,
                ),
                Some(immediate.clone()),
                &plain,
                false,
                Skip(super::Skip::NotOurs),
            ),
            (
                "1: another provisioner's claim is ignored",
                claim(&[(ANN_STORAGE_PROVISIONER, "other.csi")], Some("fast"), None),
                Some(immediate.clone()),
                &plain,
                false,
                Skip(super::Skip::NotOurs),
            ),
            (
                "1: no annotation is ignored",
                claim(&[], Some("fast"), None),
                Some(immediate.clone()),
                &plain,
                false,
                Skip(super::Skip::NotOurs),
            ),
            (
                "1: migrated-to this driver with the in-tree name",
                claim(
                    &[(ANN_STORAGE_PROVISIONER, "kubernetes.io/gce-pd"), (ANN_MIGRATED_TO, DRIVER)],
                    Some("fast"),
                    None,
                ),
                Some(class("kubernetes.io/gce-pd", None)),
                &migrating,
                false,
                provision(None),
            ),
            (
                "1: migrated-to, but the in-tree name is not ours",
                claim(
                    &[(ANN_STORAGE_PROVISIONER, "kubernetes.io/aws-ebs"), (ANN_MIGRATED_TO, DRIVER)],
                    Some("fast"),
                    None,
                ),
                Some(immediate.clone()),
                &migrating,
                false,
                Skip(super::Skip::NotOurs),
            ),
            (
                "64: in-tree name without migrated-to is not ours",
                claim(&[(ANN_STORAGE_PROVISIONER, "kubernetes.io/gce-pd")], Some("fast"), None),
                Some(immediate.clone()),
                &migrating,
                false,
                Skip(super::Skip::NotOurs),
            ),
            (
                "2: bound claim skipped",
                claim(&[OURS], Some("fast"), Some("pv-1")),
                Some(immediate.clone()),
                &plain,
                false,
                Skip(super::Skip::AlreadyBound),
            ),
            (
                "3: missing class retried",
                claim(&[OURS], Some("fast"), None),
                None,
                &plain,
                false,
                Retry("storageClass \"fast\" not found".into()),
            ),
            (
                "3: class from the beta annotation",
                claim(&[OURS, (ANN_BETA_STORAGE_CLASS, "legacy")], Some("fast"), None),
                None,
                &plain,
                false,
                Retry("storageClass \"legacy\" not found".into()),
            ),
            (
                "3: class of another provisioner",
                claim(&[OURS], Some("fast"), None),
                Some(class("other.csi", None)),
                &plain,
                false,
                Skip(super::Skip::ClassOfAnotherProvisioner("other.csi".into())),
            ),
            (
                "4: WaitForFirstConsumer without a selected node waits",
                claim(&[OURS], Some("fast"), None),
                Some(late.clone()),
                &plain,
                false,
                Skip(super::Skip::WaitingForSelectedNode),
            ),
            (
                "4: WaitForFirstConsumer with an empty selected node waits",
                claim(&[OURS, (ANN_SELECTED_NODE, "")], Some("fast"), None),
                Some(late.clone()),
                &plain,
                false,
                Skip(super::Skip::WaitingForSelectedNode),
            ),
            (
                "4: WaitForFirstConsumer needs the new key, not the alpha one",
                claim(&[OURS, (ANN_ALPHA_SELECTED_NODE, "n1")], Some("fast"), None),
                Some(late.clone()),
                &plain,
                false,
                Skip(super::Skip::WaitingForSelectedNode),
            ),
            (
                "4: WaitForFirstConsumer with a selected node",
                claim(&[OURS, (ANN_SELECTED_NODE, "n1")], Some("fast"), None),
                Some(late.clone()),
                &plain,
                false,
                provision(Some("n1")),
            ),
            (
                "4: Immediate reads the alpha key for the node name",
                claim(&[OURS, (ANN_ALPHA_SELECTED_NODE, "n2")], Some("fast"), None),
                Some(immediate.clone()),
                &plain,
                false,
                provision(Some("n2")),
            ),
            (
                "4: binding mode unset means Immediate",
                claim(&[OURS], Some("fast"), None),
                Some(class(DRIVER, None)),
                &plain,
                false,
                provision(None),
            ),
            (
                "7: PV pvc-<uid> already exists",
                claim(&[OURS], Some("fast"), None),
                Some(immediate.clone()),
                &plain,
                true,
                Skip(super::Skip::VolumeExists("pvc-0b6f-11".into())),
            ),
        ];
        for (rule, claim, class, provisioner, exists, want) in table {
            assert_eq!(claim_decision(&claim, class.as_ref(), provisioner, exists), want, "{rule}");
        }
    }

    #[test]
    fn class_name_and_volume_name() {
        let c = claim(&[], None, None);
        assert_eq!(claim_class_name(&c), "", "3: no class");
        assert_eq!(library_volume_name(&c), "pvc-0b6f-11", "7: the library ignores the prefix");
        let mut annotated = claim(&[(ANN_SELECTED_NODE, "")], None, None);
        annotated
            .metadata
            .annotations
            .as_mut()
            .unwrap()
            .extend(BTreeMap::from([(ANN_ALPHA_SELECTED_NODE.to_string(), "n1".to_string())]));
        assert_eq!(selected_node(&annotated), None, "4: a present new key wins even when empty");
    }
}
