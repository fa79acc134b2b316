//! The flag reference (docs/flags.md) is each binary's `--help`, so it cannot drift from the flags. With
//! `UPDATE_FLAG_REFERENCE=1` the test rewrites the page's blocks instead of comparing them.

use std::process::Command;

use csi_sidecars_e2e::control_plane::cluster::repo_root;
use csi_sidecars_e2e::processes::scenario::binary;
use csi_sidecars_e2e::processes::shipped::SHIPPED_BINARIES as BINARIES;

const END: &str = "<!-- /flag-reference -->";

fn help(name: &str) -> String {
    // No terminal and no COLUMNS: clap wraps at its fixed default width, the same on every machine.
    let output = Command::new(binary(name)).arg("--help").env_remove("COLUMNS").output().expect("run --help");
    assert!(output.status.success(), "{name} --help: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).expect("UTF-8 help").trim_end().to_string()
}

/// The flag reference with `name`'s block set to `help` (a fenced text block between its markers).
fn with_block(page: &str, name: &str, help: &str) -> String {
    let start_marker = format!("<!-- flag-reference {name} -->\n");
    let start = page.find(&start_marker).unwrap_or_else(|| panic!("docs/flags.md has no block for {name}"))
        + start_marker.len();
    let end = start + page[start..].find(END).expect("the block is closed");
    format!("{}```text\n{help}\n```\n{}", &page[..start], &page[end..])
}

#[test]
fn the_flag_reference_is_each_binarys_help() {
    let path = repo_root().join("docs/flags.md");
    let page = std::fs::read_to_string(&path).unwrap();
    let expected = BINARIES.iter().fold(page.clone(), |text, name| with_block(&text, name, &help(name)));
    if std::env::var_os("UPDATE_FLAG_REFERENCE").is_some() {
        std::fs::write(&path, &expected).unwrap();
        return;
    }
    if expected != page {
        let changed: Vec<&str> =
            BINARIES.iter().copied().filter(|name| with_block(&page, name, &help(name)) != page).collect();
        panic!(
            "docs/flags.md is stale for {changed:?}: run UPDATE_FLAG_REFERENCE=1 cargo test -p csi-sidecars-e2e --test flag_reference"
        );
    }
}

#[test]
fn a_block_is_replaced_between_its_markers_only() {
    let page = "a\n<!-- flag-reference x -->\n```text\nold\n```\n<!-- /flag-reference -->\nb\n";
    let updated = with_block(page, "x", "new");
    assert_eq!(updated, "a\n<!-- flag-reference x -->\n```text\nnew\n```\n<!-- /flag-reference -->\nb\n");
}

/// Every shipped binary answers `--version` (and Go's `-version`) alone, as upstream's do and as the image test asks
/// of each binary in the image, without a driver, a cluster or, for csi-sidecars, a `--sidecars` list.
#[test]
fn every_binary_answers_version_alone() {
    for name in BINARIES.iter() {
        for flag in ["--version", "-version"] {
            let output = Command::new(binary(name)).arg(flag).output().expect("run --version");
            let stdout = String::from_utf8_lossy(&output.stdout);
            assert!(output.status.success(), "{name} {flag}: {}", String::from_utf8_lossy(&output.stderr));
            assert!(stdout.trim_end().ends_with(&format!(" {}", env!("CARGO_PKG_VERSION"))), "{name} {flag}: {stdout}");
        }
    }
}
