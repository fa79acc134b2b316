//! Every example manifest (examples/<story>/*.yaml) is accepted by the real API server, story by story
//! (`kubectl apply --dry-run=server`: schemas, CRD schemas and admission, nothing stored), and every story has
//! its README.

use csi_sidecars_e2e::charts::{documents, dry_run_apply, examples};
use csi_sidecars_e2e::control_plane::cluster::{Cluster, repo_root};
use csi_sidecars_e2e::control_plane::namespace::TestNamespace;
use csi_sidecars_e2e::control_plane::snapshot_crds::install_snapshot_crds;

#[tokio::test]
async fn every_example_is_accepted_by_the_api_server() {
    let client = Cluster::shared().client().await;
    install_snapshot_crds(&client).await;
    let ns = TestNamespace::create(&client, "examples").await;
    let stories = examples();
    assert!(stories.len() >= 8, "one folder per seed story: {stories:?}");
    for (story, files) in stories {
        assert!(!files.is_empty(), "{story} has manifests");
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            let applied = dry_run_apply(ns.name(), &text).unwrap_or_else(|e| panic!("{} refused: {e}", file.display()));
            assert_eq!(
                applied.lines().count(),
                documents(&text).len(),
                "{}: one line per object:\n{applied}",
                file.display()
            );
        }
    }
}

#[test]
fn every_story_has_a_readme_listed_in_the_index() {
    let index = std::fs::read_to_string(repo_root().join("examples/README.md")).unwrap();
    for (story, _) in examples() {
        let readme = repo_root().join("examples").join(&story).join("README.md");
        let text = std::fs::read_to_string(&readme).unwrap_or_else(|e| panic!("{}: {e}", readme.display()));
        assert!(text.contains("What it shows") && text.contains("What you should see"), "{story}/README.md");
        assert!(index.contains(&format!("]({story}/)")), "examples/README.md lists {story}");
    }
}
