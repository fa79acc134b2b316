//! Sidecars run as ServiceAccounts bound to upstream's own RBAC rules, never as cluster admin.
//!
//! The rules are data in `e2e/rbac/<sidecar>.yaml`, copied from each upstream project's `deploy/kubernetes` RBAC
//! file: a ClusterRole document and a Role document (leader election, and for csi-provisioner the
//! CSIStorageCapacity rules). For one test, [`SidecarIdentity::create`]:
//! 1. creates a ServiceAccount in the test namespace,
//! 2. creates the ClusterRole and a ClusterRoleBinding, named after the namespace so parallel tests never share
//!    them (removed when the identity is dropped),
//! 3. creates the Role and a RoleBinding in the test namespace (the namespace every test gives the sidecars for
//!    their Leases and CSIStorageCapacity objects; they go away with the namespace),
//! 4. waits until the API server's authorizer knows both bindings,
//! 5. asks the TokenRequest API for a token of the ServiceAccount and writes a kubeconfig with it (server and CA
//!    taken from the admin kubeconfig) for the sidecar's `--kubeconfig`.
//!
//! The tests keep the admin client for what only an admin does (creating classes, nodes, claims as a user).

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::Api;
use kube::api::{DeleteParams, ObjectMeta, PostParams};
use serde::Deserialize;

use crate::control_plane::cluster::{Cluster, repo_root};
use crate::wait::wait_for;

/// How long a sidecar's token lives: longer than any test.
const TOKEN_LIFETIME_SECONDS: i64 = 3600;
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// Which upstream RBAC file a process runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sidecar {
    Provisioner,
    Resizer,
    SnapshotController,
    Snapshotter,
    Attacher,
    HealthMonitor,
    /// The runtime's test elector (`sidecar-runtime-elector`): only what leader election needs of every sidecar's
    /// rules, the Lease Role and the events rule (client-go's LeaderElection event), here taken from the resizer's.
    Elector,
}

impl Sidecar {
    /// The ServiceAccount name, as upstream names it.
    pub fn account(self) -> &'static str {
        match self {
            Sidecar::Provisioner => "csi-provisioner",
            Sidecar::Resizer => "csi-resizer",
            Sidecar::SnapshotController => "snapshot-controller",
            Sidecar::Snapshotter => "csi-snapshotter",
            Sidecar::Attacher => "csi-attacher",
            Sidecar::HealthMonitor => "csi-external-health-monitor-controller",
            Sidecar::Elector => "elector",
        }
    }

    /// Its upstream RBAC file, as its sidecar's description names it (the elector's: the resizer's).
    fn fixture(self) -> &'static str {
        let binary = match self {
            Sidecar::Elector => Sidecar::Resizer.account(),
            sidecar => sidecar.account(),
        };
        let description =
            crate::processes::shipped::description(binary).unwrap_or_else(|| panic!("{binary} is not described"));
        description.rbac.unwrap_or_else(|| panic!("{binary} has no RBAC file"))
    }
}

/// One document of a fixture file.
#[derive(Debug, Deserialize)]
struct Document {
    kind: String,
    rules: Vec<PolicyRule>,
}

/// A sidecar's rules: cluster-wide (the ClusterRole) and in its own namespace (the Role).
#[derive(Debug, Clone, Default)]
pub struct Rules {
    pub cluster: Vec<PolicyRule>,
    pub namespaced: Vec<PolicyRule>,
}

impl Rules {
    /// The rules of `sidecar` as `e2e/rbac/` has them.
    pub fn of(sidecar: Sidecar) -> Rules {
        let rules = Rules::of_file(sidecar.fixture());
        if sidecar == Sidecar::Elector {
            let events = |rule: &PolicyRule| rule.resources.iter().flatten().any(|r| r == "events");
            return Rules { cluster: rules.cluster.into_iter().filter(events).collect(), namespaced: rules.namespaced };
        }
        rules
    }

