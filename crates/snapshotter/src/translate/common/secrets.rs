//! Secret references from VolumeSnapshotClass parameters and their `${…}` templates (external-snapshotter
//! pkg/utils/util.go, GetSecretReference).
//!
//! The snapshot-controller resolves `csi.storage.k8s.io/snapshotter-secret-name/-namespace` when it creates a
//! content and stores the result in the content's deletion-secret annotations, so that DeleteSnapshot still finds
//! the Secret after the class or the snapshot is gone. csi-snapshotter resolves the ListSnapshots secret the same
//! way, without a snapshot ([`SnapshotSecret::SnapshotterList`]). Only references are handled; no secret data.

use sidecar_runtime::object_names::{is_dns1123_label, is_dns1123_subdomain};
use std::collections::BTreeMap;

use kube::ResourceExt;
use snapshot_api::VolumeSnapshot;
use snapshot_api::names::{
    PARAM_SNAPSHOTTER_LIST_SECRET_NAME, PARAM_SNAPSHOTTER_LIST_SECRET_NAMESPACE, PARAM_SNAPSHOTTER_SECRET_NAME,
    PARAM_SNAPSHOTTER_SECRET_NAMESPACE,
};

use super::names::go_quoted;

/// The operations a VolumeSnapshotClass can name a secret for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnapshotSecret {
    /// CreateSnapshot and DeleteSnapshot.
    Snapshotter,
    /// ListSnapshots.
    SnapshotterList,
}

impl SnapshotSecret {
    /// The word upstream's messages use.
    fn display_name(self) -> &'static str {
        match self {
            SnapshotSecret::Snapshotter => "Snapshotter",
            SnapshotSecret::SnapshotterList => "SnapshotterList",
        }
    }

    /// The (name, namespace) parameter keys.
    pub fn keys(self) -> (&'static str, &'static str) {
        match self {
            SnapshotSecret::Snapshotter => (PARAM_SNAPSHOTTER_SECRET_NAME, PARAM_SNAPSHOTTER_SECRET_NAMESPACE),
            SnapshotSecret::SnapshotterList => {
                (PARAM_SNAPSHOTTER_LIST_SECRET_NAME, PARAM_SNAPSHOTTER_LIST_SECRET_NAMESPACE)
            }
        }
    }
}

/// A resolved reference to a Secret. Holds no secret data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretRef {
    pub namespace: String,
    pub name: String,
}

/// The Secret the class names for `kind`, resolved for the content `content_name` and, when known, its snapshot.
///
/// Tokens: `${volumesnapshotcontent.name}` everywhere; `${volumesnapshot.namespace}` when a snapshot is given; and in
/// the name only, `${volumesnapshot.name}` (the one value the snapshot's user picks freely, so it may not choose
/// the namespace). The namespace must resolve to a DNS-1123 label, the name to a DNS-1123 subdomain.
pub fn secret_reference(
    kind: SnapshotSecret,
    parameters: Option<&BTreeMap<String, String>>,
    content_name: &str,
    snapshot: Option<&VolumeSnapshot>,
) -> Result<Option<SecretRef>, String> {
    let empty = BTreeMap::new();
    let parameters = parameters.unwrap_or(&empty);
    let Some((name_template, namespace_template)) = templates(kind, parameters)
        .map_err(|e| format!("failed to get name and namespace template from params: {e}"))?
    else {
        return Ok(None);
    };

    let mut tokens = BTreeMap::from([("volumesnapshotcontent.name", content_name.to_string())]);
    if let Some(snapshot) = snapshot {
        tokens.insert("volumesnapshot.namespace", snapshot.namespace().unwrap_or_default());
    }
    let namespace = expand(namespace_template, &tokens)
        .map_err(|e| format!("error resolving value {}: {e}", go_quoted(namespace_template)))?;
    if !is_dns1123_label(&namespace) {
        return Err(invalid(namespace_template, &namespace, "namespace name"));
    }

    if let Some(snapshot) = snapshot {
        tokens.insert("volumesnapshot.name", snapshot.name_any());
    }
    let name = expand(name_template, &tokens)
        .map_err(|e| format!("error resolving value {}: {e}", go_quoted(name_template)))?;
    if !is_dns1123_subdomain(&name) {
        return Err(invalid(name_template, &name, "secret name"));
    }
    Ok(Some(SecretRef { namespace, name }))
}

/// The (name, namespace) templates: none, or both and non-empty.
fn templates(kind: SnapshotSecret, parameters: &BTreeMap<String, String>) -> Result<Option<(&str, &str)>, String> {
    let (name_key, namespace_key) = kind.keys();
    let what = kind.display_name();
    match (parameters.get(name_key), parameters.get(namespace_key)) {
        (None, None) => Ok(None),
        (Some(name), Some(namespace)) if name.is_empty() || namespace.is_empty() => {
            Err(format!("{what} secrets specified in parameters but value of either namespace or name is empty"))
        }
        (Some(name), Some(namespace)) => Ok(Some((name, namespace))),
        _ => Err(format!("either name and namespace for {what} secrets specified, Both must be specified")),
    }
}

