//! Kubernetes' own storage e2e tests on the node (`make node-e2e`): the quick share of `make conformance`, one spec of
//! each suite the driver takes part in ([`conformance::QUICK`]), run by Kubernetes' e2e.test against hostpath-plugin
//! behind our sidecars (charts/csi-sidecars, every sidecar on, attachRequired). None fails, and each suite has a spec
//! that passed (the focus also matches specs of other test patterns, Pre-provisioned or Inline, which the suite skips
//! for this driver).

use csi_sidecars_e2e::control_plane::cluster::repo_root;
use csi_sidecars_e2e::kubernetes_suites::conformance::{self, QUICK, Selection, State};
use csi_sidecars_e2e::node::driver::Images;

#[tokio::test]
#[ignore = "needs the node: make node-e2e"]
async fn one_spec_of_each_suite_passes_with_our_sidecars() {
    let driver = conformance::install(Images::Ours).await;
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(Into::into)
        .unwrap_or_else(|| repo_root().join("target"))
        .join("conformance/quick");
    let _ = std::fs::remove_dir_all(&dir);
    let report = conformance::run(&driver, &Selection::quick(), 4, &dir);
    eprintln!("{}", report.markdown());
    let failed: Vec<_> = report.specs.values().filter(|s| s.state == State::Failed).map(|s| &s.name).collect();
    assert!(failed.is_empty(), "failed: {failed:#?}");
    let suites = report.per_suite();
    let without_pass: Vec<_> = QUICK
        .iter()
        .map(|(suite, _)| *suite)
        .filter(|s| suites.get(*s).is_none_or(|[passed, _, _]| *passed == 0))
        .collect();
    assert!(without_pass.is_empty(), "no spec passed of {without_pass:?}: {suites:?}");
}
