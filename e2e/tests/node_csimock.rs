//! Kubernetes' CSI mock tests on the node (`make node-e2e`): the quick share of `make csimock` ([`csimock::QUICK`]:
//! the provisioner's reschedule after RESOURCE_EXHAUSTED with topology, the resizer's recovery from a controller
//! expansion's final error, the snapshotter's secrets, the attacher's error on an attach limit), each run by e2e.test
//! as the CSI driver behind hostpath-plugin `--proxy-endpoint`, with our sidecars under the names the mock manifests ask
//! for (`e2e/node-images.sh e2e`). Every one passes.

use csi_sidecars_e2e::control_plane::cluster::repo_root;
use csi_sidecars_e2e::kubernetes_suites::conformance::State;
use csi_sidecars_e2e::kubernetes_suites::csimock::{self, QUICK};
use csi_sidecars_e2e::node::driver::Images;

#[tokio::test]
#[ignore = "needs the node: make node-e2e"]
async fn the_quick_share_of_the_csi_mock_tests_passes_with_our_sidecars() {
    let setup = csimock::install(Images::Ours).await;
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(Into::into)
        .unwrap_or_else(|| repo_root().join("target"))
        .join("csimock/quick");
    let _ = std::fs::remove_dir_all(&dir);
    let report = csimock::run(Images::Ours, &csimock::selection(true), 4, &dir);
    drop(setup);
    eprintln!("{}", csimock::per_file(&report));
    assert_eq!(report.count(State::Passed), QUICK.len(), "{}", report.last_line());
}
