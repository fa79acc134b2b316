//! Secret references from StorageClass parameters, with their `${…}` templates (external-provisioner
//! `getSecretReference`).
//!
//! Only references are resolved here; the controller reads the Secret and passes its data back through
//! [`credentials`].

use sidecar_runtime::object_names::{is_dns1123_label, is_dns1123_subdomain};
use std::collections::{BTreeMap, HashMap};
use std::fmt;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret, SecretReference};

use super::names::*;
use super::refusal::{Refusal, go_quoted};

/// The operations a StorageClass can name a secret for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SecretKind {
    Provisioner,
    ControllerPublish,
    NodeStage,
    NodePublish,
    ControllerExpand,
    NodeExpand,
    ControllerModify,
}

impl SecretKind {
    /// In the order upstream resolves them.
    pub const ALL: [SecretKind; 7] = [
        SecretKind::Provisioner,
        SecretKind::ControllerPublish,
        SecretKind::NodeStage,
        SecretKind::NodePublish,
        SecretKind::ControllerExpand,
        SecretKind::NodeExpand,
        SecretKind::ControllerModify,
    ];

    /// The word upstream's error messages use for this kind.
    pub fn display_name(self) -> &'static str {
        match self {
            SecretKind::Provisioner => "Provisioner",
            SecretKind::ControllerPublish => "ControllerPublish",
            SecretKind::NodeStage => "NodeStage",
            SecretKind::NodePublish => "NodePublish",
            SecretKind::ControllerExpand => "ControllerExpand",
            SecretKind::NodeExpand => "NodeExpand",
            SecretKind::ControllerModify => "ControllerModify",
        }
    }

    /// The reserved (name, namespace) parameter keys.
    pub fn keys(self) -> (&'static str, &'static str) {
        match self {
            SecretKind::Provisioner => (PARAM_PROVISIONER_SECRET_NAME, PARAM_PROVISIONER_SECRET_NAMESPACE),
            SecretKind::ControllerPublish => {
                (PARAM_CONTROLLER_PUBLISH_SECRET_NAME, PARAM_CONTROLLER_PUBLISH_SECRET_NAMESPACE)
            }
            SecretKind::NodeStage => (PARAM_NODE_STAGE_SECRET_NAME, PARAM_NODE_STAGE_SECRET_NAMESPACE),
            SecretKind::NodePublish => (PARAM_NODE_PUBLISH_SECRET_NAME, PARAM_NODE_PUBLISH_SECRET_NAMESPACE),
            SecretKind::ControllerExpand => {
                (PARAM_CONTROLLER_EXPAND_SECRET_NAME, PARAM_CONTROLLER_EXPAND_SECRET_NAMESPACE)
            }
            SecretKind::NodeExpand => (PARAM_NODE_EXPAND_SECRET_NAME, PARAM_NODE_EXPAND_SECRET_NAMESPACE),
            SecretKind::ControllerModify => {
                (PARAM_CONTROLLER_MODIFY_SECRET_NAME, PARAM_CONTROLLER_MODIFY_SECRET_NAMESPACE)
            }
        }
    }

    /// The deprecated (name, namespace) keys without the prefix; only the four oldest kinds have them.
    pub fn deprecated_keys(self) -> Option<(&'static str, &'static str)> {
        match self {
            SecretKind::Provisioner => {
                Some((DEPRECATED_PARAM_PROVISIONER_SECRET_NAME, DEPRECATED_PARAM_PROVISIONER_SECRET_NAMESPACE))
            }
            SecretKind::ControllerPublish => Some((
                DEPRECATED_PARAM_CONTROLLER_PUBLISH_SECRET_NAME,
                DEPRECATED_PARAM_CONTROLLER_PUBLISH_SECRET_NAMESPACE,
            )),
            SecretKind::NodeStage => {
                Some((DEPRECATED_PARAM_NODE_STAGE_SECRET_NAME, DEPRECATED_PARAM_NODE_STAGE_SECRET_NAMESPACE))
            }
            SecretKind::NodePublish => {
                Some((DEPRECATED_PARAM_NODE_PUBLISH_SECRET_NAME, DEPRECATED_PARAM_NODE_PUBLISH_SECRET_NAMESPACE))
            }
            SecretKind::ControllerExpand | SecretKind::NodeExpand | SecretKind::ControllerModify => None,
        }
    }
}

