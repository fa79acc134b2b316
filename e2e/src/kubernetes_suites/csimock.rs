//! `make csimock`: Kubernetes' CSI mock tests (e2e.test's `test/e2e/storage/csimock`), which judge what the sidecars
//! do call by call, against our sidecars and against upstream's.
//!
//! The specs run here are those where e2e.test itself is the CSI driver ([`EMBEDDED`]): csi-test's mock driver inside
//! the e2e.test process, reached through `pods/portforward` at the proxy container of the mock pod
//! (csi-mock-proxy.yaml: hostpath-plugin `--proxy-endpoint=tcp://:9000`), which records every call and injects
//! errors. The manifests are compiled into e2e.test; their sig-storage images are taken from the registry
//! `KUBE_TEST_REPO_LIST` names (`sigStorageRegistry`): `ours.local/sig-storage` for ours, `upstream.local/sig-storage`
//! for upstream's, both imported by `e2e/node-images.sh csimock`. A cluster-wide snapshot-controller of the same side
//! (charts/snapshot-controller) serves the snapshot specs.
//!
//! The reports (Ginkgo's JUnit, the whole log, per-file counts) go to `target/csimock/<side>/`.

use std::collections::BTreeMap;
use std::path::Path;

use crate::charts::{Chart, Release};
use crate::control_plane::cluster::Cluster;
use crate::control_plane::namespace::TestNamespace;
use crate::kubernetes_suites::conformance::{Progress, Report, Selection, State, run_ginkgo};
use crate::node::driver::Images;
use crate::node::pods::apply;

