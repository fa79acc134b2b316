//! The ListSnapshots secret under generated templates: each resolves as Go's `os.Expand` with the one token
//! upstream allows there, `${volumesnapshotcontent.name}`.

use proptest::prelude::*;

use super::*;

fn template() -> impl Strategy<Value = String> {
    let piece = prop::sample::select(vec![
        "${volumesnapshotcontent.name}",
        "${volumesnapshot.name}",
        "$volumesnapshotcontent",
        "$",
        "$$",
        "{",
        "}",
        "-",
        ".",
        "x",
    ]);
    prop::collection::vec(piece, 1..5).prop_map(|pieces| pieces.concat())
}

proptest! {
    #[test]
    fn list_secret_templates_resolve_as_os_expand(name_template in template(), namespace_template in template()) {
        let parameters = BTreeMap::from([
            (PARAM_SNAPSHOTTER_LIST_SECRET_NAME.to_string(), name_template.clone()),
            (PARAM_SNAPSHOTTER_LIST_SECRET_NAMESPACE.to_string(), namespace_template.clone()),
        ]);
        let expand = |template: &str| {
            sidecar_runtime::go_expand::resolve(template, |n| (n == TOKEN_CONTENT_NAME).then(|| "content-1".into()))
        };
        let resolved = list_secret(&parameters, "content-1");
        match (expand(&namespace_template), expand(&name_template)) {
            (Ok(namespace), Ok(name)) if is_dns1123_label(&namespace) && is_dns1123_subdomain(&name) => {
                prop_assert_eq!(resolved, Ok(Some(SecretRef { namespace, name })));
            }
            _ => prop_assert!(resolved.is_err(), "{resolved:?}"),
        }
    }
}
