//! Which Secret each call of csi-snapshotter sends: DeleteSnapshot, CreateSnapshot, ListSnapshots. Only references are
//! resolved here; the controller reads the Secret's data into the request's `secrets`, which never reach a log or an
//! event.
//!
//! - CreateSnapshot and DeleteSnapshot: the Secret the snapshot-controller resolved from the class when it made the
//!   content and wrote into the content's deletion-secret annotations (the class may be gone by deletion time).
//! - ListSnapshots: the class's `snapshotter-list-secret-*` templates, where only `${volumesnapshotcontent.name}` may
//!   be used; a group member has no class and uses the deletion-secret annotations instead.

use sidecar_runtime::object_names::{is_dns1123_label, is_dns1123_subdomain};
use std::collections::BTreeMap;

use snapshot_api::VolumeSnapshotContent;
use snapshot_api::names::{
    ANN_DELETION_SECRET_NAME, ANN_DELETION_SECRET_NAMESPACE, PARAM_SNAPSHOTTER_LIST_SECRET_NAME,
    PARAM_SNAPSHOTTER_LIST_SECRET_NAMESPACE,
};

/// A reference to a Secret. Holds no secret data.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SecretRef {
    pub namespace: String,
    pub name: String,
}

/// The token a list-secret template may use.
const TOKEN_CONTENT_NAME: &str = "volumesnapshotcontent.name";

/// The Secret named by the content's deletion-secret annotations: both set and non-empty, else none.
pub fn deletion_secret(content: &VolumeSnapshotContent) -> Option<SecretRef> {
    let annotations = content.metadata.annotations.as_ref()?;
    let name = annotations.get(ANN_DELETION_SECRET_NAME).filter(|n| !n.is_empty())?;
    let namespace = annotations.get(ANN_DELETION_SECRET_NAMESPACE).filter(|n| !n.is_empty())?;
    Some(SecretRef { namespace: namespace.clone(), name: name.clone() })
}

/// The ListSnapshots Secret a class names for `content_name`: none when the class gives neither key; an error when it
/// gives one key only, an empty value, an unknown token, or a result that is not a valid namespace or Secret name.
pub fn list_secret(parameters: &BTreeMap<String, String>, content_name: &str) -> Result<Option<SecretRef>, String> {
    let name_template = parameters.get(PARAM_SNAPSHOTTER_LIST_SECRET_NAME);
    let namespace_template = parameters.get(PARAM_SNAPSHOTTER_LIST_SECRET_NAMESPACE);
    let (name_template, namespace_template) = match (name_template, namespace_template) {
        (None, None) => return Ok(None),
        (Some(name), Some(namespace)) if !name.is_empty() && !namespace.is_empty() => (name, namespace),
        (Some(_), Some(_)) => {
            return Err(format!(
                "{PARAM_SNAPSHOTTER_LIST_SECRET_NAME} and {PARAM_SNAPSHOTTER_LIST_SECRET_NAMESPACE} must not be empty"
            ));
        }
        _ => {
            return Err(format!(
                "{PARAM_SNAPSHOTTER_LIST_SECRET_NAME} and {PARAM_SNAPSHOTTER_LIST_SECRET_NAMESPACE} must be given together"
            ));
        }
    };
    let namespace = resolve(namespace_template, content_name)?;
    if !is_dns1123_label(&namespace) {
        return Err(invalid(namespace_template, &namespace, "namespace name"));
    }
    let name = resolve(name_template, content_name)?;
    if !is_dns1123_subdomain(&name) {
        return Err(invalid(name_template, &name, "secret name"));
    }
    Ok(Some(SecretRef { namespace, name }))
}

fn invalid(template: &str, resolved: &str, what: &str) -> String {
    if template == resolved {
        format!("{template:?} is not a valid {what}")
    } else {
        format!("{template:?} resolved to {resolved:?} which is not a valid {what}")
    }
}