/// The specs in which e2e.test is the mock driver (it passes hooks to it): the source file of `test/e2e/storage/csimock`
/// and the spec's text after `[sig-storage] `. 25 in e2e.test v1.36.3.
pub const EMBEDDED: &[(&str, &str)] = &[
    (
        "csi_fsgroup_mount.go",
        "CSI Mock fsgroup as mount option Delegate FSGroup to CSI driver [LinuxOnly] should not pass FSGroup to CSI driver if it is set in pod and driver supports VOLUME_MOUNT_GROUP",
    ),
    (
        "csi_fsgroup_mount.go",
        "CSI Mock fsgroup as mount option Delegate FSGroup to CSI driver [LinuxOnly] should pass FSGroup to CSI driver if it is set in pod and driver supports VOLUME_MOUNT_GROUP",
    ),
    (
        "csi_node_stage_error_cases.go",
        "CSI Mock volume node stage CSI NodeStage error cases [Slow] should call NodeUnstage after NodeStage ephemeral error",
    ),
    (
        "csi_node_stage_error_cases.go",
        "CSI Mock volume node stage CSI NodeStage error cases [Slow] should not call NodeUnstage after NodeStage final error",
    ),
    (
        "csi_node_stage_error_cases.go",
        "CSI Mock volume node stage CSI NodeStage error cases [Slow] should retry NodeStage after NodeStage ephemeral error",
    ),
    (
        "csi_node_stage_error_cases.go",
        "CSI Mock volume node stage CSI NodeStage error cases [Slow] should retry NodeStage after NodeStage final error",
    ),
    (
        "csi_node_stage_error_cases.go",
        "CSI Mock volume node stage CSI NodeUnstage error cases [Slow] two pods: should call NodeStage after previous NodeUnstage final error",
    ),
    (
        "csi_node_stage_error_cases.go",
        "CSI Mock volume node stage CSI NodeUnstage error cases [Slow] two pods: should call NodeStage after previous NodeUnstage transient error",
    ),
    (
        "csi_snapshot.go",
        "CSI Mock volume snapshot CSI Volume Snapshots [Feature:VolumeSnapshotDataSource] volumesnapshotcontent and pvc in Bound state with deletion timestamp set should not get deleted while snapshot finalizer exists",
    ),
    (
        "csi_snapshot.go",
        "CSI Mock volume snapshot CSI Volume Snapshots secrets [Feature:VolumeSnapshotDataSource] volume snapshot create/delete with secrets",
    ),
    ("csi_storage_capacity.go", "CSI Mock volume storage capacity storage capacity exhausted, immediate binding"),
    (
        "csi_storage_capacity.go",
        "CSI Mock volume storage capacity storage capacity exhausted, late binding, no topology",
    ),
    (
        "csi_storage_capacity.go",
        "CSI Mock volume storage capacity storage capacity exhausted, late binding, with topology",
    ),
    (
        "csi_volume_expansion.go",
        "CSI Mock volume expansion CSI Volume expansion should expand volume by restarting pod if attach=off, nodeExpansion=on",
    ),
    (
        "csi_volume_expansion.go",
        "CSI Mock volume expansion CSI Volume expansion should expand volume by restarting pod if attach=on, nodeExpansion=on",
    ),
    (
        "csi_volume_expansion.go",
        "CSI Mock volume expansion CSI Volume expansion should expand volume without restarting pod if nodeExpansion=off",
    ),
    (
        "csi_volume_expansion.go",
        "CSI Mock volume expansion CSI Volume expansion should not expand volume if resizingOnDriver=off, resizingOnSC=on",
    ),
    (
        "csi_volume_expansion.go",
        "CSI Mock volume expansion CSI Volume expansion should not have staging_path missing in node expand volume pod if attach=on, nodeExpansion=on",
    ),
    (
        "csi_volume_expansion.go",
        "CSI Mock volume expansion Expansion with recovery recovery should be possible for node-only expanded volumes with final error",
    ),
    (
        "csi_volume_expansion.go",
        "CSI Mock volume expansion Expansion with recovery recovery should be possible for node-only expanded volumes with infeasible error",
    ),
    (
        "csi_volume_expansion.go",
        "CSI Mock volume expansion Expansion with recovery recovery should not be possible in partially expanded volumes",
    ),
    (
        "csi_volume_expansion.go",
        "CSI Mock volume expansion Expansion with recovery should allow recovery if controller expansion fails with final error",
    ),
    (
        "csi_volume_expansion.go",
        "CSI Mock volume expansion Expansion with recovery should allow recovery if controller expansion fails with infeasible error",
    ),
    (
        "mutable_csinode_allocatable.go",
        "MutableCSINodeAllocatableCount [FeatureGate:MutableCSINodeAllocatableCount] Attach Limit Exceeded should transition pod to failed state when attachment limit exceeded",
    ),
    (
        "mutable_csinode_allocatable.go",
        "MutableCSINodeAllocatableCount [FeatureGate:MutableCSINodeAllocatableCount] Dynamic Allocatable Count should observe dynamic changes in CSINode allocatable count",
    ),
];

/// `make test`'s share (e2e/tests/node_csimock.rs): the capacity reschedule, an expansion recovery, the snapshot
/// secrets and the attacher's error on an attach limit, by their place in [`EMBEDDED`].
pub const QUICK: &[usize] = &[12, 21, 9, 23];

/// Left out of the family's selection, each with its reason: of the family's 125 specs in e2e.test v1.36.3, 77 remain
/// (a dry run).
pub const LEFT_OUT: &[(&str, &str)] = &[
    ("\\[Feature:SELinux\\]", "SELinux mount specs: the node has no SELinux"),
    ("\\[Disruptive\\]", "restarts the kubelet over SSH; the node is this machine, with no SSH"),
    ("\\[Feature:OffByDefault\\]", "alpha kubelet and scheduler features the node does not turn on"),
];