fn invalid(template: &str, resolved: &str, what: &str) -> String {
    if template != resolved {
        format!("{} resolved to {} which is not a valid {what}", go_quoted(template), go_quoted(resolved))
    } else {
        format!("{} is not a valid {what}", go_quoted(template))
    }
}

/// Expands `${token}` and `$token` as Go's `os.Expand` does; unknown tokens are an error listing them all.
fn expand(template: &str, tokens: &BTreeMap<&str, String>) -> Result<String, String> {
    sidecar_runtime::go_expand::resolve(template, |name| tokens.get(name).cloned()).map_err(|unknown| {
        let list: Vec<String> = unknown.iter().map(|m| go_quoted(m)).collect();
        format!("invalid tokens: [{}]", list.join(" "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::translate::common::fixtures::*;

    const NAME: &str = "csi.storage.k8s.io/snapshotter-secret-name";
    const NAMESPACE: &str = "csi.storage.k8s.io/snapshotter-secret-namespace";

    fn params(name: Option<&str>, namespace: Option<&str>) -> BTreeMap<String, String> {
        let mut map = BTreeMap::new();
        if let Some(name) = name {
            map.insert(NAME.to_string(), name.to_string());
        }
        if let Some(namespace) = namespace {
            map.insert(NAMESPACE.to_string(), namespace.to_string());
        }
        map
    }

    #[test]
    fn snapshotter_secret_templates() {
        let vs = snapshot_of_claim("team-a", "db-snap", "uid-1", "data");
        let ok = |namespace: &str, name: &str| Ok(Some(SecretRef { namespace: namespace.into(), name: name.into() }));
        // (rule, name template, namespace template, result)
        type Row = (&'static str, Option<&'static str>, Option<&'static str>, Result<Option<SecretRef>, String>);
        let table: Vec<Row> = vec![
            ("no secret", None, None, Ok(None)),
            ("literal", Some("creds"), Some("kube-system"), ok("kube-system", "creds")),
            (
                "all tokens",
                Some("${volumesnapshot.name}-${volumesnapshotcontent.name}"),
                Some("${volumesnapshot.namespace}"),
                ok("team-a", "db-snap-snapcontent-uid-1"),
            ),
            ("unbraced token", Some("$x"), Some("ns"), Err(r#"error resolving value "$x": invalid tokens: ["x"]"#.into())),
            (
                "name only in the name",
                Some("s"),
                Some("${volumesnapshot.name}"),
                Err(r#"error resolving value "${volumesnapshot.name}": invalid tokens: ["volumesnapshot.name"]"#.into()),
            ),
            (
                "unknown tokens listed",
                Some("${b}-${a}"),
                Some("ns"),
                Err(r#"error resolving value "${b}-${a}": invalid tokens: ["a" "b"]"#.into()),
            ),
            (
                "name without namespace",
                Some("s"),
                None,
                Err("failed to get name and namespace template from params: either name and namespace for Snapshotter secrets specified, Both must be specified".into()),
            ),
            (
                "empty value",
                Some(""),
                Some("ns"),
                Err("failed to get name and namespace template from params: Snapshotter secrets specified in parameters but value of either namespace or name is empty".into()),
            ),
            ("namespace must be a label", Some("s"), Some("a.b"), Err(r#""a.b" is not a valid namespace name"#.into())),
            (
                "resolved namespace must be a label",
                Some("s"),
                Some("${volumesnapshotcontent.name}-X"),
                Err(r#""${volumesnapshotcontent.name}-X" resolved to "snapcontent-uid-1-X" which is not a valid namespace name"#.into()),
            ),
            ("name must be a subdomain", Some("Creds"), Some("ns"), Err(r#""Creds" is not a valid secret name"#.into())),
            ("dotted name is a subdomain", Some("a.b"), Some("ns"), ok("ns", "a.b")),
        ];
        for (rule, name, namespace, want) in table {
            let p = params(name, namespace);
            let got = secret_reference(SnapshotSecret::Snapshotter, Some(&p), "snapcontent-uid-1", Some(&vs));
            assert_eq!(got, want, "{rule}");
        }
    }

    #[test]
    fn list_secret_without_a_snapshot() {
        let p = BTreeMap::from([
            (PARAM_SNAPSHOTTER_LIST_SECRET_NAME.to_string(), "${volumesnapshotcontent.name}".to_string()),
            (PARAM_SNAPSHOTTER_LIST_SECRET_NAMESPACE.to_string(), "${volumesnapshot.namespace}".to_string()),
        ]);
        assert_eq!(
            secret_reference(SnapshotSecret::SnapshotterList, Some(&p), "c", None),
            Err(r#"error resolving value "${volumesnapshot.namespace}": invalid tokens: ["volumesnapshot.namespace"]"#
                .into())
        );
    }

    #[test]
    fn go_expand_corners() {
        let tokens = BTreeMap::from([("a", "1".to_string())]);
        // (template, expanded)
        let table = [("x$", "x$"), ("${}y", "y"), ("$a.b", "1.b"), ("${a}${a}", "11"), ("$.", "$."), ("${a", "a")];
        for (template, want) in table {
            assert_eq!(expand(template, &tokens).as_deref(), Ok(want), "{template}");
        }
    }
}

#[cfg(test)]
#[path = "secrets_prop.rs"]
mod prop_tests;
