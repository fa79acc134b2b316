//! Secret templates under generated classes and claims: whatever the templates, a resolved reference is a valid
//! namespace and Secret name, and the namespace never depends on what the claim's user picks (its name and
//! annotations), as upstream's `verifyAndGetSecretNameAndNamespaceTemplate` and `getSecretReference` allow
//! (external-provisioner pkg/controller/controller.go).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use proptest::prelude::*;

use super::*;

/// Pieces of a template: every token upstream knows, tokens it does not, and the characters of shell syntax.
fn template() -> impl Strategy<Value = String> {
    let piece = prop::sample::select(vec![
        "${pv.name}",
        "${pvc.name}",
        "${pvc.namespace}",
        "${pvc.annotations['team']}",
        "$pv",
        "${volumesnapshot.name}",
        "$",
        "{",
        "}",
        "-",
        ".",
        "x",
        "Secret",
        "kube-system",
    ]);
    prop::collection::vec(piece, 1..5).prop_map(|pieces| pieces.concat())
}

fn claim(name: String, namespace: String, team: Option<String>) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(namespace),
            annotations: team.map(|team| BTreeMap::from([("team".to_string(), team)])),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn parameters(kind: SecretKind, name: &str, namespace: &str) -> BTreeMap<String, String> {
    let (name_key, namespace_key) = kind.keys();
    BTreeMap::from([(name_key.to_string(), name.to_string()), (namespace_key.to_string(), namespace.to_string())])
}

fn kind() -> impl Strategy<Value = SecretKind> {
    prop::sample::select(SecretKind::ALL.to_vec())
}

/// What the claim's user picks freely: a name and an annotation's value, sometimes not a valid name at all.
fn user_value() -> impl Strategy<Value = String> {
    prop_oneof!["[a-z0-9]{1,12}", "[a-z0-9.-]{0,12}", ".{0,8}"]
}

proptest! {
    #[test]
    fn a_resolved_reference_is_a_valid_namespace_and_name(
        kind in kind(),
        name_template in template(),
        namespace_template in template(),
        claim_name in user_value(),
        team in proptest::option::of(user_value()),
    ) {
        let claim = claim(claim_name, "apps".into(), team);
        let resolved = secret_reference(kind, &parameters(kind, &name_template, &namespace_template), "pvc-1", Some(&claim));
        match resolved {
            Ok(Some(secret)) => {
                prop_assert!(is_dns1123_label(&secret.namespace), "{secret:?}");
                prop_assert!(is_dns1123_subdomain(&secret.name), "{secret:?}");
            }
            Ok(None) => prop_assert!(false, "templates were given"),
            Err(refusal) => prop_assert!(!refusal.message.is_empty()),
        }
    }

    #[test]
    fn the_namespace_never_depends_on_the_claims_name_or_annotations(
        kind in kind(),
        namespace_template in template(),
        first in (user_value(), proptest::option::of(user_value())),
        second in (user_value(), proptest::option::of(user_value())),
    ) {
        // A name template that always resolves: only the namespace can differ or fail.
        let parameters = parameters(kind, "fixed", &namespace_template);
        let one = claim(first.0, "apps".into(), first.1);
        let other = claim(second.0, "apps".into(), second.1);
        let namespace = |claim: &PersistentVolumeClaim| {
            secret_reference(kind, &parameters, "pvc-1", Some(claim)).map(|r| r.map(|r| r.namespace)).map_err(|r| r.message)
        };
        prop_assert_eq!(namespace(&one), namespace(&other));
    }

    #[test]
    fn templates_resolve_as_os_expand_with_upstreams_tokens(
        name_template in template(),
        claim_name in "[a-z0-9]{1,12}",
        team in "[a-z0-9]{1,12}",
    ) {
        let claim = claim(claim_name.clone(), "apps".into(), Some(team.clone()));
        let tokens = BTreeMap::from([
            ("pv.name", "pvc-1".to_string()),
            ("pvc.namespace", "apps".to_string()),
            ("pvc.name", claim_name),
            ("pvc.annotations['team']", team),
        ]);
        let resolved = secret_reference(
            SecretKind::Provisioner,
            &parameters(SecretKind::Provisioner, &name_template, "kube-system"),
            "pvc-1",
            Some(&claim),
        );
        match sidecar_runtime::go_expand::resolve(&name_template, |name| tokens.get(name).cloned()) {
            Ok(name) if is_dns1123_subdomain(&name) => {
                prop_assert_eq!(resolved, Ok(Some(SecretRef { namespace: "kube-system".into(), name })));
            }
            Ok(_) => prop_assert!(resolved.unwrap_err().message.contains("is not a valid secret name")),
            Err(_) => prop_assert!(resolved.unwrap_err().message.contains("invalid tokens")),
        }
    }
}
