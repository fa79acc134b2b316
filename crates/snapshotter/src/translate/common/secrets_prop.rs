//! Snapshot secret templates under generated classes and snapshots: a resolved reference is a valid namespace and
//! Secret name, each template resolves as Go's `os.Expand` with upstream's tokens, and the namespace never depends
//! on the snapshot's name, the one value its user picks freely (external-snapshotter pkg/utils/util.go,
//! `GetSecretReference`).

use proptest::prelude::*;

use super::*;
use crate::translate::common::fixtures::snapshot_of_claim;

fn template() -> impl Strategy<Value = String> {
    let piece = prop::sample::select(vec![
        "${volumesnapshotcontent.name}",
        "${volumesnapshot.namespace}",
        "${volumesnapshot.name}",
        "${pvc.name}",
        "$volumesnapshot",
        "$",
        "{",
        "}",
        "-",
        ".",
        "x",
        "Secret",
    ]);
    prop::collection::vec(piece, 1..5).prop_map(|pieces| pieces.concat())
}

fn parameters(kind: SnapshotSecret, name: &str, namespace: &str) -> BTreeMap<String, String> {
    let (name_key, namespace_key) = kind.keys();
    BTreeMap::from([(name_key.to_string(), name.to_string()), (namespace_key.to_string(), namespace.to_string())])
}

proptest! {
    #[test]
    fn snapshot_secrets_resolve_as_os_expand_with_upstreams_tokens(
        name_template in template(),
        namespace_template in template(),
        snapshot_name in "[a-z0-9]{1,12}|.{0,8}",
        with_snapshot in any::<bool>(),
    ) {
        let snapshot = snapshot_of_claim("team-a", &snapshot_name, "uid-1", "data");
        let snapshot = with_snapshot.then_some(&snapshot);
        let parameters = parameters(SnapshotSecret::Snapshotter, &name_template, &namespace_template);
        let resolved = secret_reference(SnapshotSecret::Snapshotter, Some(&parameters), "snapcontent-1", snapshot);

        let mut tokens = BTreeMap::from([("volumesnapshotcontent.name", "snapcontent-1".to_string())]);
        if snapshot.is_some() {
            tokens.insert("volumesnapshot.namespace", "team-a".into());
        }
        let namespace = sidecar_runtime::go_expand::resolve(&namespace_template, |n| tokens.get(n).cloned());
        if snapshot.is_some() {
            tokens.insert("volumesnapshot.name", snapshot_name.clone());
        }
        let name = sidecar_runtime::go_expand::resolve(&name_template, |n| tokens.get(n).cloned());
        match (namespace, name) {
            (Ok(namespace), Ok(name)) if is_dns1123_label(&namespace) && is_dns1123_subdomain(&name) => {
                prop_assert_eq!(resolved, Ok(Some(SecretRef { namespace, name })));
            }
            _ => prop_assert!(resolved.is_err(), "{resolved:?}"),
        }
    }

    #[test]
    fn the_namespace_never_depends_on_the_snapshots_name(
        namespace_template in template(),
        first in "[a-z0-9]{1,12}|.{0,8}",
        second in "[a-z0-9]{1,12}|.{0,8}",
    ) {
        let parameters = parameters(SnapshotSecret::Snapshotter, "fixed", &namespace_template);
        let namespace = |snapshot_name: &str| {
            let snapshot = snapshot_of_claim("team-a", snapshot_name, "uid-1", "data");
            secret_reference(SnapshotSecret::Snapshotter, Some(&parameters), "snapcontent-1", Some(&snapshot))
                .map(|r| r.map(|r| r.namespace))
        };
        prop_assert_eq!(namespace(&first), namespace(&second));
    }
}