/// A resolved reference to a Secret. Holds no secret data.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SecretRef {
    pub namespace: String,
    pub name: String,
}

impl From<&SecretRef> for SecretReference {
    fn from(r: &SecretRef) -> SecretReference {
        SecretReference { name: Some(r.name.clone()), namespace: Some(r.namespace.clone()) }
    }
}

/// Every secret a StorageClass names, resolved for one claim.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SecretReferences {
    pub provisioner: Option<SecretRef>,
    pub controller_publish: Option<SecretRef>,
    pub node_stage: Option<SecretRef>,
    pub node_publish: Option<SecretRef>,
    pub controller_expand: Option<SecretRef>,
    pub node_expand: Option<SecretRef>,
    pub controller_modify: Option<SecretRef>,
}

impl SecretReferences {
    fn slot(&mut self, kind: SecretKind) -> &mut Option<SecretRef> {
        match kind {
            SecretKind::Provisioner => &mut self.provisioner,
            SecretKind::ControllerPublish => &mut self.controller_publish,
            SecretKind::NodeStage => &mut self.node_stage,
            SecretKind::NodePublish => &mut self.node_publish,
            SecretKind::ControllerExpand => &mut self.controller_expand,
            SecretKind::NodeExpand => &mut self.node_expand,
            SecretKind::ControllerModify => &mut self.controller_modify,
        }
    }
}

/// All seven references, in upstream order; the first bad one is refused (`NoChange`).
///
/// Upstream reads the provisioner Secret before resolving the other six; a controller that wants the same error
/// precedence calls [`secret_reference`] for [`SecretKind::Provisioner`] first, reads that Secret, then calls this.
pub fn secret_references(
    parameters: &BTreeMap<String, String>,
    pv_name: &str,
    claim: Option<&PersistentVolumeClaim>,
) -> Result<SecretReferences, Refusal> {
    let mut out = SecretReferences::default();
    for kind in SecretKind::ALL {
        *out.slot(kind) = secret_reference(kind, parameters, pv_name, claim)?;
    }
    Ok(out)
}

/// The Secret a StorageClass names for one operation: its own keys (new or deprecated), else the default
/// `secret-name`/`secret-namespace`, else none. Templates are resolved against the PV name and the claim.
pub fn secret_reference(
    kind: SecretKind,
    parameters: &BTreeMap<String, String>,
    pv_name: &str,
    claim: Option<&PersistentVolumeClaim>,
) -> Result<Option<SecretRef>, Refusal> {
    resolve(kind, parameters, pv_name, claim).map_err(Refusal::no_change)
}

fn resolve(
    kind: SecretKind,
    parameters: &BTreeMap<String, String>,
    pv_name: &str,
    claim: Option<&PersistentVolumeClaim>,
) -> Result<Option<SecretRef>, String> {
    let own = templates(kind.display_name(), kind.keys(), kind.deprecated_keys(), parameters)
        .map_err(|e| format!("failed to get name and namespace template from params: {e}"))?;
    let chosen = match own {
        Some(t) => Some(t),
        None => templates("Default", (PARAM_SECRET_NAME, PARAM_SECRET_NAMESPACE), None, parameters)
            .map_err(|e| format!("failed to get default name and namespace template from params: {e}"))?,
    };
    let Some((name_template, namespace_template)) = chosen else {
        return Ok(None);
    };

    let claim_name = claim.and_then(|c| c.metadata.name.clone()).unwrap_or_default();
    let claim_namespace = claim.and_then(|c| c.metadata.namespace.clone()).unwrap_or_default();

    // The namespace may only use values the claim's user does not control (except the namespace itself).
    let mut namespace_tokens = HashMap::from([("pv.name".to_string(), pv_name.to_string())]);
    if claim.is_some() {
        namespace_tokens.insert("pvc.namespace".to_string(), claim_namespace.clone());
    }
    let namespace = expand_template(&namespace_template, &namespace_tokens)
        .map_err(|e| format!("error resolving value {}: {e}", go_quoted(&namespace_template)))?;
    if !is_dns1123_label(&namespace) {
        return Err(invalid(&namespace_template, &namespace, "namespace name"));
    }

    let mut name_tokens = namespace_tokens;
    if let Some(claim) = claim {
        name_tokens.insert("pvc.name".to_string(), claim_name);
        name_tokens.insert("pvc.namespace".to_string(), claim_namespace);
        for (key, value) in claim.metadata.annotations.iter().flatten() {
            name_tokens.insert(format!("pvc.annotations['{key}']"), value.clone());
        }
    }
    let name = expand_template(&name_template, &name_tokens)
        .map_err(|e| format!("error resolving value {}: {e}", go_quoted(&name_template)))?;
    if !is_dns1123_subdomain(&name) {
        return Err(invalid(&name_template, &name, "secret name"));
    }
    Ok(Some(SecretRef { namespace, name }))
}