    /// The rules of the file `e2e/rbac/<file>` (a description's `rbac`).
    pub fn of_file(file: &str) -> Rules {
        let path = repo_root().join("e2e/rbac").join(file);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        Rules::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// The union of the sidecars' upstream rules: what one ServiceAccount running them all in one process needs.
    pub fn union(sidecars: &[Sidecar]) -> Rules {
        sidecars.iter().fold(Rules::default(), |mut all, sidecar| {
            let rules = Rules::of(*sidecar);
            all.cluster.extend(rules.cluster);
            all.namespaced.extend(rules.namespaced);
            all
        })
    }

    fn parse(text: &str) -> Result<Rules, String> {
        let documents: Vec<Document> = serde_saphyr::from_str_multiple(text).map_err(|e| e.to_string())?;
        let mut rules = Rules::default();
        for document in documents {
            match document.kind.as_str() {
                "ClusterRole" => rules.cluster.extend(document.rules),
                "Role" => rules.namespaced.extend(document.rules),
                other => return Err(format!("unexpected kind {other:?}: only ClusterRole and Role")),
            }
        }
        Ok(rules)
    }

    /// These rules less one `verb` on `resource` of `group` (for tests of what a sidecar does when it is
    /// forbidden). Panics when no rule grants it, so a typo cannot make such a test pass vacuously.
    pub fn without(mut self, group: &str, resource: &str, verb: &str) -> Rules {
        let mut removed = false;
        for rule in self.cluster.iter_mut().chain(self.namespaced.iter_mut()) {
            let matches = rule.api_groups.iter().flatten().any(|g| g == group)
                && rule.resources.iter().flatten().any(|r| r == resource);
            if matches && rule.verbs.iter().any(|v| v == verb) {
                if rule.resources.iter().flatten().count() > 1 {
                    panic!("rule {rule:?} covers more than {resource}: split it in the fixture first");
                }
                rule.verbs.retain(|v| v != verb);
                removed = true;
            }
        }
        assert!(removed, "no rule grants {verb} on {resource} in group {group:?}");
        self.cluster.retain(|rule| !rule.verbs.is_empty());
        self.namespaced.retain(|rule| !rule.verbs.is_empty());
        self
    }
}

/// A sidecar's identity in one test: its ServiceAccount, roles, bindings and kubeconfig.
#[derive(Debug)]
pub struct SidecarIdentity {
    kubeconfig: PathBuf,
    cluster_binding: String,
    username: String,
}

impl SidecarIdentity {
    /// The identity of a `sidecar` with upstream's rules, its kubeconfig at `<dir>/<account>.kubeconfig`.
    pub async fn create(client: &kube::Client, namespace: &str, sidecar: Sidecar, dir: &Path) -> SidecarIdentity {
        Self::with_rules(client, namespace, sidecar.account(), Rules::of(sidecar), dir).await
    }

    /// An identity named `account` with the given rules (for a sidecar with rules of a test's choosing).
    pub async fn with_rules(
        client: &kube::Client,
        namespace: &str,
        account: &str,
        rules: Rules,
        dir: &Path,
    ) -> SidecarIdentity {
        let cluster_binding = format!("{namespace}-{account}");
        let subject = Subject {
            kind: "ServiceAccount".into(),
            name: account.into(),
            namespace: Some(namespace.into()),
            ..Default::default()
        };
        let params = PostParams::default();
        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
        let account_object = ServiceAccount { metadata: named(account), ..Default::default() };
        accounts.create(&params, &account_object).await.expect("create the sidecar's ServiceAccount");

        let identity = SidecarIdentity {
            kubeconfig: dir.join(format!("{account}.kubeconfig")),
            cluster_binding,
            username: format!("system:serviceaccount:{namespace}:{account}"),
        };
        let cluster_role = ClusterRole {
            metadata: named(&identity.cluster_binding),
            rules: Some(rules.cluster.clone()),
            ..Default::default()
        };
        Api::<ClusterRole>::all(client.clone()).create(&params, &cluster_role).await.expect("create the ClusterRole");
        let cluster_binding = ClusterRoleBinding {
            metadata: named(&identity.cluster_binding),
            role_ref: role_ref("ClusterRole", &identity.cluster_binding),
            subjects: Some(vec![subject.clone()]),
        };
        Api::<ClusterRoleBinding>::all(client.clone())
            .create(&params, &cluster_binding)
            .await
            .expect("create the ClusterRoleBinding");
        let role = Role { metadata: named(account), rules: Some(rules.namespaced.clone()) };
        Api::<Role>::namespaced(client.clone(), namespace).create(&params, &role).await.expect("create the Role");
        let binding = RoleBinding {
            metadata: named(account),
            role_ref: role_ref("Role", account),
            subjects: Some(vec![subject]),
        };
        Api::<RoleBinding>::namespaced(client.clone(), namespace)
            .create(&params, &binding)
            .await
            .expect("create the RoleBinding");

        for rule in rules.cluster.first().into_iter().chain(rules.namespaced.first()) {
            allowed(client, namespace, account, rule).await;
        }
        let token = token(&accounts, account).await;
        write_kubeconfig(&identity.kubeconfig, namespace, account, &token);
        identity
    }

    /// The kubeconfig file to give the sidecar.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The ClusterRole (and ClusterRoleBinding) name: `<namespace>-<account>`.
    pub fn cluster_role(&self) -> &str {
        &self.cluster_binding
    }

