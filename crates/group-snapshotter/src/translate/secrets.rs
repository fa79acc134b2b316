//! The Secret DeleteVolumeGroupSnapshot (and CreateVolumeGroupSnapshot) is called with: named by the class
//! parameters `csi.storage.k8s.io/group-snapshotter-secret-name` / `-namespace`, possibly through templates, and kept
//! on the content as the `groupsnapshot.storage.kubernetes.io/deletion-secret-*` annotations, so that deletion
//! works after the class is gone (upstream: external-snapshotter, pkg/common-controller/
//! groupsnapshot_controller_helper.go, `createGroupSnapshotContent`).

use sidecar_runtime::object_names::{is_dns1123_label, is_dns1123_subdomain};
use std::collections::BTreeMap;

use snapshot_api::names::{
    PARAM_GROUP_SNAPSHOTTER_GET_SECRET_NAME, PARAM_GROUP_SNAPSHOTTER_GET_SECRET_NAMESPACE,
    PARAM_GROUP_SNAPSHOTTER_SECRET_NAME, PARAM_GROUP_SNAPSHOTTER_SECRET_NAMESPACE,
};

/// A Secret by namespace and name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretReference {
    pub name: String,
    pub namespace: String,
}

/// A class whose secret parameters cannot be resolved.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    #[error("either name and namespace for group snapshotter secrets specified, both must be specified")]
    Incomplete,
    #[error("{key} parameter must not be empty")]
    Empty { key: &'static str },
    #[error("{key} parameter {value:?} contains unknown token {token}")]
    UnknownToken { key: &'static str, value: String, token: String },
    #[error("{key} parameter {value:?} resolves to {resolved:?}, which is not a valid {what}")]
    Invalid { key: &'static str, value: String, resolved: String, what: &'static str },
}

/// What the templates may refer to.
#[derive(Clone, Copy, Debug)]
pub struct TemplateValues<'a> {
    pub group_name: &'a str,
    pub group_namespace: &'a str,
    pub content_name: &'a str,
}

/// The deletion Secret of a group content made with a class of these parameters, or `None` when the class names no
/// Secret. The namespace may use `${volumegroupsnapshotcontent.name}` and `${volumegroupsnapshot.namespace}`; the
/// name may also use `${volumegroupsnapshot.name}`.
pub fn deletion_secret(
    parameters: Option<&BTreeMap<String, String>>,
    values: TemplateValues<'_>,
) -> Result<Option<SecretReference>, SecretError> {
    let get = |key: &str| parameters.and_then(|p| p.get(key));
    let (name, namespace) =
        match (get(PARAM_GROUP_SNAPSHOTTER_SECRET_NAME), get(PARAM_GROUP_SNAPSHOTTER_SECRET_NAMESPACE)) {
            (None, None) => return Ok(None),
            (Some(name), Some(namespace)) => (name, namespace),
            _ => return Err(SecretError::Incomplete),
        };
    let namespace_tokens = [
        ("${volumegroupsnapshotcontent.name}", values.content_name),
        ("${volumegroupsnapshot.namespace}", values.group_namespace),
    ];
    let namespace = resolve(PARAM_GROUP_SNAPSHOTTER_SECRET_NAMESPACE, namespace, &namespace_tokens)?;
    if !is_dns1123_label(&namespace.1) {
        return Err(invalid(PARAM_GROUP_SNAPSHOTTER_SECRET_NAMESPACE, namespace, "namespace (DNS-1123 label)"));
    }
    let name_tokens = [namespace_tokens[0], namespace_tokens[1], ("${volumegroupsnapshot.name}", values.group_name)];
    let name = resolve(PARAM_GROUP_SNAPSHOTTER_SECRET_NAME, name, &name_tokens)?;
    if !is_dns1123_subdomain(&name.1) {
        return Err(invalid(PARAM_GROUP_SNAPSHOTTER_SECRET_NAME, name, "Secret name (DNS-1123 subdomain)"));
    }
    Ok(Some(SecretReference { name: name.1, namespace: namespace.1 }))
}