fn invalid(template: &str, resolved: &str, what: &str) -> String {
    if template != resolved {
        format!("{} resolved to {} which is not a valid {what}", go_quoted(template), go_quoted(resolved))
    } else {
        format!("{} is not a valid {what}", go_quoted(template))
    }
}

/// The (name, namespace) templates for one kind: none, or both and non-empty.
fn templates(
    display_name: &str,
    (name_key, namespace_key): (&str, &str),
    deprecated: Option<(&str, &str)>,
    parameters: &BTreeMap<String, String>,
) -> Result<Option<(String, String)>, String> {
    let mut names = Vec::new();
    let mut namespaces = Vec::new();
    if let Some((deprecated_name, deprecated_namespace)) = deprecated {
        names.extend(parameters.get(deprecated_name));
        namespaces.extend(parameters.get(deprecated_namespace));
    }
    names.extend(parameters.get(name_key));
    namespaces.extend(parameters.get(namespace_key));

    if names.len() > 1 || namespaces.len() > 1 {
        return Err(format!(
            "{display_name} secrets specified in parameters with both \"csi\" and \"{RESERVED_PARAMETER_PREFIX}\" keys"
        ));
    }
    match (names.pop(), namespaces.pop()) {
        (None, None) => Ok(None),
        (Some(name), Some(namespace)) => {
            if name.is_empty() || namespace.is_empty() {
                return Err(format!(
                    "{display_name} secrets specified in parameters but value of either namespace or name is empty"
                ));
            }
            Ok(Some((name.clone(), namespace.clone())))
        }
        _ => Err(format!("either name and namespace for {display_name} secrets specified, Both must be specified")),
    }
}

/// Expands `${token}` and `$token` as Go's `os.Expand` does; unknown tokens are an error listing them all.
fn expand_template(template: &str, tokens: &HashMap<String, String>) -> Result<String, String> {
    sidecar_runtime::go_expand::resolve(template, |name| tokens.get(name).cloned()).map_err(|unknown| {
        let list: Vec<String> = unknown.iter().map(|m| go_quoted(m)).collect();
        format!("invalid tokens: [{}]", list.join(" "))
    })
}

/// The data of a Secret as strings, the way upstream sends it in CSI `secrets`. Never printed.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Credentials(HashMap<String, String>);

impl Credentials {
    pub fn into_map(self) -> HashMap<String, String> {
        self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&csi_client::redact::Stripped, f)
    }
}

/// The Secret's `data`, each value converted to a string (external-provisioner `getCredentials`).
pub fn credentials(secret: &Secret) -> Credentials {
    Credentials(
        secret
            .data
            .iter()
            .flatten()
            .map(|(key, value)| (key.clone(), String::from_utf8_lossy(&value.0).into_owned()))
            .collect(),
    )
}