/// The source file of a spec of the family, from the Describe its text starts with.
pub fn file_of(name: &str) -> &'static str {
    const FILES: &[(&str, &str)] = &[
        ("CSI Mock fsgroup as mount option", "csi_fsgroup_mount.go"),
        ("CSI Mock honor pv reclaim policy", "csi_honor_pv_reclaim_policy.go"),
        ("CSI Mock volume attach", "csi_attach_volume.go"),
        ("CSI Mock volume expansion", "csi_volume_expansion.go"),
        ("CSI Mock volume fsgroup policies", "csi_fsgroup_policy.go"),
        ("CSI Mock volume limit", "csi_volume_limit.go"),
        ("CSI Mock volume node stage", "csi_node_stage_error_cases.go"),
        ("CSI Mock volume service account token", "csi_service_account_token.go"),
        ("CSI Mock volume snapshot", "csi_snapshot.go"),
        ("CSI Mock volume storage capacity", "csi_storage_capacity.go"),
        ("CSI Mock workload info", "csi_workload.go"),
        ("MutableCSINodeAllocatableCount", "mutable_csinode_allocatable.go"),
    ];
    let text = name.strip_prefix(SPEC_PREFIX).unwrap_or(name);
    FILES.iter().find(|(describe, _)| text.starts_with(describe)).map(|(_, file)| *file).unwrap_or("other")
}

/// How every spec's text of the family starts.
pub const SPEC_PREFIX: &str = "[sig-storage] ";

/// `text` with the characters a regular expression gives a meaning to escaped.
fn escaped(text: &str) -> String {
    text.chars().fold(String::new(), |mut out, c| {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
        out
    })
}

/// The [`EMBEDDED`] specs (only [`QUICK`]'s when `quick`), minus [`LEFT_OUT`].
pub fn selection(quick: bool) -> Selection {
    let specs: Vec<&str> = if quick {
        QUICK.iter().map(|&i| EMBEDDED[i].1).collect()
    } else {
        EMBEDDED.iter().map(|(_, spec)| *spec).collect()
    };
    let alternatives: Vec<String> = specs.iter().map(|spec| escaped(spec)).collect();
    Selection {
        focus: format!("{}({})", escaped(SPEC_PREFIX), alternatives.join("|")),
        skip: LEFT_OUT.iter().map(|(p, _)| *p).collect::<Vec<_>>().join("|"),
    }
}

/// The registry of `images`' side, as `KUBE_TEST_REPO_LIST` names it for e2e.test.
pub fn sig_storage_registry(images: Images) -> &'static str {
    match images {
        Images::Ours => "ours.local/sig-storage",
        Images::Upstream => "upstream.local/sig-storage",
    }
}

/// The MutatingAdmissionPolicy that lets pods run the imported images of both sides: csi-mock-driver-snapshotter.yaml
/// asks for `imagePullPolicy: Always`, which fails without a registry; the images the node already holds are as
/// good, so pull policy Always becomes IfNotPresent for them (other images are left alone).
const PULL_POLICY: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: csimock-imported-images}
spec:
  matchConstraints:
    resourceRules:
      - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  failurePolicy: Fail
  reinvocationPolicy: Never
  mutations:
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: >
          Object{spec: Object.spec{containers: object.spec.containers.filter(c,
            has(c.imagePullPolicy) && c.imagePullPolicy == "Always" &&
            (c.image.startsWith("ours.local/") || c.image.startsWith("upstream.local/"))
          ).map(c, Object.spec.containers{name: c.name, imagePullPolicy: "IfNotPresent"})}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: csimock-imported-images}
spec:
  policyName: csimock-imported-images
"#;

/// What a run needs besides the mock pods e2e.test deploys: the pull policy of [`PULL_POLICY`] and a
/// snapshot-controller of the side. Dropping it uninstalls the controller (the policy stays: it only touches the
/// images of the two sides).
pub struct Setup {
    _controller: Release,
    _ns: TestNamespace,
}

/// Applies [`PULL_POLICY`] and installs charts/snapshot-controller with `images`' image (one replica, its CRDs).
pub async fn install(images: Images) -> Setup {
    apply("default", PULL_POLICY);
    let client = Cluster::shared().client().await;
    let ns = TestNamespace::create(&client, "csimock").await;
    let sets =
        [&["--set", "replicas=1", "--set", "image.pullPolicy=Never"].map(String::from)[..], &images.sets()].concat();
    let controller = Release::install_ready(Chart::SnapshotController, &format!("{}-sc", ns.name()), ns.name(), &sets);
    Setup { _controller: controller, _ns: ns }
}