    /// The user the API server sees: `system:serviceaccount:<namespace>:<account>` (as in its audit log).
    pub fn username(&self) -> &str {
        &self.username
    }

    /// `--kubeconfig=<file>`.
    pub fn kubeconfig_flag(&self) -> String {
        format!("--kubeconfig={}", self.kubeconfig.display())
    }
}

impl Drop for SidecarIdentity {
    fn drop(&mut self) {
        // The ServiceAccount, Role and RoleBinding go with the namespace; the cluster-scoped pair must be removed.
        let name = self.cluster_binding.clone();
        crate::control_plane::cluster::clean_up(move |client| async move {
            let _ = Api::<ClusterRoleBinding>::all(client.clone()).delete(&name, &DeleteParams::default()).await;
            let _ = Api::<ClusterRole>::all(client).delete(&name, &DeleteParams::default()).await;
        });
    }
}

/// One rule granting `verb` on `resource` of `group` (e.g. what [`account_kubeconfig`] waits to be allowed).
pub fn policy_rule(group: &str, resource: &str, verb: &str) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.into()]),
        resources: Some(vec![resource.into()]),
        verbs: vec![verb.into()],
        ..Default::default()
    }
}

/// A kubeconfig (at `<dir>/<account>.kubeconfig`) for a ServiceAccount someone else made and bound, e.g. a Helm
/// chart: waits until the authorizer allows the account `probe`, then asks the TokenRequest API for its token.
pub async fn account_kubeconfig(
    client: &kube::Client,
    namespace: &str,
    account: &str,
    probe: &PolicyRule,
    dir: &Path,
) -> PathBuf {
    allowed(client, namespace, account, probe).await;
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let token = token(&accounts, account).await;
    let path = dir.join(format!("{account}.kubeconfig"));
    write_kubeconfig(&path, namespace, account, &token);
    path
}

fn named(name: &str) -> ObjectMeta {
    ObjectMeta { name: Some(name.into()), ..Default::default() }
}

fn role_ref(kind: &str, name: &str) -> RoleRef {
    RoleRef { api_group: RBAC_GROUP.into(), kind: kind.into(), name: name.into() }
}

/// Waits until the authorizer allows the account the first verb of `rule`: RBAC objects reach the authorizer
/// through its informers, a moment after they are created, and a sidecar started before that would see 403s.
async fn allowed(client: &kube::Client, namespace: &str, account: &str, rule: &PolicyRule) {
    let resource = rule.resources.iter().flatten().next().expect("a rule names a resource");
    let (resource, subresource) = match resource.split_once('/') {
        Some((resource, subresource)) => (resource.to_string(), Some(subresource.to_string())),
        None => (resource.clone(), None),
    };
    let review = SubjectAccessReview {
        metadata: ObjectMeta::default(),
        spec: SubjectAccessReviewSpec {
            user: Some(format!("system:serviceaccount:{namespace}:{account}")),
            groups: Some(vec!["system:serviceaccounts".into(), format!("system:serviceaccounts:{namespace}")]),
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(namespace.into()),
                group: rule.api_groups.iter().flatten().next().cloned(),
                resource: Some(resource.clone()),
                subresource,
                verb: rule.verbs.first().cloned(),
                ..Default::default()
            }),
            ..Default::default()
        },
        status: None,
    };
    let reviews: Api<SubjectAccessReview> = Api::all(client.clone());
    wait_for(&format!("the authorizer to allow {account} {resource}"), Duration::from_secs(30), || async {
        let answer = reviews.create(&PostParams::default(), &review).await.ok()?;
        answer.status.is_some_and(|s| s.allowed).then_some(())
    })
    .await;
}

async fn token(accounts: &Api<ServiceAccount>, account: &str) -> String {
    let request = TokenRequest {
        metadata: ObjectMeta::default(),
        spec: TokenRequestSpec {
            audiences: vec![],
            expiration_seconds: Some(TOKEN_LIFETIME_SECONDS),
            bound_object_ref: None,
        },
        status: None,
    };
    let answer = accounts
        .create_token_request(account, &PostParams::default(), &request)
        .await
        .expect("TokenRequest for the sidecar's ServiceAccount");
    answer.status.expect("a TokenRequest answer has a status").token
}