/// Expands `${token}` and `$token` (shell syntax, as Go's `os.Expand`) with the one token a list secret may use.
fn resolve(template: &str, content_name: &str) -> Result<String, String> {
    sidecar_runtime::go_expand::resolve(template, |name| (name == TOKEN_CONTENT_NAME).then(|| content_name.into()))
        .map_err(|unknown| {
            let list: Vec<String> = unknown.iter().map(|t| format!("{t:?}")).collect();
            format!("error resolving value {template:?}: invalid tokens: [{}]", list.join(" "))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::translate::sidecar::fixtures::content;

    fn secret(namespace: &str, name: &str) -> SecretRef {
        SecretRef { namespace: namespace.into(), name: name.into() }
    }

    #[test]
    fn deletion_secret_comes_from_both_annotations() {
        let annotated = |pairs: &[(&str, &str)]| {
            let mut c = content();
            c.metadata.annotations = Some(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
            c
        };
        // (rule, content, reference)
        let table = [
            ("no annotations: no secret", content(), None),
            (
                "both annotations",
                annotated(&[(ANN_DELETION_SECRET_NAME, "s"), (ANN_DELETION_SECRET_NAMESPACE, "ns")]),
                Some(secret("ns", "s")),
            ),
            ("the name alone is not enough", annotated(&[(ANN_DELETION_SECRET_NAME, "s")]), None),
            ("the namespace alone is not enough", annotated(&[(ANN_DELETION_SECRET_NAMESPACE, "ns")]), None),
            (
                "an empty value is no reference",
                annotated(&[(ANN_DELETION_SECRET_NAME, ""), (ANN_DELETION_SECRET_NAMESPACE, "ns")]),
                None,
            ),
        ];
        for (rule, content, want) in table {
            assert_eq!(deletion_secret(&content), want, "{rule}");
        }
    }

    #[test]
    fn list_secret_templates() {
        let params = |name: Option<&str>, namespace: Option<&str>| {
            let mut p = BTreeMap::from([("driver-param".to_string(), "x".to_string())]);
            p.extend(name.map(|n| (PARAM_SNAPSHOTTER_LIST_SECRET_NAME.to_string(), n.to_string())));
            p.extend(namespace.map(|n| (PARAM_SNAPSHOTTER_LIST_SECRET_NAMESPACE.to_string(), n.to_string())));
            p
        };
        // (rule, name template, namespace template, result: Ok(reference) or Err(part of the message))
        type Resolved = Result<Option<SecretRef>, &'static str>;
        let table: [(&str, Option<&str>, Option<&str>, Resolved); 11] = [
            ("neither key: no secret", None, None, Ok(None)),
            ("plain names", Some("list"), Some("kube-system"), Ok(Some(secret("kube-system", "list")))),
            (
                "the content name in the name",
                Some("list-${volumesnapshotcontent.name}"),
                Some("ns"),
                Ok(Some(secret("ns", "list-snapcontent-1"))),
            ),
            (
                "the content name in the namespace",
                Some("list"),
                Some("${volumesnapshotcontent.name}"),
                Ok(Some(secret("snapcontent-1", "list"))),
            ),
            ("only the name", Some("list"), None, Err("must be given together")),
            ("only the namespace", None, Some("ns"), Err("must be given together")),
            ("an empty value", Some(""), Some("ns"), Err("must not be empty")),
            (
                "the snapshot's tokens are not available to the sidecar",
                Some("${volumesnapshot.name}"),
                Some("ns"),
                Err(r#"invalid tokens: ["volumesnapshot.name"]"#),
            ),
            ("shell-style unknown token", Some("$foo-x"), Some("ns"), Err(r#"invalid tokens: ["foo"]"#)),
            ("an invalid namespace", Some("list"), Some("Not_Valid"), Err("is not a valid namespace name")),
            ("an invalid name", Some("UPPER"), Some("ns"), Err(r#""UPPER" is not a valid secret name"#)),
        ];
        for (rule, name, namespace, want) in table {
            let got = list_secret(&params(name, namespace), "snapcontent-1");
            match want {
                Ok(reference) => assert_eq!(got, Ok(reference), "{rule}"),
                Err(part) => {
                    let message = got.expect_err(rule);
                    assert!(message.contains(part), "{rule}: {message}");
                }
            }
        }
    }

    #[test]
    fn template_syntax() {
        // (template, expansion), as Go's os.Expand: a trailing `$` and one before a character that starts no name
        // stay; an unclosed `${` and `${}` vanish; `$-` and `$$` name the variables `-` and `$`. The rows from
        // `${` on were kept as written before, and found by the property tests in go_expand_prop.rs.
        let table = [
            ("a$", Ok("a$")),
            ("a$.b", Ok("a$.b")),
            ("x-${volumesnapshotcontent.name}-y", Ok("x-c-y")),
            ("${", Ok("")),
            ("a${}b", Ok("ab")),
            ("$-a", Err(r#"error resolving value "$-a": invalid tokens: ["-"]"#)),
            ("$$", Err(r#"error resolving value "$$": invalid tokens: ["$"]"#)),
        ];
        for (template, want) in table {
            assert_eq!(resolve(template, "c"), want.map(String::from).map_err(String::from), "{template}");
        }
        let resolved = "x".repeat(64);
        assert!(
            list_secret(
                &BTreeMap::from([
                    (PARAM_SNAPSHOTTER_LIST_SECRET_NAME.to_string(), "n".to_string()),
                    (PARAM_SNAPSHOTTER_LIST_SECRET_NAMESPACE.to_string(), "${volumesnapshotcontent.name}".to_string()),
                ]),
                &resolved,
            )
            .unwrap_err()
            .contains("resolved to")
        );
    }
}

#[cfg(test)]
#[path = "secrets_prop.rs"]
mod prop_tests;