/// The Secret GetVolumeGroupSnapshot of a pre-provisioned content is called with: the class parameters
/// `csi.storage.k8s.io/group-snapshotter-get-secret-name` / `-namespace`. A pre-provisioned
/// content has no group snapshot of its own to name, so the only token is `${volumegroupsnapshotcontent.name}`.
pub fn get_secret(
    parameters: Option<&BTreeMap<String, String>>,
    content_name: &str,
) -> Result<Option<SecretReference>, SecretError> {
    let get = |key: &str| parameters.and_then(|p| p.get(key));
    let (name, namespace) =
        match (get(PARAM_GROUP_SNAPSHOTTER_GET_SECRET_NAME), get(PARAM_GROUP_SNAPSHOTTER_GET_SECRET_NAMESPACE)) {
            (None, None) => return Ok(None),
            (Some(name), Some(namespace)) => (name, namespace),
            _ => return Err(SecretError::Incomplete),
        };
    let tokens = [("${volumegroupsnapshotcontent.name}", content_name)];
    let namespace = resolve(PARAM_GROUP_SNAPSHOTTER_GET_SECRET_NAMESPACE, namespace, &tokens)?;
    if !is_dns1123_label(&namespace.1) {
        return Err(invalid(PARAM_GROUP_SNAPSHOTTER_GET_SECRET_NAMESPACE, namespace, "namespace (DNS-1123 label)"));
    }
    let name = resolve(PARAM_GROUP_SNAPSHOTTER_GET_SECRET_NAME, name, &tokens)?;
    if !is_dns1123_subdomain(&name.1) {
        return Err(invalid(PARAM_GROUP_SNAPSHOTTER_GET_SECRET_NAME, name, "Secret name (DNS-1123 subdomain)"));
    }
    Ok(Some(SecretReference { name: name.1, namespace: namespace.1 }))
}

/// The template and what it resolves to.
fn resolve(key: &'static str, template: &str, tokens: &[(&str, &str)]) -> Result<(String, String), SecretError> {
    if template.is_empty() {
        return Err(SecretError::Empty { key });
    }
    let mut resolved = String::new();
    let mut rest = template;
    while let Some(start) = rest.find("${") {
        resolved.push_str(&rest[..start]);
        let end = rest[start..].find('}').map_or(rest.len(), |e| start + e + 1);
        let token = &rest[start..end];
        let Some((_, value)) = tokens.iter().find(|(t, _)| *t == token) else {
            return Err(SecretError::UnknownToken { key, value: template.into(), token: token.into() });
        };
        resolved.push_str(value);
        rest = &rest[end..];
    }
    resolved.push_str(rest);
    Ok((template.to_string(), resolved))
}

fn invalid(key: &'static str, (value, resolved): (String, String), what: &'static str) -> SecretError {
    SecretError::Invalid { key, value, resolved, what }
}

/// The Secret could not be read: the text of the Warning (and the status error) of the driver call it was for.
pub fn secret_read_error(secret: &SecretReference, error: &str) -> String {
    format!("error getting secret {} in namespace {}: {error}", secret.name, secret.namespace)
}