/// The refusal when the named Secret cannot be read (`NoChange`); `error` is the API error text.
pub fn secret_read_failure(secret: &SecretRef, error: &str) -> Refusal {
    Refusal::no_change(format!("error getting secret {} in namespace {}: {error}", secret.name, secret.namespace))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::ByteString;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use crate::translate::refusal::ProvisioningState;

    fn params(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn claim() -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("data-db-0".into()),
                namespace: Some("apps".into()),
                annotations: Some(BTreeMap::from([
                    ("example.com/secret".to_string(), "from-annotation".to_string()),
                    ("bad".to_string(), "Not_A_Name".to_string()),
                ])),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn ok(namespace: &str, name: &str) -> Result<Option<SecretRef>, String> {
        Ok(Some(SecretRef { namespace: namespace.into(), name: name.into() }))
    }

    #[test]
    fn references_and_templates() {
        use SecretKind::*;
        let pv = "pvc-1234";
        // (rule, kind, parameters, with claim, result)
        type Row = (&'static str, SecretKind, BTreeMap<String, String>, bool, Result<Option<SecretRef>, String>);
        let table: Vec<Row> = vec![
            ("15: no keys, no secret", Provisioner, params(&[("type", "fast")]), true, Ok(None)),
            (
                "15: per-operation keys",
                NodeStage,
                params(&[
                    ("csi.storage.k8s.io/node-stage-secret-name", "stage"),
                    ("csi.storage.k8s.io/node-stage-secret-namespace", "kube-system"),
                ]),
                true,
                ok("kube-system", "stage"),
            ),
            (
                "15: default keys when the operation has none",
                ControllerExpand,
                params(&[("csi.storage.k8s.io/secret-name", "s"), ("csi.storage.k8s.io/secret-namespace", "ns")]),
                true,
                ok("ns", "s"),
            ),
            (
                "15: per-operation keys win over the default",
                Provisioner,
                params(&[
                    ("csi.storage.k8s.io/secret-name", "default"),
                    ("csi.storage.k8s.io/secret-namespace", "ns"),
                    ("csi.storage.k8s.io/provisioner-secret-name", "prov"),
                    ("csi.storage.k8s.io/provisioner-secret-namespace", "ns2"),
                ]),
                true,
                ok("ns2", "prov"),
            ),
            (
                "11: controller-modify secret",
                ControllerModify,
                params(&[
                    ("csi.storage.k8s.io/controller-modify-secret-name", "mod"),
                    ("csi.storage.k8s.io/controller-modify-secret-namespace", "ns"),
                ]),
                true,
                ok("ns", "mod"),
            ),
            (
                "13: deprecated keys honoured",
                NodePublish,
                params(&[("csiNodePublishSecretName", "pub"), ("csiNodePublishSecretNamespace", "ns")]),
                true,
                ok("ns", "pub"),
            ),
            (
                "13: expand kinds have no deprecated keys",
                NodeExpand,
                params(&[("csiNodeExpandSecretName", "x"), ("csiNodeExpandSecretNamespace", "ns")]),
                true,
                Ok(None),
            ),
            (
                "15: deprecated and new key for the same operation refused",
                Provisioner,
                params(&[
                    ("csiProvisionerSecretName", "old"),
                    ("csi.storage.k8s.io/provisioner-secret-name", "new"),
                    ("csi.storage.k8s.io/provisioner-secret-namespace", "ns"),
                ]),
                true,
                Err("failed to get name and namespace template from params: Provisioner secrets specified in parameters with both \"csi\" and \"csi.storage.k8s.io/\" keys".into()),
            ),
            (
                "15: name without namespace refused",
                ControllerPublish,
                params(&[("csi.storage.k8s.io/controller-publish-secret-name", "s")]),
                true,
                Err("failed to get name and namespace template from params: either name and namespace for ControllerPublish secrets specified, Both must be specified".into()),
            ),
            (
                "15: default name without namespace refused",
                NodeStage,
                params(&[("csi.storage.k8s.io/secret-namespace", "ns")]),
                true,
                Err("failed to get default name and namespace template from params: either name and namespace for Default secrets specified, Both must be specified".into()),
            ),
            (
                "15: empty value refused",
                Provisioner,
                params(&[
                    ("csi.storage.k8s.io/provisioner-secret-name", ""),
                    ("csi.storage.k8s.io/provisioner-secret-namespace", "ns"),
                ]),
                true,
                Err("failed to get name and namespace template from params: Provisioner secrets specified in parameters but value of either namespace or name is empty".into()),
            ),
            (
                "16: name templates: pvc.name, pvc.namespace, pv.name",
                Provisioner,
                params(&[
                    ("csi.storage.k8s.io/provisioner-secret-name", "${pvc.namespace}.${pvc.name}.${pv.name}"),
                    ("csi.storage.k8s.io/provisioner-secret-namespace", "${pvc.namespace}"),
                ]),
                true,
                ok("apps", "apps.data-db-0.pvc-1234"),
            ),
            (
                "16: name template: pvc annotation",
                NodePublish,
                params(&[
                    ("csi.storage.k8s.io/node-publish-secret-name", "${pvc.annotations['example.com/secret']}"),
                    ("csi.storage.k8s.io/node-publish-secret-namespace", "${pv.name}"),
                ]),
                true,
                ok("pvc-1234", "from-annotation"),
            ),
            (
                "16: namespace may not use pvc.name",
                Provisioner,
                params(&[
                    ("csi.storage.k8s.io/provisioner-secret-name", "s"),
                    ("csi.storage.k8s.io/provisioner-secret-namespace", "${pvc.name}"),
                ]),
                true,
                Err("error resolving value \"${pvc.name}\": invalid tokens: [\"pvc.name\"]".into()),
            ),
            (
                "16: namespace may not use annotations",
                Provisioner,
                params(&[
                    ("csi.storage.k8s.io/provisioner-secret-name", "s"),
                    ("csi.storage.k8s.io/provisioner-secret-namespace", "${pvc.annotations['example.com/secret']}"),
                ]),
                true,
                Err("error resolving value \"${pvc.annotations['example.com/secret']}\": invalid tokens: [\"pvc.annotations['example.com/secret']\"]".into()),
            ),
            (
                "16: unknown tokens listed sorted",
                Provisioner,
                params(&[
                    ("csi.storage.k8s.io/provisioner-secret-name", "${zeta}-${alpha}-$beta"),
                    ("csi.storage.k8s.io/provisioner-secret-namespace", "ns"),
                ]),
                true,
                Err("error resolving value \"${zeta}-${alpha}-$beta\": invalid tokens: [\"alpha\" \"beta\" \"zeta\"]".into()),
            ),
            (
                "16: missing annotation is an unknown token",
                Provisioner,
                params(&[
                    ("csi.storage.k8s.io/provisioner-secret-name", "${pvc.annotations['absent']}"),
                    ("csi.storage.k8s.io/provisioner-secret-namespace", "ns"),
                ]),
                true,
                Err("error resolving value \"${pvc.annotations['absent']}\": invalid tokens: [\"pvc.annotations['absent']\"]".into()),
            ),
            (
                "16: without a claim only pv.name resolves",
                Provisioner,
                params(&[
                    ("csi.storage.k8s.io/provisioner-secret-name", "${pv.name}"),
                    ("csi.storage.k8s.io/provisioner-secret-namespace", "${pvc.namespace}"),
                ]),
                false,
                Err("error resolving value \"${pvc.namespace}\": invalid tokens: [\"pvc.namespace\"]".into()),
            ),
            (
                "16: resolved namespace must be a DNS-1123 label (template differs)",
                Provisioner,
                params(&[
                    ("csi.storage.k8s.io/provisioner-secret-name", "s"),
                    ("csi.storage.k8s.io/provisioner-secret-namespace", "${pv.name}.x"),
                ]),
                true,
                Err("\"${pv.name}.x\" resolved to \"pvc-1234.x\" which is not a valid namespace name".into()),
            ),
            (
                "16: literal namespace must be a DNS-1123 label",
                Provisioner,
                params(&[
                    ("csi.storage.k8s.io/provisioner-secret-name", "s"),
                    ("csi.storage.k8s.io/provisioner-secret-namespace", "Bad_NS"),
                ]),
                true,
                Err("\"Bad_NS\" is not a valid namespace name".into()),
            ),
            (
                "16: resolved name must be a DNS-1123 subdomain (template differs)",
                Provisioner,
                params(&[
                    ("csi.storage.k8s.io/provisioner-secret-name", "${pvc.annotations['bad']}"),
                    ("csi.storage.k8s.io/provisioner-secret-namespace", "ns"),
                ]),
                true,
                Err("\"${pvc.annotations['bad']}\" resolved to \"Not_A_Name\" which is not a valid secret name".into()),
            ),
            (
                "16: literal name must be a DNS-1123 subdomain",
                Provisioner,
                params(&[
                    ("csi.storage.k8s.io/provisioner-secret-name", "-bad"),
                    ("csi.storage.k8s.io/provisioner-secret-namespace", "ns"),
                ]),
                true,
                Err("\"-bad\" is not a valid secret name".into()),
            ),
            (
                "16: name may be a dotted subdomain",
                Provisioner,
                params(&[
                    ("csi.storage.k8s.io/provisioner-secret-name", "a.b-c.d"),
                    ("csi.storage.k8s.io/provisioner-secret-namespace", "ns"),
                ]),
                true,
                ok("ns", "a.b-c.d"),
            ),
        ];
        let claim = claim();
        for (rule, kind, parameters, with_claim, want) in table {
            let got = secret_reference(kind, &parameters, pv, with_claim.then_some(&claim));
            let got = got.map_err(|refusal| {
                assert_eq!(refusal.state, ProvisioningState::NoChange, "{rule}");
                refusal.message
            });
            assert_eq!(got, want, "{rule}");
        }
    }

    #[test]
    fn template_syntax_follows_go_expand() {
        let tokens = HashMap::from([("pv.name".to_string(), "pvc-1".to_string()), ("a".to_string(), "A".to_string())]);
        // (rule, template, result)
        let table = [
            ("16: braces", "${pv.name}", Ok("pvc-1")),
            ("16: bare name", "x$a-y", Ok("xA-y")),
            ("16: bare name stops at a dot", "$a.b", Ok("A.b")),
            ("16: trailing dollar stays", "abc$", Ok("abc$")),
            ("16: dollar before punctuation stays", "a$/b", Ok("a$/b")),
            ("16: empty braces are dropped", "a${}b", Ok("ab")),
            ("16: unclosed brace drops ${", "a${b", Ok("ab")),
            ("16: special variable is a token", "$1", Err("invalid tokens: [\"1\"]")),
            ("16: no tokens", "plain", Ok("plain")),
        ];
        for (rule, template, want) in table {
            assert_eq!(expand_template(template, &tokens), want.map(str::to_string).map_err(str::to_string), "{rule}");
        }
    }

    #[test]
    fn all_seven_references_in_order() {
        let parameters = params(&[
            ("csi.storage.k8s.io/secret-name", "default"),
            ("csi.storage.k8s.io/secret-namespace", "ns"),
            ("csi.storage.k8s.io/node-stage-secret-name", "stage"),
            ("csi.storage.k8s.io/node-stage-secret-namespace", "ns"),
        ]);
        let refs = secret_references(&parameters, "pvc-1", Some(&claim())).unwrap();
        let default = Some(SecretRef { namespace: "ns".into(), name: "default".into() });
        assert_eq!(refs.provisioner, default, "15: default for every operation");
        assert_eq!(refs.controller_modify, default, "15: default for every operation");
        assert_eq!(refs.node_stage, Some(SecretRef { namespace: "ns".into(), name: "stage".into() }));

        let broken = params(&[("csi.storage.k8s.io/node-expand-secret-name", "x")]);
        let refusal = secret_references(&broken, "pvc-1", Some(&claim())).unwrap_err();
        assert_eq!(refusal.state, ProvisioningState::NoChange, "15: bad reference is NoChange");
        assert!(refusal.message.contains("NodeExpand"), "{}", refusal.message);
    }

    #[test]
    fn credentials_are_strings_and_never_printed() {
        let secret = Secret {
            data: Some(BTreeMap::from([("password".to_string(), ByteString(b"hunter2".to_vec()))])),
            ..Default::default()
        };
        let creds = credentials(&secret);
        assert_eq!(format!("{creds:?}"), "***stripped***", "80: no secret in Debug");
        assert_eq!(creds.into_map(), HashMap::from([("password".to_string(), "hunter2".to_string())]), "17");
        let refusal =
            secret_read_failure(&SecretRef { namespace: "ns".into(), name: "s".into() }, "secrets \"s\" not found");
        assert_eq!(refusal.message, "error getting secret s in namespace ns: secrets \"s\" not found");
        assert_eq!(refusal.state, ProvisioningState::NoChange, "38: secret errors are NoChange");
    }
}

#[cfg(test)]
#[path = "secrets_prop.rs"]
mod prop_tests;
