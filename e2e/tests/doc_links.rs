//! Every relative link and `#anchor` in README.md and docs/*.md resolves: the file or directory a link names exists,
//! and an anchor names a heading of the page it points into (GitHub's rule: lowercase, spaces to `-`, punctuation
//! but `-` and `_` dropped, a repeated heading's anchor suffixed `-1`, `-2`, ...). Code blocks and code spans are
//! not read for links or headings. Needs no cluster and no binaries.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use csi_sidecars_e2e::control_plane::cluster::repo_root;

/// GitHub's anchor for a heading's text.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .flat_map(char::to_lowercase)
        .collect()
}

/// The page's lines outside fenced code blocks, with their 1-based numbers.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fence: Option<&str> = None;
    let mut lines = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let marker = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m));
        match (fence, marker) {
            (None, Some(m)) => fence = Some(m),
            (Some(open), Some(m)) if open == m => fence = None,
            (None, None) => lines.push((index + 1, line)),
            _ => {}
        }
    }
    lines
}

/// Every anchor the page's headings give, repeated headings numbered as GitHub numbers them.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    for (_, line) in prose_lines(text) {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        let Some(title) = line.get(hashes..).and_then(|rest| rest.strip_prefix(' ')) else { continue };
        if !(1..=6).contains(&hashes) {
            continue;
        }
        let base = anchor(title.trim_end().trim_end_matches('#'));
        let mut candidate = base.clone();
        let mut n = 0;
        while seen.contains(&candidate) {
            n += 1;
            candidate = format!("{base}-{n}");
        }
        seen.insert(candidate);
    }
    seen
}

/// The line with its code spans blanked out.
fn without_code_spans(line: &str) -> String {
    line.split('`').enumerate().map(|(i, part)| if i % 2 == 0 { part } else { "" }).collect::<Vec<_>>().join("``")
}

/// Every inline link target (`[text](target)` and images) outside code, with its line number.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (number, line) in prose_lines(text) {
        let line = without_code_spans(line);
        let mut rest = line.as_str();
        while let Some(start) = rest.find("](") {
            let after = &rest[start + 2..];
            let end = after.find(')').unwrap_or(after.len());
            let target = after[..end].split_whitespace().next().unwrap_or("");
            found.push((number, target.to_string()));
            rest = &after[end..];
        }
    }
    found
}

/// What is wrong with `target` in the page at `page` (relative to the repository root), if anything.
fn broken(root: &Path, page: &Path, target: &str) -> Option<String> {
    if target.is_empty() {
        return Some("an empty link".to_string());
    }
    if target.contains("://") || target.starts_with("mailto:") {
        return None;
    }
    let (path, fragment) = target.split_once('#').map_or((target, None), |(p, f)| (p, Some(f)));
    let file: PathBuf = if path.is_empty() {
        root.join(page)
    } else if let Some(absolute) = path.strip_prefix('/') {
        root.join(absolute)
    } else {
        root.join(page).parent().unwrap().join(path)
    };
    if !file.exists() {
        return Some(format!("{} does not exist", file.display()));
    }
    let fragment = fragment?;
    if file.extension().is_none_or(|e| e != "md") {
        return Some(format!("an anchor into {}, which is not a Markdown page", file.display()));
    }
    let text = std::fs::read_to_string(&file).unwrap();
    (!anchors(&text).contains(fragment))
        .then(|| format!("{} has no heading with the anchor #{fragment}", file.display()))
}

/// README.md and every page under docs/, relative to the repository root.
fn pages(root: &Path) -> Vec<PathBuf> {
    let mut pages = vec![PathBuf::from("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .filter_map(Result::ok)
        .map(|entry| PathBuf::from("docs").join(entry.file_name()))
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let root = repo_root();
    let mut problems = Vec::new();
    let mut checked = 0;
    for page in pages(&root) {
        let text = std::fs::read_to_string(root.join(&page)).unwrap();
        for (line, target) in links(&text) {
            checked += 1;
            if let Some(problem) = broken(&root, &page, &target) {
                problems.push(format!("{}:{line}: ({target}): {problem}", page.display()));
            }
        }
    }
    assert!(checked > 50, "the links are found: {checked}");
    assert!(problems.is_empty(), "broken links:\n{}", problems.join("\n"));
}

/// The README is a front page: short, and its documentation index names every page under docs/.
#[test]
fn the_readme_is_a_front_page_that_links_every_docs_page() {
    let root = repo_root();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(lines <= 400, "README.md is {lines} lines: at most 400, the rest belongs under docs/");
    let targets: BTreeSet<String> = links(&readme).into_iter().map(|(_, t)| t).collect();
    for page in pages(&root).into_iter().skip(1) {
        let page = page.display().to_string();
        assert!(targets.contains(&page), "README.md does not link {page}");
    }
}

#[test]
fn anchors_follow_githubs_rule() {
    let rows = [
        ("Quick start", "quick-start"),
        ("RBAC: what to add to upstream's role, and why", "rbac-what-to-add-to-upstreams-role-and-why"),
        ("One process for several sidecars", "one-process-for-several-sidecars"),
        ("In-flight journal", "in-flight-journal"),
        ("csi-node-driver-registrar", "csi-node-driver-registrar"),
        ("`csictl` and snake_case", "csictl-and-snake_case"),
        ("Kubernetes' storage tests", "kubernetes-storage-tests"),
        ("A (b) c.d/e", "a-b-cde"),
        ("Two  spaces", "two--spaces"),
        ("Ünïcode Läbel", "ünïcode-läbel"),
        ("  Trimmed  ", "trimmed"),
    ];
    for (heading, expected) in rows {
        assert_eq!(anchor(heading), expected, "{heading:?}");
    }
}

#[test]
fn headings_in_code_blocks_are_not_anchors_and_repeats_are_numbered() {
    let page = "# Title\n\n## Part\n\n```sh\n# not a heading\n```\n\n## Part\n\n### Part\n#nospace\n";
    let expected: BTreeSet<String> = ["title", "part", "part-1", "part-2"].map(String::from).into();
    assert_eq!(anchors(page), expected);
}

#[test]
fn links_are_read_outside_code_only() {
    let page = "See [a](docs/a.md#x) and ![b](img.svg \"title\").\n`[c](not-a-link)`\n```\n[d](nor-this)\n```\n\
                [e](#local) [f](https://example.com)\n";
    let found: Vec<(usize, String)> = links(page);
    let expected = [(1, "docs/a.md#x"), (1, "img.svg"), (6, "#local"), (6, "https://example.com")]
        .map(|(line, target)| (line, target.to_string()));
    assert_eq!(found, expected);
}

#[test]
fn a_missing_file_or_anchor_is_reported() {
    let root = repo_root();
    let page = Path::new("README.md");
    assert_eq!(broken(&root, page, "docs/flags.md#csi-provisioner"), None);
    assert_eq!(broken(&root, page, "#quick-start"), None);
    assert_eq!(broken(&root, page, "https://example.com/x#y"), None);
    assert!(broken(&root, page, "docs/no-such-page.md").is_some());
    assert!(broken(&root, page, "#no-such-heading").is_some());
    assert!(broken(&root, page, "docs/flags.md#no-such-binary").is_some());
    assert_eq!(broken(&root, Path::new("docs/flags.md"), "../README.md#set-up"), None);
}
