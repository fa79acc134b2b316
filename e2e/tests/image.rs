//! The OCI archive `make image` writes (image/build.sh): one from-scratch image per sidecar binary. Ignored in
//! `make test` (it needs the static release build); `make image` runs it with `--ignored` right after building.
//!
//! Checked per image: every blob matches its digest; the config says linux/amd64, root as the user (upstream's
//! images run as root, so a swap where the pod sets no runAsUser still reaches a root driver's socket) and the
//! binary as entrypoint; the single layer holds that binary and nothing else (no shell, no libc); the binary is
//! statically linked (no ELF interpreter) and answers `--version` with the workspace version when run from the
//! extracted layer.
//!
//! The SBOM: every binary carries cargo-auditable's record of its crates (ELF section `.dep-v0`, zlib-compressed
//! JSON), which Trivy, Grype and Syft read. Checked against the dependency graph cargo resolves for the image build
//! (`cargo tree` over the same packages): every crate compiled into the binary is listed at its Cargo.lock version,
//! and nothing is listed as a runtime crate that is not in the binary's graph.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use csi_sidecars_e2e::control_plane::cluster::repo_root;
use csi_sidecars_e2e::processes::shipped::SHIPPED_BINARIES as BINARIES;
use serde_json::Value;

fn archive() -> PathBuf {
    let path = repo_root().join("target/image/csi-sidecars.oci.tar");
    assert!(path.exists(), "{} is missing: run `make image`", path.display());
    path
}

fn run(program: &str, args: &[&str]) -> String {
    let output = Command::new(program).args(args).output().unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(output.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).expect("UTF-8 output")
}

fn sha256(path: &Path) -> String {
    run("sha256sum", &[path.to_str().unwrap()]).split_whitespace().next().unwrap().to_string()
}

/// The blob a descriptor names, after checking its digest and size.
fn blob(layout: &Path, descriptor: &Value) -> PathBuf {
    let digest = descriptor["digest"].as_str().expect("a digest");
    let hex = digest.strip_prefix("sha256:").expect("sha256 digests");
    let path = layout.join("blobs/sha256").join(hex);
    assert_eq!(sha256(&path), hex, "blob {digest} matches its digest");
    assert_eq!(std::fs::metadata(&path).unwrap().len(), descriptor["size"].as_u64().unwrap(), "size of {digest}");
    path
}

fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Whether an ELF file asks for a dynamic loader (a PT_INTERP program header).
fn has_interpreter(elf: &[u8]) -> bool {
    assert_eq!(&elf[..5], b"\x7fELF\x02", "a 64-bit ELF file");
    let u16_at = |at: usize| u16::from_le_bytes([elf[at], elf[at + 1]]) as usize;
    let phoff = u64::from_le_bytes(elf[0x20..0x28].try_into().unwrap()) as usize;
    let (phentsize, phnum) = (u16_at(0x36), u16_at(0x38));
    (0..phnum).any(|i| {
        let at = phoff + i * phentsize;
        u32::from_le_bytes(elf[at..at + 4].try_into().unwrap()) == 3
    })
}

/// Each binary of the image and the package it is built from (image/build.sh's PACKAGES).
const PACKAGE_OF: [(&str, &str); 9] = [
    ("csi-provisioner", "provisioner"),
    ("csi-resizer", "resizer"),
    ("csi-snapshotter", "snapshot-binaries"),
    ("snapshot-controller", "snapshot-binaries"),
    ("csi-group-snapshotter", "snapshot-binaries"),
    ("csi-attacher", "attacher"),
    ("csi-node-driver-registrar", "node-driver-registrar"),
    ("livenessprobe", "livenessprobe"),
    ("csi-sidecars", "csi-sidecars"),
];

/// A crate as name and version.
type Crate = (String, String);

fn read_u16(elf: &[u8], at: usize) -> Option<usize> {
    Some(u16::from_le_bytes(elf.get(at..at + 2)?.try_into().ok()?) as usize)
}

fn read_u32(elf: &[u8], at: usize) -> Option<usize> {
    Some(u32::from_le_bytes(elf.get(at..at + 4)?.try_into().ok()?) as usize)
}

fn read_u64(elf: &[u8], at: usize) -> Option<usize> {
    usize::try_from(u64::from_le_bytes(elf.get(at..at + 8)?.try_into().ok()?)).ok()
}