/// Runs the selected specs with `images`' sidecars (`procs` Ginkgo processes); reports go to `dir`.
pub fn run(images: Images, selection: &Selection, procs: usize, dir: &Path) -> Report {
    std::fs::create_dir_all(dir).expect("creating the report directory");
    let repo_list = dir.join("repo-list.yaml");
    std::fs::write(&repo_list, format!("sigStorageRegistry: {}\n", sig_storage_registry(images)))
        .expect("writing the repo list");
    let kubeconfig = Cluster::shared().kubeconfig().to_path_buf();
    let test_args = [
        format!("--kubeconfig={}", kubeconfig.display()),
        "--provider=local".to_string(),
        format!("--report-dir={}", dir.display()),
    ];
    let envs = [("KUBE_TEST_REPO_LIST", repo_list.display().to_string())];
    let report = run_ginkgo(selection, procs, dir, &test_args, &envs, Progress::with_prefix(SPEC_PREFIX));
    std::fs::write(dir.join("files.md"), per_file(&report)).expect("writing files.md");
    report
}

/// Passed, failed, skipped per source file, as a Markdown table, and the last line.
pub fn per_file(report: &Report) -> String {
    let mut files: BTreeMap<&str, [usize; 3]> = BTreeMap::new();
    for spec in report.specs.values() {
        files.entry(file_of(&spec.name)).or_default()[spec.state as usize] += 1;
    }
    let mut out = String::from("| file | passed | failed | skipped |\n|---|---:|---:|---:|\n");
    for (file, [p, f, s]) in files {
        out.push_str(&format!("| {file} | {p} | {f} | {s} |\n"));
    }
    out.push_str(&format!("\n{}\n", report.last_line()));
    for spec in report.specs.values().filter(|s| s.state == State::Failed) {
        out.push_str(&format!("\n- failed: {}", spec.name));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_selection_matches_each_embedded_spec_and_nothing_else() {
        assert_eq!(EMBEDDED.len(), 25);
        let focus = selection(false).focus;
        // The focus is a plain alternation of escaped texts: each spec's text starts with one of them.
        for (file, spec) in EMBEDDED {
            assert_eq!(file_of(&format!("{SPEC_PREFIX}{spec}")), *file, "{spec}");
            assert!(focus.contains(&escaped(spec)), "{spec}");
        }
        assert_eq!(escaped("a [Slow] (x) b=c, d"), "a \\[Slow\\] \\(x\\) b=c, d");
        let quick: Vec<&str> = QUICK.iter().map(|&i| EMBEDDED[i].1).collect();
        assert!(quick[0].ends_with("late binding, with topology"));
        assert!(quick[1].ends_with("controller expansion fails with final error"));
        assert!(quick[2].ends_with("create/delete with secrets"));
        assert!(quick[3].ends_with("attachment limit exceeded"));
        assert_eq!(selection(true).focus.matches('|').count(), QUICK.len() - 1);
    }

    #[test]
    fn progress_reads_the_family_s_spec_names() {
        let output = "\
• [36.880 seconds]
[sig-storage] CSI Mock volume expansion CSI Volume expansion [It] should expand volume without restarting pod if nodeExpansion=off
k8s.io/kubernetes@v1.36.3/test/e2e/storage/csimock/csi_volume_expansion.go:122
------------------------------
• [FAILED] [61.250 seconds]
[sig-storage] MutableCSINodeAllocatableCount [FeatureGate:MutableCSINodeAllocatableCount] Attach Limit Exceeded [It] should transition pod to failed state when attachment limit exceeded
";
        let mut progress = Progress::with_prefix(SPEC_PREFIX);
        let mut report = Report::default();
        for spec in output.lines().filter_map(|l| progress.line(l)) {
            report.specs.insert(spec.name.clone(), spec);
        }
        assert_eq!(report.last_line(), "1 passed, 1 failed, 0 skipped");
        let table = per_file(&report);
        assert!(table.contains("| csi_volume_expansion.go | 1 | 0 | 0 |"), "{table}");
        assert!(table.contains("| mutable_csinode_allocatable.go | 0 | 1 | 0 |"), "{table}");
    }
}