/// The content's deletion Secret annotations, when it has both.
pub fn secret_from_annotations(
    annotations: Option<&BTreeMap<String, String>>,
    name_key: &str,
    namespace_key: &str,
) -> Option<SecretReference> {
    let annotations = annotations?;
    Some(SecretReference {
        name: annotations.get(name_key)?.clone(),
        namespace: annotations.get(namespace_key)?.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALUES: TemplateValues<'static> =
        TemplateValues { group_name: "group", group_namespace: "ns", content_name: "groupsnapcontent-uid" };

    fn parameters(name: Option<&str>, namespace: Option<&str>) -> BTreeMap<String, String> {
        let mut parameters = BTreeMap::from([("type".to_string(), "fast".to_string())]);
        if let Some(name) = name {
            parameters.insert(PARAM_GROUP_SNAPSHOTTER_SECRET_NAME.into(), name.into());
        }
        if let Some(namespace) = namespace {
            parameters.insert(PARAM_GROUP_SNAPSHOTTER_SECRET_NAMESPACE.into(), namespace.into());
        }
        parameters
    }

    fn secret(name: &str, namespace: &str) -> Option<SecretReference> {
        Some(SecretReference { name: name.into(), namespace: namespace.into() })
    }

    #[test]
    fn templates_resolve() {
        // (name, namespace, secret)
        let table = [
            (None, None, Ok(None)),
            (Some("creds"), Some("kube-system"), Ok(secret("creds", "kube-system"))),
            (
                Some("${volumegroupsnapshot.name}-creds"),
                Some("${volumegroupsnapshot.namespace}"),
                Ok(secret("group-creds", "ns")),
            ),
            (
                Some("${volumegroupsnapshotcontent.name}.${volumegroupsnapshot.namespace}"),
                Some("${volumegroupsnapshotcontent.name}"),
                Ok(secret("groupsnapcontent-uid.ns", "groupsnapcontent-uid")),
            ),
            (Some("creds"), None, Err("both must be specified")),
            (None, Some("ns"), Err("both must be specified")),
            (Some(""), Some("ns"), Err("group-snapshotter-secret-name parameter must not be empty")),
            // The group's name is not a namespace token.
            (Some("creds"), Some("${volumegroupsnapshot.name}"), Err("unknown token ${volumegroupsnapshot.name}")),
            (Some("${pvc.name}"), Some("ns"), Err("unknown token ${pvc.name}")),
            (Some("${volumegroupsnapshot.name"), Some("ns"), Err("unknown token ${volumegroupsnapshot.name")),
            (Some("creds"), Some("Not_A_Namespace"), Err("not a valid namespace")),
            (Some("-creds"), Some("ns"), Err("not a valid Secret name")),
        ];
        for (name, namespace, want) in table {
            let parameters = parameters(name, namespace);
            let got = deletion_secret(Some(&parameters), VALUES);
            match want {
                Ok(want) => assert_eq!(got, Ok(want), "{name:?} {namespace:?}"),
                Err(text) => {
                    let err = got.unwrap_err().to_string();
                    assert!(err.contains(text), "{name:?} {namespace:?}: {err}");
                }
            }
        }
        assert_eq!(deletion_secret(None, VALUES), Ok(None));
    }

    #[test]
    fn get_secrets_come_from_their_own_parameters() {
        let get = |name: Option<&str>, namespace: Option<&str>| {
            let mut parameters = parameters(Some("delete-creds"), Some("ns"));
            name.map(|n| parameters.insert(PARAM_GROUP_SNAPSHOTTER_GET_SECRET_NAME.into(), n.into()));
            namespace.map(|n| parameters.insert(PARAM_GROUP_SNAPSHOTTER_GET_SECRET_NAMESPACE.into(), n.into()));
            parameters
        };
        // (name, namespace, secret or error text)
        let table = [
            (None, None, Ok(None)),
            (Some("get-creds"), Some("kube-system"), Ok(secret("get-creds", "kube-system"))),
            (Some("${volumegroupsnapshotcontent.name}"), Some("ns"), Ok(secret("imported", "ns"))),
            (Some("get-creds"), None, Err("both must be specified")),
            (Some("${volumegroupsnapshot.name}"), Some("ns"), Err("unknown token ${volumegroupsnapshot.name}")),
            (Some("creds"), Some("Bad_NS"), Err("not a valid namespace")),
        ];
        for (name, namespace, want) in table {
            let got = get_secret(Some(&get(name, namespace)), "imported");
            match want {
                Ok(want) => assert_eq!(got, Ok(want), "{name:?} {namespace:?}"),
                Err(text) => {
                    let err = got.unwrap_err().to_string();
                    assert!(err.contains(text), "{name:?} {namespace:?}: {err}");
                }
            }
        }
        assert_eq!(get_secret(None, "imported"), Ok(None));
    }

    #[test]
    fn an_unreadable_secret_is_named() {
        let secret = SecretReference { name: "creds".into(), namespace: "kube-system".into() };
        assert_eq!(
            secret_read_error(&secret, "secrets \"creds\" is forbidden"),
            "error getting secret creds in namespace kube-system: secrets \"creds\" is forbidden"
        );
    }
}