/// The contents of the section `name` of a 64-bit little-endian ELF file, if it has one.
fn elf_section<'a>(elf: &'a [u8], name: &str) -> Option<&'a [u8]> {
    let shoff = read_u64(elf, 0x28)?;
    let (shentsize, shnum, shstrndx) = (read_u16(elf, 0x3a)?, read_u16(elf, 0x3c)?, read_u16(elf, 0x3e)?);
    let names = read_u64(elf, shoff + shstrndx * shentsize + 0x18)?;
    (0..shnum).find_map(|i| {
        let header = shoff + i * shentsize;
        let start = names + read_u32(elf, header)?;
        let len = elf.get(start..)?.iter().position(|&b| b == 0)?;
        if &elf[start..start + len] != name.as_bytes() {
            return None;
        }
        let (offset, size) = (read_u64(elf, header + 0x18)?, read_u64(elf, header + 0x20)?);
        elf.get(offset..offset.checked_add(size)?)
    })
}

/// zlib-decompressed bytes (Python's zlib: the workspace has no inflate crate).
fn zlib_inflate(data: &[u8]) -> Vec<u8> {
    let script = "import sys, zlib; sys.stdout.buffer.write(zlib.decompress(sys.stdin.buffer.read()))";
    let mut child = Command::new("python3")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 (zlib) to inflate the audit data");
    child.stdin.take().unwrap().write_all(data).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "the audit data is not zlib data");
    output.stdout
}

/// The crates each root reaches in `cargo tree --prefix depth -f '{p}'` output. A package printed again is marked
/// `(*)` without its children, which are printed where it first appears, so the edges of all lines are joined.
fn tree_closures(tree: &str) -> BTreeMap<String, BTreeSet<Crate>> {
    let mut edges: BTreeMap<Crate, BTreeSet<Crate>> = BTreeMap::new();
    let (mut path, mut roots) = (Vec::<Crate>::new(), Vec::new());
    for line in tree.lines().filter(|l| !l.trim().is_empty()) {
        let digits = line.find(|c: char| !c.is_ascii_digit()).expect("a package after the depth");
        let depth: usize = line[..digits].parse().expect("a depth prefix");
        let mut words = line[digits..].split_whitespace();
        let name = words.next().unwrap().to_string();
        let version = words.next().and_then(|v| v.strip_prefix('v')).expect("a version").to_string();
        path.truncate(depth);
        match path.last() {
            Some(parent) => _ = edges.entry(parent.clone()).or_default().insert((name.clone(), version.clone())),
            None => roots.push((name.clone(), version.clone())),
        }
        path.push((name, version));
    }
    roots
        .into_iter()
        .map(|root| {
            let (mut seen, mut todo) = (BTreeSet::from([root.clone()]), vec![root.clone()]);
            while let Some(next) = todo.pop() {
                for child in edges.get(&next).into_iter().flatten() {
                    if seen.insert(child.clone()) {
                        todo.push(child.clone());
                    }
                }
            }
            (root.0, seen)
        })
        .collect()
}

/// The image packages' dependency graphs as the image build resolves them (its packages, its target), following
/// the given kinds of edges.
fn build_graphs(edges: &str) -> BTreeMap<String, BTreeSet<Crate>> {
    let mut args = vec!["tree", "--locked", "--target", "x86_64-unknown-linux-gnu", "--prefix", "depth", "-f", "{p}"];
    let packages: BTreeSet<&str> = PACKAGE_OF.iter().map(|(_, p)| *p).collect();
    for package in &packages {
        args.extend(["-p", package]);
    }
    args.extend(["-e", edges]);
    let manifest = repo_root().join("Cargo.toml");
    args.extend(["--manifest-path", manifest.to_str().unwrap()]);
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    tree_closures(&run(&cargo, &args))
}

/// Name and version of every package in Cargo.lock.
fn locked_crates() -> BTreeSet<Crate> {
    let lock = std::fs::read_to_string(repo_root().join("Cargo.lock")).unwrap();
    let (mut crates, mut name) = (BTreeSet::new(), None);
    for line in lock.lines() {
        if let Some(value) = line.strip_prefix("name = ") {
            name = Some(value.trim_matches('"').to_string());
        } else if let (Some(value), Some(n)) = (line.strip_prefix("version = "), name.take()) {
            crates.insert((n, value.trim_matches('"').to_string()));
        }
    }
    crates
}

