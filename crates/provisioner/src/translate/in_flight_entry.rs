//! The in-flight journal's entries (beyond upstream; external-provisioner #486): what the provisioner remembers of a
//! claim while its CreateVolume runs, so that a volume made for a claim deleted meanwhile is found and deleted even
//! after a crash, and what recovery does with each entry.
//!
//! The journal is one Lease in the sidecar's namespace, `<leader-election Lease name>-in-flight` (in
//! `--node-deployment` mode, where there is no leader election, `...-in-flight-<node>`). Each entry is the
//! annotation [`JOURNAL_ENTRY_PREFIX`]`<claim UID>` holding an [`InFlightEntry`]: a slim copy of the claim, enough
//! to build the same CreateVolume request again without the claim, and never a secret value. It replaced the
//! provisioning-protection finalizer on the hot path because one journal write covers every claim starting at that
//! moment, where the finalizer cost two writes of each claim. A claim the journal cannot take still gets the
//! finalizer ([`crate::translate::in_flight`]).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PersistentVolumeClaimSpec};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use sidecar_runtime::leader_election::sanitize_name;

use super::names::{ANN_ALPHA_SELECTED_NODE, ANN_SELECTED_NODE};

/// The annotation prefix of the journal's entries; the claim's UID follows.
pub const JOURNAL_ENTRY_PREFIX: &str = "provisioner.storage.kubernetes.io/in-flight-";

/// How long a finished claim's entry may wait for a write to ride along with before it is written on its own: a
/// stale entry only makes recovery check that the PV exists, so removals are grouped rather than hurried.
pub const JOURNAL_REMOVAL_DELAY: Duration = Duration::from_secs(3);

/// How long the first claim of a group waits for others before the journal write (a fraction of the time a
/// rate-limited write waits for its token at upstream's default 5 requests/s anyway).
pub const JOURNAL_LINGER: Duration = Duration::from_millis(100);

/// The longest Kubernetes object name.
const MAX_NAME: usize = 253;

/// What recovery needs of a claim in flight.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InFlightEntry {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// Only those the request reads: the selected node, and those the class's templates name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    pub spec: PersistentVolumeClaimSpec,
    /// The volume's id once recovery has learnt it: a restart then deletes it without creating it again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_id: Option<String>,
}

impl InFlightEntry {
    /// The claim as the request builder reads it.
    pub fn claim(&self) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                namespace: Some(self.namespace.clone()),
                name: Some(self.name.clone()),
                uid: Some(self.uid.clone()),
                annotations: (!self.annotations.is_empty()).then(|| self.annotations.clone()),
                ..Default::default()
            },
            spec: Some(self.spec.clone()),
            status: None,
        }
    }

    /// The annotation value.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// An entry read back from the journal; `None` when the text is not one.
    pub fn parse(text: &str) -> Option<InFlightEntry> {
        serde_json::from_str(text).ok()
    }
}

/// The entry for `claim`, about to be provisioned with `class` (its CSI form).
pub fn in_flight_entry(claim: &PersistentVolumeClaim, class: &StorageClass) -> InFlightEntry {
    let wanted = referenced_annotations(class);
    let annotations = claim
        .metadata
        .annotations
        .iter()
        .flatten()
        .filter(|(key, _)| {
            key.as_str() == ANN_SELECTED_NODE || key.as_str() == ANN_ALPHA_SELECTED_NODE || wanted.contains(*key)
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let spec = claim.spec.clone().unwrap_or_default();
    InFlightEntry {
        namespace: claim.metadata.namespace.clone().unwrap_or_default(),
        name: claim.metadata.name.clone().unwrap_or_default(),
        uid: claim.metadata.uid.clone().unwrap_or_default(),
        annotations,
        // What the request and its checks read; `selector`, `volumeName` and the rest play no part in it.
        spec: PersistentVolumeClaimSpec {
            access_modes: spec.access_modes,
            resources: spec.resources,
            volume_mode: spec.volume_mode,
            data_source: spec.data_source,
            data_source_ref: spec.data_source_ref,
            storage_class_name: spec.storage_class_name,
            volume_attributes_class_name: spec.volume_attributes_class_name,
            selector: None,
            volume_name: None,
        },
        volume_id: None,
    }
}

/// The claim annotations the class's templates name (`${pvc.annotations['<key>']}` in any parameter).
pub fn referenced_annotations(class: &StorageClass) -> BTreeSet<String> {
    const OPEN: &str = "${pvc.annotations['";
    let mut keys = BTreeSet::new();
    for value in class.parameters.iter().flatten().map(|(_, v)| v) {
        let mut rest = value.as_str();
        while let Some(start) = rest.find(OPEN) {
            rest = &rest[start + OPEN.len()..];
            let Some(end) = rest.find("']}") else { break };
            keys.insert(rest[..end].to_string());
            rest = &rest[end..];
        }
    }
    keys
}

/// The journal Lease's name: `<leader-election Lease name>-in-flight`, and the node's name after it in node mode.
pub fn journal_name(lease_name: &str, node: Option<&str>) -> String {
    let name = match node {
        Some(node) => format!("{lease_name}-in-flight-{node}"),
        None => format!("{lease_name}-in-flight"),
    };
    let mut name = sanitize_name(&name).to_lowercase();
    if name.len() > MAX_NAME {
        name.truncate(MAX_NAME);
        name = name.trim_end_matches('-').to_string();
    }
    name
}

/// Where the claim of an entry stands now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClaimNow {
    /// The claim with the entry's UID exists and is not being deleted.
    Live,
    /// It is being deleted.
    Deleting,
    /// No claim with that UID exists (gone, or replaced by another of the same name).
    Gone,
}

/// What recovery does with one journal entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryStep {
    /// The claim is still there to provision: provisioning carries on and removes the entry once the PV exists.
    Keep,
    /// The PV exists: the volume is the PV's business (its reclaim policy decides); the entry goes.
    Drop,
    /// The claim went before its PV was written and the volume id is unknown: CreateVolume by the same name (CSI
    /// calls are idempotent by name) to learn it, record it in the entry, then DeleteVolume and drop the entry.
    LearnVolumeId,
    /// The id is recorded: DeleteVolume (idempotent) and drop the entry, without creating the volume again.
    DeleteVolume,
}

