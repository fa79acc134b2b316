//! One source of truth for RBAC: the charts' roles are upstream's rules, which e2e/rbac/*.yaml keeps as data for
//! every sidecar the e2e suite runs. With every optional rule switched on, each chart role must equal its e2e
//! fixture but for the verbs the chart narrows ([`NARROWED`]); with the defaults, it must be that less exactly the
//! rules upstream ships commented out.

use csi_sidecars_e2e::charts::{Chart, documents, template};
use csi_sidecars_e2e::control_plane::cluster::repo_root;
use csi_sidecars_e2e::processes::rbac::{Rules, Sidecar};
use csi_sidecars_e2e::processes::shipped::descriptions;
use k8s_openapi::api::rbac::v1::PolicyRule;
use serde_json::Value;

/// A chart's rendered roles: (kind, name, rules).
fn roles(chart: Chart, values: &[&str]) -> Vec<(String, String, Vec<PolicyRule>)> {
    let values: Vec<String> = values.iter().flat_map(|v| ["--set".to_string(), v.to_string()]).collect();
    let rendered = template(chart, "r", "storage", &values).unwrap_or_else(|e| panic!("{e}"));
    documents(&rendered)
        .into_iter()
        .filter(|d| d["kind"] == "ClusterRole" || d["kind"] == "Role")
        .map(|d: Value| {
            let rules = serde_json::from_value(d["rules"].clone()).expect("rules are PolicyRules");
            (d["kind"].as_str().unwrap().to_string(), d["metadata"]["name"].as_str().unwrap().to_string(), rules)
        })
        .collect()
}

fn role_rules(roles: &[(String, String, Vec<PolicyRule>)], kind: &str, name: &str) -> Vec<PolicyRule> {
    let found = roles.iter().find(|(k, n, _)| k == kind && n == name);
    found.unwrap_or_else(|| panic!("no {kind} {name} rendered")).2.clone()
}

const EVERYTHING_ON: [&str; 8] = [
    "snapshotter.enabled=true",
    "attacher.enabled=true",
    "health-monitor.enabled=true",
    "attacher.rbac.secrets=true",
    "provisioner.rbac.secrets=true",
    "provisioner.rbac.referenceGrants=true",
    "resizer.rbac.secrets=true",
    "snapshotter.rbac.secrets=true",
];

/// The resources upstream ships commented out in a sidecar's RBAC file, by sidecar name (any other: none).
const COMMENTED_OUT: [(&str, &[&str]); 4] = [
    ("provisioner", &["secrets", "referencegrants"]),
    ("resizer", &["secrets"]),
    ("snapshotter", &["secrets"]),
    ("attacher", &["secrets"]),
];