/// Checks one binary's audit data against the build's graphs; returns the crates it lists.
fn check_sbom(
    binary: &str,
    elf: &[u8],
    full: &BTreeMap<String, BTreeSet<Crate>>,
    runtime: &BTreeMap<String, BTreeSet<Crate>>,
    locked: &BTreeSet<Crate>,
) -> BTreeMap<String, String> {
    let section = elf_section(elf, ".dep-v0").unwrap_or_else(|| panic!("{binary}: no .dep-v0 (cargo auditable)"));
    let audit: Value = serde_json::from_slice(&zlib_inflate(section)).expect("the audit data is JSON");
    let packages = audit["packages"].as_array().expect("packages");
    let (mut listed, mut listed_runtime, mut roots) = (BTreeSet::new(), BTreeSet::new(), Vec::new());
    for package in packages {
        let name = package["name"].as_str().expect("a name").to_string();
        let version = package["version"].as_str().expect("a version").to_string();
        for dep in package["dependencies"].as_array().into_iter().flatten() {
            assert!(dep.as_u64().is_some_and(|i| (i as usize) < packages.len()), "{binary}: {name}: bad index {dep}");
        }
        match package["source"].as_str() {
            Some("local") => assert_eq!(version, env!("CARGO_PKG_VERSION"), "{binary}: workspace crate {name}"),
            Some("crates.io") => {
                assert!(locked.contains(&(name.clone(), version.clone())), "{binary}: {name} {version} in Cargo.lock")
            }
            other => panic!("{binary}: {name} comes from {other:?}, not crates.io or the workspace"),
        }
        if package["root"] == true {
            roots.push(name.clone());
        }
        if package["kind"].as_str().unwrap_or("runtime") == "runtime" {
            listed_runtime.insert((name.clone(), version.clone()));
        }
        listed.insert((name, version));
    }
    let package = PACKAGE_OF.iter().find(|(b, _)| *b == binary).unwrap().1;
    assert_eq!(roots, [package], "{binary}: one root, its package");
    let (graph, runtime_graph) = (&full[package], &runtime[package]);
    let missing: Vec<_> = graph.difference(&listed).collect();
    assert!(missing.is_empty(), "{binary}: crates of its build not listed: {missing:?}");
    let foreign: Vec<_> = listed_runtime.difference(runtime_graph).collect();
    assert!(foreign.is_empty(), "{binary}: listed as runtime crates, not in its graph: {foreign:?}");
    listed.into_iter().collect()
}

