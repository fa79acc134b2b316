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
//!
//! The journal is untrusted input: upstream's leader-election Role lets every sidecar of the driver (and whoever
//! else holds Lease verbs in that namespace) write the Lease. So the journal takes only claims whose recovery reads
//! nothing the claim chooses ([`journal_may_take`]: no claim-templated secret, no data source); an entry of a claim
//! that is gone is checked before anything is read for it ([`entry_defect`]); and recovery deletes only the volume
//! the driver gives for the entry's own name, never an id the entry names, and not while any PV holds it.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PersistentVolumeClaimSpec};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use sidecar_runtime::leader_election::sanitize_name;
use sidecar_runtime::object_names::{is_dns1123_label, is_dns1123_subdomain};

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
    /// Only the selected node (the journal takes no claim whose class reads other annotations).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    pub spec: PersistentVolumeClaimSpec,
    /// The volume's id once recovery has learnt it: compared with the driver's answer after a restart, never deleted on its own.
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

    /// The annotation value: the journal's form, whose annotations are only the selected node whatever this entry
    /// was built from (recovery works from a claim being deleted with all its annotations, and an entry recorded
    /// from it must still pass [`entry_defect`] once the claim is gone).
    pub fn to_json(&self) -> String {
        let annotations = kept_annotations(&self.annotations);
        serde_json::to_string(&InFlightEntry { annotations, ..self.clone() }).unwrap_or_default()
    }

    /// An entry read back from the journal; `None` when the text is not one.
    pub fn parse(text: &str) -> Option<InFlightEntry> {
        serde_json::from_str(text).ok()
    }
}