/// A kubeconfig for the ServiceAccount: the admin kubeconfig's cluster (server, CA), the token as the user.
fn write_kubeconfig(path: &Path, namespace: &str, account: &str, token: &str) {
    let admin = kube::config::Kubeconfig::read_from(Cluster::shared().kubeconfig()).expect("admin kubeconfig");
    let cluster = admin.clusters.into_iter().next().and_then(|c| c.cluster).expect("the admin kubeconfig's cluster");
    let kubeconfig = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": cluster}],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [{"name": account, "context": {"cluster": "e2e", "user": account, "namespace": namespace}}],
        "current-context": account,
    });
    // JSON is YAML: every kubeconfig reader takes it.
    std::fs::write(path, serde_json::to_vec_pretty(&kubeconfig).expect("kubeconfig as JSON"))
        .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grants(rules: &[PolicyRule], group: &str, resource: &str, verb: &str) -> bool {
        rules.iter().any(|rule| {
            rule.api_groups.iter().flatten().any(|g| g == group)
                && rule.resources.iter().flatten().any(|r| r == resource)
                && rule.verbs.iter().any(|v| v == verb)
        })
    }

    #[test]
    fn every_fixture_parses_into_a_cluster_role_and_a_lease_role() {
        for sidecar in [
            Sidecar::Provisioner,
            Sidecar::Resizer,
            Sidecar::SnapshotController,
            Sidecar::Snapshotter,
            Sidecar::Attacher,
            Sidecar::Elector,
        ] {
            let rules = Rules::of(sidecar);
            // Upstream's attacher records no events: its errors go to the VolumeAttachment's status.
            let events = sidecar != Sidecar::Attacher;
            assert_eq!(grants(&rules.cluster, "", "events", "create"), events, "{sidecar:?}: events create");
            assert!(grants(&rules.namespaced, "coordination.k8s.io", "leases", "update"), "{sidecar:?}: leases");
        }
    }

    #[test]
    fn upstream_rules_are_kept_as_upstream_writes_them() {
        let rows: [(Sidecar, bool, &str, &str, &str, bool); 12] = [
            // (sidecar, cluster-wide, group, resource, verb, granted)
            (Sidecar::Provisioner, true, "", "persistentvolumes", "create", true),
            (Sidecar::Provisioner, true, "", "persistentvolumes", "update", false),
            (Sidecar::Provisioner, true, "", "persistentvolumeclaims", "update", true),
            (Sidecar::Provisioner, false, "storage.k8s.io", "csistoragecapacities", "patch", true),
            (Sidecar::Provisioner, false, "apps", "replicasets", "get", true),
            (Sidecar::Resizer, true, "", "persistentvolumeclaims/status", "patch", true),
            (Sidecar::Resizer, true, "", "persistentvolumes", "update", false),
            (Sidecar::Snapshotter, true, "snapshot.storage.k8s.io", "volumesnapshotcontents", "create", false),
            (Sidecar::SnapshotController, true, "snapshot.storage.k8s.io", "volumesnapshotcontents", "create", true),
            (Sidecar::Attacher, true, "storage.k8s.io", "volumeattachments/status", "patch", true),
            (Sidecar::Attacher, true, "storage.k8s.io", "volumeattachments", "update", false),
            (Sidecar::Attacher, true, "", "events", "create", false),
        ];
        for (sidecar, cluster, group, resource, verb, granted) in rows {
            let rules = Rules::of(sidecar);
            let scope = if cluster { &rules.cluster } else { &rules.namespaced };
            assert_eq!(grants(scope, group, resource, verb), granted, "{sidecar:?} {verb} {resource}");
        }
    }

    #[test]
    fn the_elector_gets_leases_and_events_only() {
        let rules = Rules::of(Sidecar::Elector);
        let resources: Vec<&str> = rules
            .cluster
            .iter()
            .chain(&rules.namespaced)
            .flat_map(|r| r.resources.iter().flatten())
            .map(|r| r.as_str())
            .collect();
        assert_eq!(resources, ["events", "leases"]);
    }

    #[test]
    fn without_removes_exactly_one_verb() {
        let rules = Rules::of(Sidecar::Provisioner).without("", "persistentvolumes", "create");
        assert!(!grants(&rules.cluster, "", "persistentvolumes", "create"));
        assert!(grants(&rules.cluster, "", "persistentvolumes", "delete"));
        assert!(grants(&rules.cluster, "", "persistentvolumeclaims", "update"));
    }

    #[test]
    #[should_panic(expected = "no rule grants")]
    fn without_refuses_a_verb_that_is_not_granted() {
        let _ = Rules::of(Sidecar::Resizer).without("", "persistentvolumes", "create");
    }

    #[test]
    fn a_document_of_another_kind_is_refused() {
        let text = "kind: ClusterRoleBinding\nrules: []\n";
        assert!(Rules::parse(text).unwrap_err().contains("ClusterRoleBinding"));
    }
}