#[test]
#[ignore = "needs `make image` (static release build); `make image` runs it"]
fn every_image_is_one_static_binary_run_as_root_like_upstreams() {
    let dir = tempfile::tempdir().unwrap();
    let layout = dir.path().join("layout");
    std::fs::create_dir(&layout).unwrap();
    run("tar", &["-xf", archive().to_str().unwrap(), "-C", layout.to_str().unwrap()]);
    assert_eq!(json(&layout.join("oci-layout"))["imageLayoutVersion"], "1.0.0");
    let index = json(&layout.join("index.json"));
    let manifests = index["manifests"].as_array().expect("index manifests");
    let names: Vec<&str> =
        manifests.iter().map(|m| m["annotations"]["org.opencontainers.image.ref.name"].as_str().unwrap()).collect();
    assert_eq!(names, *BINARIES);
    let version = env!("CARGO_PKG_VERSION");
    let (full, runtime, locked) = (build_graphs("normal,build"), build_graphs("normal"), locked_crates());

    for (entry, &binary) in manifests.iter().zip(BINARIES.iter()) {
        assert_eq!(entry["platform"]["architecture"], "amd64");
        let manifest = json(&blob(&layout, entry));
        assert_eq!(manifest["mediaType"], "application/vnd.oci.image.manifest.v1+json");
        let config = json(&blob(&layout, &manifest["config"]));
        assert_eq!(config["architecture"], "amd64", "{binary}");
        assert_eq!(config["os"], "linux", "{binary}");
        assert_eq!(config["config"]["User"], "0:0", "{binary}: root, as upstream's images");
        assert_eq!(config["config"]["Entrypoint"], serde_json::json!([format!("/{binary}")]), "{binary}");
        assert!(config["config"].get("Cmd").is_none_or(Value::is_null), "{binary}: no default command");

        let layers = manifest["layers"].as_array().unwrap();
        assert_eq!(layers.len(), 1, "{binary}: one layer");
        assert_eq!(layers[0]["mediaType"], "application/vnd.oci.image.layer.v1.tar+gzip");
        let layer = blob(&layout, &layers[0]);
        let files = run("tar", &["-tzvf", layer.to_str().unwrap()]);
        let entries: Vec<&str> = files.lines().collect();
        assert_eq!(entries.len(), 1, "{binary}: the layer holds the binary alone (no shell): {files}");
        assert!(entries[0].starts_with("-rwxr-xr-x 0/0"), "{binary}: root-owned, not writable: {files}");
        let uncompressed = String::from_utf8(
            Command::new("sh")
                .arg("-c")
                .arg(format!("gzip -dc {} | sha256sum", layer.display()))
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap();
        let diff_id = format!("sha256:{}", uncompressed.split_whitespace().next().unwrap());
        assert_eq!(config["rootfs"]["diff_ids"], serde_json::json!([diff_id]), "{binary}: diff_id");

        let rootfs = dir.path().join(binary);
        std::fs::create_dir(&rootfs).unwrap();
        run("tar", &["-xzf", layer.to_str().unwrap(), "-C", rootfs.to_str().unwrap()]);
        let executable = rootfs.join(binary);
        let elf = std::fs::read(&executable).unwrap();
        assert!(!has_interpreter(&elf), "{binary} is statically linked");
        let listed = check_sbom(binary, &elf, &full, &runtime, &locked);
        for key in ["tokio", "tonic", "prost"] {
            let at = locked.iter().find(|(name, _)| name == key).map(|(_, v)| v);
            assert_eq!(listed.get(key), at, "{binary}: {key} at the Cargo.lock version");
        }
        if binary != "livenessprobe" && binary != "csi-node-driver-registrar" {
            assert!(listed.contains_key("kube-client"), "{binary}: kube-client listed");
        }
        for absent in ["csi-sidecars-e2e", "hostpath-plugin", "proptest"] {
            assert!(!listed.contains_key(absent), "{binary}: {absent} is not in the image");
        }
        let output = Command::new(&executable).arg("--version").env_clear().output().unwrap();
        assert!(output.status.success(), "{binary} --version: {}", String::from_utf8_lossy(&output.stderr));
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(text.contains(version), "{binary} --version names {version}: {text}");
    }
}

#[test]
fn a_dynamically_linked_binary_has_an_interpreter() {
    // The test binary itself is an ordinary (dynamic) build: the check must tell it apart.
    let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
    assert!(has_interpreter(&me));
}

#[test]
fn the_section_reader_finds_a_section_by_name() {
    // The test binary itself: an ordinary build, with code and without audit data.
    let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
    assert!(elf_section(&me, ".text").is_some_and(|text| !text.is_empty()));
    assert!(elf_section(&me, ".dep-v0").is_none());
    assert!(elf_section(&me[..0x40], ".text").is_none(), "section headers cut off");
}

#[test]
fn tree_closures_follow_the_edges_of_a_package_printed_once() {
    let cases: [(&str, &str, &[&str]); 4] = [
        // (tree, root, what the root reaches)
        ("0a v1.0.0\n1b v1.0.0\n", "a", &["a 1.0.0", "b 1.0.0"]),
        // b's children are printed under the first root only; the second root still reaches them.
        ("0a v1.0.0\n1b v1.0.0\n2c v2.0.0\n\n0d v0.1.0 (/x)\n1b v1.0.0 (*)\n", "d", &["b 1.0.0", "c 2.0.0", "d 0.1.0"]),
        ("0a v1.0.0\n1b v1.0.0\n2c v2.0.0\n\n0d v0.1.0 (/x)\n1b v1.0.0 (*)\n", "a", &["a 1.0.0", "b 1.0.0", "c 2.0.0"]),
        // Siblings after a deeper line hang from the right parent.
        ("0a v1.0.0\n1b v1.0.0\n2c v2.0.0 (proc-macro)\n1e v3.0.0\n0f v1.0.0\n", "f", &["f 1.0.0"]),
    ];
    for (tree, root, want) in cases {
        let got: Vec<String> = tree_closures(tree)[root].iter().map(|(n, v)| format!("{n} {v}")).collect();
        assert_eq!(got, want, "{tree:?} from {root}");
    }
}
