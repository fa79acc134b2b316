//! How the snapshot-controller names and points at objects: the `ns/name` key of its messages, the dynamic
//! content's name, the back-pointer a content carries, and the questions upstream asks of a snapshot's state.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::{Resource, ResourceExt};
use snapshot_api::names::{DYNAMIC_CONTENT_NAME_PREFIX, GROUP_SNAPSHOT_API_VERSION, KIND_VOLUME_GROUP_SNAPSHOT};
use snapshot_api::{VolumeSnapshot, VolumeSnapshotContent};

/// `namespace/name`, the way upstream's messages name a snapshot.
pub fn snapshot_key(snapshot: &VolumeSnapshot) -> String {
    format!("{}/{}", snapshot.namespace().unwrap_or_default(), snapshot.name_any())
}

/// `snapcontent-<snapshot UID>`: the content a dynamic snapshot gets. Deterministic, so that a controller killed
/// between creating the content and recording it in the snapshot's status finds it again.
pub fn dynamic_content_name(snapshot: &VolumeSnapshot) -> String {
    format!("{DYNAMIC_CONTENT_NAME_PREFIX}{}", snapshot.uid().unwrap_or_default())
}

/// The full reference to the snapshot a new content points back at (kind, namespace, name, uid, apiVersion,
/// resourceVersion), as client-go's `ref.GetReference` builds it.
pub fn snapshot_reference(snapshot: &VolumeSnapshot) -> ObjectReference {
    ObjectReference { resource_version: snapshot.resource_version(), ..snapshot.object_ref(&()) }
}

/// Whether the content points back at this very snapshot: name, namespace and UID all equal.
pub fn content_points_back(snapshot: &VolumeSnapshot, content: &VolumeSnapshotContent) -> bool {
    let reference = &content.spec.volume_snapshot_ref;
    reference.name.as_deref().unwrap_or_default() == snapshot.name_any()
        && reference.namespace.as_deref().unwrap_or_default() == snapshot.namespace().unwrap_or_default()
        && reference.uid.as_deref().unwrap_or_default() == snapshot.uid().unwrap_or_default()
}

/// The content name in `status.boundVolumeSnapshotContentName`, when set and not empty.
pub fn bound_content_name(snapshot: &VolumeSnapshot) -> Option<&str> {
    snapshot.status.as_ref()?.bound_volume_snapshot_content_name.as_deref().filter(|name| !name.is_empty())
}

/// `status.readyToUse == true`.
pub fn is_ready(snapshot: &VolumeSnapshot) -> bool {
    snapshot.status.as_ref().and_then(|s| s.ready_to_use) == Some(true)
}

/// Whether the storage system has cut the snapshot (`status.creationTime` is set).
pub fn is_created(snapshot: &VolumeSnapshot) -> bool {
    snapshot.status.as_ref().is_some_and(|s| s.creation_time.is_some())
}

/// The VolumeGroupSnapshot owning this snapshot, when it is a group member (an ownerReference of that kind).
pub fn parent_group_snapshot(snapshot: &VolumeSnapshot) -> Option<&str> {
    snapshot
        .owner_references()
        .iter()
        .find(|owner| owner.kind == KIND_VOLUME_GROUP_SNAPSHOT && owner.api_version == GROUP_SNAPSHOT_API_VERSION)
        .map(|owner| owner.name.as_str())
        .filter(|name| !name.is_empty())
}

/// Text quoted as Go's `%q` quotes it, for messages that must read as upstream's.
pub fn go_quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The text of the NotFound error a client-go lister returns, e.g. `persistentvolumeclaim "data" not found`.
pub fn not_found_text(resource: &str, name: &str) -> String {
    format!("{resource} {} not found", go_quoted(name))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    use super::*;
    use crate::translate::common::fixtures::*;

    #[test]
    fn names_and_references() {
        let vs = snapshot_of_claim("ns", "snap", "uid-1", "claim");
        assert_eq!(snapshot_key(&vs), "ns/snap");
        assert_eq!(dynamic_content_name(&vs), "snapcontent-uid-1");
        let reference = snapshot_reference(&vs);
        assert_eq!(reference.kind.as_deref(), Some("VolumeSnapshot"));
        assert_eq!(reference.api_version.as_deref(), Some("snapshot.storage.k8s.io/v1"));
        assert_eq!(reference.namespace.as_deref(), Some("ns"));
        assert_eq!(reference.name.as_deref(), Some("snap"));
        assert_eq!(reference.uid.as_deref(), Some("uid-1"));
        assert_eq!(reference.resource_version.as_deref(), Some("7"));
    }

    #[test]
    fn go_quoting() {
        assert_eq!(go_quoted("a \"b\"\\\n"), "\"a \\\"b\\\"\\\\\\n\"");
        assert_eq!(not_found_text("persistentvolumeclaim", "data"), "persistentvolumeclaim \"data\" not found");
    }

    #[test]
    fn points_back_needs_name_namespace_and_uid() {
        let vs = snapshot_of_claim("ns", "snap", "uid-1", "claim");
        // (rule, ref namespace, ref name, ref uid, points back)
        let table = [
            ("all equal", "ns", "snap", "uid-1", true),
            ("other name", "ns", "other", "uid-1", false),
            ("other namespace", "ns2", "snap", "uid-1", false),
            ("other uid", "ns", "snap", "uid-2", false),
            ("uid not set yet", "ns", "snap", "", false),
        ];
        for (rule, namespace, name, uid, want) in table {
            let content = content_for("c", namespace, name, uid, ContentSourceKind::Volume);
            assert_eq!(content_points_back(&vs, &content), want, "{rule}");
        }
    }

    #[test]
    fn group_membership_is_an_owner_reference_of_the_v1_kind() {
        let owner = |api_version: &str, kind: &str| OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: "group".into(),
            uid: "g".into(),
            ..Default::default()
        };
        // (rule, owner, member of)
        let table = [
            (
                "VolumeGroupSnapshot v1",
                Some(owner("groupsnapshot.storage.k8s.io/v1", "VolumeGroupSnapshot")),
                Some("group"),
            ),
            ("other version", Some(owner("groupsnapshot.storage.k8s.io/v1beta1", "VolumeGroupSnapshot")), None),
            ("other kind", Some(owner("groupsnapshot.storage.k8s.io/v1", "Other")), None),
            ("no owner", None, None),
        ];
        for (rule, owner, want) in table {
            let mut vs = snapshot_of_claim("ns", "snap", "uid-1", "claim");
            vs.metadata.owner_references = owner.map(|o| vec![o]);
            assert_eq!(parent_group_snapshot(&vs), want, "{rule}");
        }
    }
}
