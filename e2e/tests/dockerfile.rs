//! The `Dockerfile` builds what `make image` builds (image/build.sh): the same binaries, one from-scratch target
//! each, and with the same cargo-auditable version, so that an image built in a user's pipeline carries the same
//! record of its crates (section `.dep-v0`). No container daemon here: the file is read, not run.

use csi_sidecars_e2e::control_plane::cluster::repo_root;
use csi_sidecars_e2e::processes::shipped::SHIPPED_BINARIES;

fn read(path: &str) -> String {
    std::fs::read_to_string(repo_root().join(path)).unwrap_or_else(|e| panic!("reading {path}: {e}"))
}

/// The words of build.sh's bash array `name=(...)`, which may span lines.
fn bash_array(script: &str, name: &str) -> Vec<String> {
    let start = script.find(&format!("\n{name}=(")).unwrap_or_else(|| panic!("{name}=( in build.sh")) + name.len() + 3;
    let end = start + script[start..].find(')').expect("the array's end");
    script[start..end].split_whitespace().map(String::from).collect()
}

#[test]
fn the_dockerfile_builds_the_images_of_make_image_with_cargo_auditable() {
    let dockerfile = read("Dockerfile");
    let build = read("image/build.sh");
    let version = build.lines().find_map(|l| l.strip_prefix("AUDITABLE_VERSION=")).expect("the pinned version");
    assert!(
        dockerfile.contains(&format!("cargo install --locked --version {version} cargo-auditable")),
        "the Dockerfile installs cargo-auditable {version}"
    );
    assert!(dockerfile.contains("cargo auditable build --release --locked"), "the Dockerfile builds through it");
    assert!(!dockerfile.contains("cargo build"), "no plain cargo build is left");

    let binaries = bash_array(&build, "BINARIES");
    let targets: Vec<String> =
        dockerfile.lines().filter_map(|l| l.strip_prefix("FROM scratch AS ")).map(|t| t.trim().to_string()).collect();
    assert_eq!(targets, binaries, "one from-scratch target per binary, in build.sh's order");
    let bins: Vec<String> = dockerfile
        .split_whitespace()
        .collect::<Vec<_>>()
        .windows(2)
        .filter(|w| w[0] == "--bin")
        .map(|w| w[1].to_string())
        .collect();
    assert_eq!(bins, binaries, "the binaries the build stage builds");
    let packages: Vec<String> = dockerfile
        .split_whitespace()
        .collect::<Vec<_>>()
        .windows(2)
        .filter(|w| w[0] == "-p")
        .map(|w| w[1].to_string())
        .collect();
    assert_eq!(packages, bash_array(&build, "PACKAGES"), "the packages the build stage builds");
}

/// The images are the described binaries (each sidecar's `Description` and csi-sidecars): make image's in their
/// order, the node suite's among its own.
#[test]
fn the_images_are_the_described_binaries() {
    assert_eq!(bash_array(&read("image/build.sh"), "BINARIES"), *SHIPPED_BINARIES, "image/build.sh's BINARIES");
    let mut ours = bash_array(&read("e2e/node-images.sh"), "OURS");
    let mut expected: Vec<String> = SHIPPED_BINARIES.iter().map(|b| b.to_string()).collect();
    expected.push("hostpath-plugin".into());
    ours.sort();
    expected.sort();
    assert_eq!(ours, expected, "e2e/node-images.sh's OURS: every shipped binary and the hostpath plugin");
}

#[test]
fn bash_arrays_are_read_across_lines() {
    let script = "X=1\nLIST=(a b\n\tc)\nOTHER=(d)\n";
    assert_eq!(bash_array(script, "LIST"), ["a", "b", "c"]);
    assert_eq!(bash_array(script, "OTHER"), ["d"]);
}