/// (values key, fixture, resources upstream ships commented out): every described sidecar with an RBAC file and a
/// section of its own in the chart's values (csi-group-snapshotter runs inside the snapshotter's section).
fn sidecars() -> Vec<(&'static str, Rules, &'static [&'static str])> {
    let values = std::fs::read_to_string(repo_root().join("charts/csi-sidecars/values.yaml")).expect("values.yaml");
    let sections: Vec<&str> = values.lines().filter_map(|line| line.strip_suffix(':')).collect();
    let described = descriptions().filter(|d| sections.contains(&d.name));
    let with_rules = described.filter_map(|d| Some((d.name, Rules::of_file(d.rbac?))));
    let commented_out = |name| COMMENTED_OUT.iter().find(|(n, _)| *n == name).map_or(&[][..], |(_, r)| *r);
    with_rules.map(|(name, rules)| (name, rules, commented_out(name))).collect()
}

#[test]
fn every_sidecar_with_rbac_and_a_chart_section_is_checked() {
    let names: Vec<&str> = sidecars().into_iter().map(|(name, _, _)| name).collect();
    assert_eq!(names, ["provisioner", "resizer", "snapshotter", "attacher", "health-monitor"]);
}

/// (resource, the verbs the chart grants of upstream's): every sidecar reads a Secret with one GET when a call
/// needs it and keeps no Secret cache, so upstream's `list` and `watch` on Secrets go unused.
const NARROWED: [(&str, &[&str]); 1] = [("secrets", &["get"])];

/// Upstream's `rules` with the chart's narrowing applied: each rule on a [`NARROWED`] resource keeps only the
/// verbs the chart grants.
fn narrowed(mut rules: Vec<PolicyRule>) -> Vec<PolicyRule> {
    for rule in &mut rules {
        let mut resources = rule.resources.iter().flatten();
        if let Some((_, verbs)) = resources.find_map(|r| NARROWED.iter().find(|(n, _)| *n == r.as_str())) {
            rule.verbs.retain(|verb| verbs.contains(&verb.as_str()));
        }
    }
    rules
}

#[test]
fn with_every_option_on_each_sidecar_role_is_its_e2e_fixture_with_secrets_get_only() {
    let roles = roles(Chart::CsiSidecars, &EVERYTHING_ON);
    for (key, fixture, _) in sidecars() {
        let name = format!("r-csi-sidecars-{key}");
        let cluster = role_rules(&roles, "ClusterRole", &name);
        assert_eq!(cluster, narrowed(fixture.cluster.clone()), "{key}: ClusterRole");
        assert_eq!(role_rules(&roles, "Role", &name), fixture.namespaced, "{key}: Role");
        // Upstream grants more on Secrets than `get`, the chart exactly `get` (a sidecar that reads none: neither).
        let secret_verbs = |rules: &[PolicyRule]| -> Vec<String> {
            let secrets = rules.iter().filter(|r| r.resources.iter().flatten().any(|r| r == "secrets"));
            secrets.flat_map(|r| r.verbs.clone()).collect()
        };
        if secret_verbs(&fixture.cluster).is_empty() {
            assert!(secret_verbs(&cluster).is_empty(), "{key}: no Secrets upstream, none in the chart");
            continue;
        }
        assert!(secret_verbs(&fixture.cluster).len() > 1, "{key}: upstream's Secret verbs");
        assert_eq!(secret_verbs(&cluster), ["get"], "{key}: the chart's Secret verbs");
    }
}

#[test]
fn by_default_each_sidecar_role_leaves_out_only_the_optional_rules() {
    let roles = roles(
        Chart::CsiSidecars,
        &["snapshotter.enabled=true", "attacher.enabled=true", "health-monitor.enabled=true"],
    );
    for (key, rules, optional) in sidecars() {
        let mut expected = narrowed(rules.cluster);
        expected.retain(|rule| !rule.resources.iter().flatten().any(|r| optional.contains(&r.as_str())));
        let name = format!("r-csi-sidecars-{key}");
        assert_eq!(role_rules(&roles, "ClusterRole", &name), expected, "{key}: ClusterRole");
    }
}

#[test]
fn only_enabled_sidecars_get_roles() {
    // The node half (registrar, livenessprobe, the driver in node mode) adds no role: they use no API; nor does a
    // release of the node half alone.
    let node_only = roles(Chart::CsiSidecars, &["controller.enabled=false", "node.enabled=true"]);
    assert!(node_only.is_empty(), "{node_only:?}");
    for values in [&[][..], &["node.enabled=true", "csiDriver.enabled=true"][..]] {
        let names: Vec<String> =
            roles(Chart::CsiSidecars, values).into_iter().map(|(k, n, _)| format!("{k}/{n}")).collect();
        assert_eq!(
            names,
            [
                "ClusterRole/r-csi-sidecars-provisioner",
                "ClusterRole/r-csi-sidecars-resizer",
                "Role/r-csi-sidecars-provisioner",
                "Role/r-csi-sidecars-resizer",
            ],
            "{values:?}"
        );
    }
    let rendered = template(Chart::CsiSidecars, "r", "storage", &["--set".into(), "node.enabled=true".into()]).unwrap();
    for binding in
        documents(&rendered).iter().filter(|d| d["kind"] == "ClusterRoleBinding" || d["kind"] == "RoleBinding")
    {
        assert_eq!(binding["subjects"][0]["name"], "r-csi-sidecars", "only the controller's account: {binding}");
    }
}

#[test]
fn the_snapshot_controller_roles_are_its_e2e_fixture() {
    let fixture = Rules::of(Sidecar::SnapshotController);
    let distributed = roles(Chart::SnapshotController, &["distributedSnapshotting=true"]);
    assert_eq!(role_rules(&distributed, "ClusterRole", "r-snapshot-controller"), fixture.cluster);
    assert_eq!(role_rules(&distributed, "Role", "r-snapshot-controller"), fixture.namespaced);

    // By default, upstream's rule for distributed snapshotting (nodes) is left out, as upstream ships it.
    let default = roles(Chart::SnapshotController, &[]);
    let mut expected = fixture.cluster;
    expected.retain(|rule| !rule.resources.iter().flatten().any(|r| r == "nodes"));
    assert_eq!(role_rules(&default, "ClusterRole", "r-snapshot-controller"), expected);
}