/// The entry for `claim`, about to be provisioned. Of its annotations only the selected node is kept: the
/// journal takes no claim whose class reads others ([`journal_may_take`]).
pub fn in_flight_entry(claim: &PersistentVolumeClaim) -> InFlightEntry {
    let annotations = claim.metadata.annotations.as_ref().map(kept_annotations).unwrap_or_default();
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

/// Of a claim's annotations, those the journal keeps: the selected node.
fn kept_annotations(annotations: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let kept = |key: &str| key == ANN_SELECTED_NODE || key == ANN_ALPHA_SELECTED_NODE;
    annotations.iter().filter(|(key, _)| kept(key)).map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// Whether the journal may take `claim` of `class` (its CSI form). Only when recovering it reads nothing but the
/// class and the claim's UID: a secret templated from the claim (`${pvc.namespace}`, `${pvc.name}`,
/// `${pvc.annotations['...']}`) or a data source (a snapshot or claim, whose protection recovery releases) would
/// let a forged entry choose what the provisioner reads and sends. Such claims are protected by the finalizer
/// instead: their claim stays in the API while it is deleted, and recovery reads it rather than an entry.
pub fn journal_may_take(claim: &PersistentVolumeClaim, class: &StorageClass) -> bool {
    let spec = claim.spec.as_ref();
    let data_source = spec.is_some_and(|s| s.data_source.is_some() || s.data_source_ref.is_some());
    !data_source && claim_templated_parameter(class).is_none()
}

/// The first class parameter whose value is templated from the claim.
fn claim_templated_parameter(class: &StorageClass) -> Option<&str> {
    class.parameters.iter().flatten().find(|(_, value)| value.contains("${pvc.")).map(|(key, _)| key.as_str())
}

/// Why the journal entry under `key_uid`, whose claim is gone, cannot be this provisioner's own: `None` when it
/// can. `class` is the entry's class (its CSI form), when it exists. A defect means the entry was forged, damaged
/// or written for a claim the journal never takes; it is dropped and nothing is read or deleted for it.
pub fn entry_defect(key_uid: &str, entry: &InFlightEntry, class: Option<&StorageClass>) -> Option<String> {
    if entry.uid != key_uid {
        return Some(format!("its uid {:?} is not the one its key names", shorten(&entry.uid)));
    }
    if !is_uid(&entry.uid) {
        return Some(format!("{:?} is not a claim UID", shorten(&entry.uid)));
    }
    if !is_dns1123_label(&entry.namespace) {
        return Some(format!("{:?} is not a namespace name", shorten(&entry.namespace)));
    }
    if !is_dns1123_subdomain(&entry.name) {
        return Some(format!("{:?} is not a claim name", shorten(&entry.name)));
    }
    if entry.spec.data_source.is_some() || entry.spec.data_source_ref.is_some() {
        return Some("it names a data source, and the journal never takes such claims".into());
    }
    if let Some(key) = entry.annotations.keys().find(|k| *k != ANN_SELECTED_NODE && *k != ANN_ALPHA_SELECTED_NODE) {
        return Some(format!("it carries the annotation {:?}, which the journal never keeps", shorten(key)));
    }
    if let Some(parameter) = class.and_then(claim_templated_parameter) {
        return Some(format!(
            "its class templates {parameter:?} from the claim, and the journal never takes such claims"
        ));
    }
    None
}

/// A Kubernetes UID as the API server makes them: a UUID in its canonical form.
fn is_uid(text: &str) -> bool {
    let groups: Vec<&str> = text.split('-').collect();
    let lengths = groups.iter().map(|g| g.len()).collect::<Vec<_>>();
    lengths == [8, 4, 4, 4, 12] && groups.iter().all(|g| g.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Text from an entry as a message quotes it: at most 64 characters.
fn shorten(text: &str) -> String {
    match text.char_indices().nth(64) {
        Some((end, _)) => format!("{}...", &text[..end]),
        None => text.to_string(),
    }
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
    /// The PV exists (or the claim names one): the volume is the PV's business (its reclaim policy decides); the
    /// entry goes.
    Drop,
    /// The claim went before its PV was written: CreateVolume by the same name (CSI calls are idempotent by name)
    /// gives the volume's id, which is recorded in the entry; then, unless a PV holds that volume, DeleteVolume and
    /// the entry goes. An id the entry records already is only compared with the driver's, never deleted on its own
    /// word.
    Recover,
}

/// What to do with `entry`, given where its claim stands and whether the claim's live PV exists (its claimRef names
/// the claim and it is not being deleted: [`super::pv_in_the_way::holds_claim`]) or the claim names a volume.
pub fn entry_step(claim: ClaimNow, volume_exists: bool) -> EntryStep {
    match (volume_exists, claim) {
        (true, _) => EntryStep::Drop,
        (false, ClaimNow::Live) => EntryStep::Keep,
        (false, ClaimNow::Deleting | ClaimNow::Gone) => EntryStep::Recover,
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
    fn entries_keep_the_selected_node_and_no_other_annotation() {
        // (rule, claim annotations, annotations kept)
        type Pairs<'a> = &'a [(&'a str, &'a str)];
        let table: &[(&str, Pairs, Pairs)] = &[
            ("no annotation is read: none kept", &[("note", "x"), ("kubectl.kubernetes.io/last-applied", "{}")], &[]),
            ("the selected node is kept", &[(ANN_SELECTED_NODE, "n1"), ("note", "x")], &[(ANN_SELECTED_NODE, "n1")]),
            ("the alpha selected node is kept", &[(ANN_ALPHA_SELECTED_NODE, "n1")], &[(ANN_ALPHA_SELECTED_NODE, "n1")]),
            ("a secret template's annotation is not kept", &[("example.com/secret", "s1")], &[]),
        ];
        for (rule, annotations, kept) in table {
            let entry = in_flight_entry(&claim(annotations));
            let want: BTreeMap<String, String> = kept.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            assert_eq!(entry.annotations, want, "{rule}");
            assert_eq!((entry.namespace.as_str(), entry.name.as_str()), ("apps", "data"), "{rule}");
            assert_eq!(entry.uid, "0f1e2d3c-aaaa-bbbb-cccc-000011112222", "{rule}");
        }
    }

    #[test]
    fn an_entry_written_from_a_claim_with_all_its_annotations_is_read_back_as_the_journals_own() {
        // Recovery of a claim being deleted works from the claim itself, every annotation kept (the class's
        // templates may read any), and records the volume id it learns: what it writes must pass the checks
        // of an entry whose claim is gone, or the next provisioner rejects it and the volume leaks.
        // (rule, the claim's annotations, the annotations written)
        type Pairs<'a> = &'a [(&'a str, &'a str)];
        let table: &[(&str, Pairs, Pairs)] = &[
            (
                "the controller manager's provisioner annotations",
                &[
                    ("volume.beta.kubernetes.io/storage-provisioner", "d.csi"),
                    ("volume.kubernetes.io/storage-provisioner", "d.csi"),
                    ("pv.kubernetes.io/bind-completed", "yes"),
                ],
                &[],
            ),
            ("the selected node stays", &[(ANN_SELECTED_NODE, "n1"), ("note", "x")], &[(ANN_SELECTED_NODE, "n1")]),
            ("no annotation at all", &[], &[]),
        ];
        for (rule, annotations, written) in table {
            let mut entry = in_flight_entry(&claim(&[]));
            (entry.spec.data_source, entry.spec.data_source_ref) = (None, None);
            entry.annotations = annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            entry.volume_id = Some("vol-1".into());
            let read = InFlightEntry::parse(&entry.to_json()).expect(rule);
            let want: BTreeMap<String, String> = written.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            assert_eq!(read.annotations, want, "{rule}");
            assert_eq!(read.volume_id.as_deref(), Some("vol-1"), "{rule}");
            assert_eq!(entry_defect(&read.uid, &read, None), None, "{rule}");
        }
    }

    #[test]
    fn the_slim_spec_keeps_the_request_fields() {
        let entry = in_flight_entry(&claim(&[]));
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
        // (rule, claim, PV exists or the claim names one, step)
        let table = [
            ("claim live, no PV yet: provisioning carries on", Live, false, Keep),
            ("claim live, PV written: the entry goes", Live, true, Drop),
            ("claim gone, PV written: the PV's reclaim policy decides", Gone, true, Drop),
            ("claim deleting, PV written or named: the same", Deleting, true, Drop),
            ("claim gone before its PV: the volume of its name goes", Gone, false, Recover),
            ("claim deleting before its PV: the same", Deleting, false, Recover),
        ];
        for (rule, claim, exists, want) in table {
            assert_eq!(entry_step(claim, exists), want, "{rule}");
        }
    }

    const UID: &str = "0f1e2d3c-aaaa-bbbb-cccc-000011112222";

    #[test]
    fn the_journal_takes_only_claims_whose_recovery_reads_nothing_they_choose() {
        let templated = "${pvc.namespace}";
        let with_source = {
            let mut c = claim(&[]);
            c.spec.as_mut().unwrap().data_source = None;
            c.spec.as_mut().unwrap().data_source_ref = Some(Default::default());
            c
        };
        let plain = {
            let mut c = claim(&[]);
            c.spec.as_mut().unwrap().data_source = None;
            c
        };
        // (rule, claim, class parameters, taken)
        type Row<'a> = (&'a str, &'a PersistentVolumeClaim, &'a [(&'a str, &'a str)], bool);
        let table: &[Row] = &[
            ("a plain claim of a plain class", &plain, &[("type", "fast")], true),
            (
                "fixed secrets, and pv.name (the UID's own)",
                &plain,
                &[
                    ("csi.storage.k8s.io/provisioner-secret-name", "${pv.name}"),
                    ("csi.storage.k8s.io/provisioner-secret-namespace", "kube-system"),
                ],
                true,
            ),
            (
                "a secret namespace from the claim",
                &plain,
                &[("csi.storage.k8s.io/provisioner-secret-namespace", templated)],
                false,
            ),
            (
                "a secret name from the claim's annotations",
                &plain,
                &[("csi.storage.k8s.io/node-stage-secret-name", "${pvc.annotations['a']}")],
                false,
            ),
            ("a data source", &claim(&[]), &[], false),
            ("a data source reference", &with_source, &[], false),
        ];
        for (rule, claim, parameters, want) in table {
            assert_eq!(journal_may_take(claim, &class(parameters)), *want, "{rule}");
        }
    }

    #[test]
    fn entries_of_gone_claims_are_checked_before_anything_is_read() {
        let good = {
            let mut c = claim(&[(ANN_SELECTED_NODE, "n1")]);
            c.spec.as_mut().unwrap().data_source = None;
            in_flight_entry(&c)
        };
        let with = |change: fn(&mut InFlightEntry)| {
            let mut e = good.clone();
            change(&mut e);
            e
        };
        let templated = class(&[("csi.storage.k8s.io/provisioner-secret-namespace", "${pvc.namespace}")]);
        // (rule, key, entry, class, defect contains; "" for none)
        let table: Vec<(&str, &str, InFlightEntry, Option<StorageClass>, &str)> = vec![
            ("a well-formed entry", UID, good.clone(), Some(class(&[])), ""),
            ("its class gone (recovery then waits for it)", UID, good.clone(), None, ""),
            ("the key names another UID", "0f1e2d3c-aaaa-bbbb-cccc-000011119999", good.clone(), None, "not the one"),
            ("not a UUID", "x", with(|e| e.uid = "x".into()), None, "not a claim UID"),
            (
                "a UUID of non-hex",
                "0f1e2d3c-aaaa-bbbb-cccc-00001111222z",
                with(|e| e.uid = "0f1e2d3c-aaaa-bbbb-cccc-00001111222z".into()),
                None,
                "not a claim UID",
            ),
            ("a namespace no claim could have", UID, with(|e| e.namespace = "Kube_System".into()), None, "namespace"),
            ("an empty namespace", UID, with(|e| e.namespace = String::new()), None, "namespace"),
            ("a name no claim could have", UID, with(|e| e.name = "a/b".into()), None, "claim name"),
            ("a data source", UID, with(|e| e.spec.data_source = Some(Default::default())), None, "data source"),
            (
                "a data source reference",
                UID,
                with(|e| e.spec.data_source_ref = Some(Default::default())),
                None,
                "data source",
            ),
            (
                "an annotation beyond the selected node",
                UID,
                with(|e| {
                    e.annotations.insert("example.com/secret".into(), "s".into());
                }),
                None,
                "annotation",
            ),
            ("a class templating from the claim", UID, good.clone(), Some(templated), "templates"),
        ];
        for (rule, key, entry, class, want) in table {
            let defect = entry_defect(key, &entry, class.as_ref());
            match want {
                "" => assert_eq!(defect, None, "{rule}"),
                text => assert!(defect.as_deref().is_some_and(|d| d.contains(text)), "{rule}: {defect:?}"),
            }
        }
        // Quoted input is bounded, whatever its size.
        let huge = with(|e| e.namespace = "x".repeat(100_000));
        assert!(entry_defect(UID, &huge, None).unwrap().len() < 200);
        let multibyte = with(|e| e.name = "é".repeat(1000));
        assert!(entry_defect(UID, &multibyte, None).unwrap().contains("..."));
    }
}