/// What to do with `entry`, given where its claim stands and whether the claim's live PV exists (its claimRef names
/// the claim and it is not being deleted: [`super::pv_in_the_way::holds_claim`]).
pub fn entry_step(entry: &InFlightEntry, claim: ClaimNow, volume_exists: bool) -> EntryStep {
    match (volume_exists, claim, &entry.volume_id) {
        (true, _, _) => EntryStep::Drop,
        (false, ClaimNow::Live, _) => EntryStep::Keep,
        (false, ClaimNow::Deleting | ClaimNow::Gone, None) => EntryStep::LearnVolumeId,
        (false, ClaimNow::Deleting | ClaimNow::Gone, Some(_)) => EntryStep::DeleteVolume,
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{TypedLocalObjectReference, VolumeResourceRequirements};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

    use super::*;

    fn class(parameters: &[(&str, &str)]) -> StorageClass {
        StorageClass {
            metadata: ObjectMeta { name: Some("fast".into()), ..Default::default() },
            provisioner: "hostpath.csi.k8s.io".into(),
            parameters: Some(parameters.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            ..Default::default()
        }
    }

    fn claim(annotations: &[(&str, &str)]) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                namespace: Some("apps".into()),
                name: Some("data".into()),
                uid: Some("0f1e2d3c-aaaa-bbbb-cccc-000011112222".into()),
                resource_version: Some("7".into()),
                labels: Some([("app".to_string(), "db".to_string())].into()),
                annotations: Some(annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
                finalizers: Some(vec!["kubernetes.io/pvc-protection".into()]),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(vec!["ReadWriteOnce".into()]),
                resources: Some(VolumeResourceRequirements {
                    requests: Some([("storage".to_string(), Quantity("1Gi".into()))].into()),
                    ..Default::default()
                }),
                storage_class_name: Some("fast".into()),
                volume_mode: Some("Block".into()),
                data_source: Some(TypedLocalObjectReference {
                    api_group: None,
                    kind: "PersistentVolumeClaim".into(),
                    name: "origin".into(),
                }),
                volume_attributes_class_name: Some("gold".into()),
                selector: Some(LabelSelector::default()),
                volume_name: Some("ignored".into()),
                ..Default::default()
            }),
            status: None,
        }
    }

    #[test]
    fn entries_keep_what_the_request_reads_and_nothing_else() {
        let templated = "${pvc.annotations['example.com/secret']}";
        // (rule, claim annotations, class parameters, annotations kept)
        type Pairs<'a> = &'a [(&'a str, &'a str)];
        let table: &[(&str, Pairs, Pairs, Pairs)] = &[
            (
                "no annotation is read: none kept",
                &[("note", "x"), ("kubectl.kubernetes.io/last-applied", "{}")],
                &[],
                &[],
            ),
            (
                "the selected node is kept",
                &[(ANN_SELECTED_NODE, "n1"), ("note", "x")],
                &[],
                &[(ANN_SELECTED_NODE, "n1")],
            ),
            (
                "the alpha selected node is kept",
                &[(ANN_ALPHA_SELECTED_NODE, "n1")],
                &[],
                &[(ANN_ALPHA_SELECTED_NODE, "n1")],
            ),
            (
                "annotations a secret template names are kept",
                &[("example.com/secret", "s1"), ("note", "x")],
                &[("csi.storage.k8s.io/provisioner-secret-name", templated)],
                &[("example.com/secret", "s1")],
            ),
            (
                "a template of another secret counts too (the request resolves every reference)",
                &[("example.com/secret", "s1")],
                &[("csi.storage.k8s.io/node-publish-secret-name", templated)],
                &[("example.com/secret", "s1")],
            ),
            (
                "a named annotation the claim lacks is simply absent",
                &[],
                &[("csi.storage.k8s.io/provisioner-secret-name", templated)],
                &[],
            ),
        ];
        for (rule, annotations, parameters, kept) in table {
            let entry = in_flight_entry(&claim(annotations), &class(parameters));
            let want: BTreeMap<String, String> = kept.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            assert_eq!(entry.annotations, want, "{rule}");
            assert_eq!((entry.namespace.as_str(), entry.name.as_str()), ("apps", "data"), "{rule}");
            assert_eq!(entry.uid, "0f1e2d3c-aaaa-bbbb-cccc-000011112222", "{rule}");
        }
    }

    #[test]
    fn the_slim_spec_keeps_the_request_fields() {
        let entry = in_flight_entry(&claim(&[]), &class(&[]));
        let full = claim(&[]).spec.unwrap();
        let spec = &entry.spec;
        assert_eq!(spec.access_modes, full.access_modes);
        assert_eq!(spec.resources, full.resources);
        assert_eq!(spec.volume_mode, full.volume_mode);
        assert_eq!(spec.data_source, full.data_source);
        assert_eq!(spec.storage_class_name, full.storage_class_name);
        assert_eq!(spec.volume_attributes_class_name, full.volume_attributes_class_name);
        assert_eq!((spec.selector.as_ref(), spec.volume_name.as_ref()), (None, None), "not read by the request");
        // Labels, finalizers and the resourceVersion stay behind; the claim rebuilt from the entry reads the same.
        let rebuilt = entry.claim();
        assert_eq!(rebuilt.metadata.labels, None);
        assert_eq!(rebuilt.metadata.finalizers, None);
        assert_eq!(rebuilt.metadata.uid.as_deref(), Some("0f1e2d3c-aaaa-bbbb-cccc-000011112222"));
        assert_eq!(InFlightEntry::parse(&entry.to_json()), Some(entry.clone()), "round trip");
        let recorded = InFlightEntry { volume_id: Some("vol-1".into()), ..entry };
        assert!(recorded.to_json().contains("\"volumeId\":\"vol-1\""));
        assert_eq!(InFlightEntry::parse("not json"), None);
        // A slim entry stays far below the journal's per-entry bound (16 KiB).
        assert!(recorded.to_json().len() < 1024, "{}", recorded.to_json().len());
    }

    #[test]
    fn template_references() {
        let table: &[(&str, &[&str])] = &[
            ("${pvc.annotations['a']}", &["a"]),
            ("${pvc.annotations['a']}-${pvc.annotations['b.io/c']}", &["a", "b.io/c"]),
            ("${pvc.name}-${pvc.namespace}", &[]),
            ("${pvc.annotations['unterminated", &[]),
            ("plain", &[]),
        ];
        for (value, want) in table {
            let keys = referenced_annotations(&class(&[("csi.storage.k8s.io/provisioner-secret-name", value)]));
            assert_eq!(keys, want.iter().map(|s| s.to_string()).collect(), "{value}");
        }
    }

    #[test]
    fn journal_names() {
        let table = [
            ("hostpath-csi-k8s-io", None, "hostpath-csi-k8s-io-in-flight".to_string()),
            (
                "hostpath-csi-k8s-io",
                Some("node-1.example.com"),
                "hostpath-csi-k8s-io-in-flight-node-1-example-com".into(),
            ),
            ("d", Some(&"n".repeat(300)[..]), format!("d-in-flight-{}", "n".repeat(241))),
        ];
        for (lease, node, want) in table {
            assert_eq!(journal_name(lease, node), want, "{node:?}");
        }
    }

    #[test]
    fn what_recovery_does_per_entry() {
        use ClaimNow::*;
        use EntryStep::*;
        let entry = in_flight_entry(&claim(&[]), &class(&[]));
        let recorded = InFlightEntry { volume_id: Some("vol-1".into()), ..entry.clone() };
        // (rule, entry, claim, PV exists, step)
        let table = [
            ("claim live, no PV yet: provisioning carries on", &entry, Live, false, Keep),
            ("claim live, PV written: the entry goes", &entry, Live, true, Drop),
            ("claim gone, PV written: the PV's reclaim policy decides", &entry, Gone, true, Drop),
            ("claim deleting, PV written: the same", &entry, Deleting, true, Drop),
            ("claim gone before its PV: learn the id by CreateVolume", &entry, Gone, false, LearnVolumeId),
            ("claim deleting before its PV: the same", &entry, Deleting, false, LearnVolumeId),
            ("claim gone, id recorded: delete without creating again", &recorded, Gone, false, DeleteVolume),
            ("claim deleting, id recorded: the same", &recorded, Deleting, false, DeleteVolume),
            ("id recorded but the PV exists: the PV decides", &recorded, Gone, true, Drop),
        ];
        for (rule, entry, claim, exists, want) in table {
            assert_eq!(entry_step(entry, claim, exists), want, "{rule}");
        }
    }
}
