//! The OCI archive `make image` writes (image/build.sh): one from-scratch image per sidecar binary. Ignored in
//! `make test` (it needs the static release build); `make image` runs it with `--ignored` right after building.
//!
//! Checked per image: every blob matches its digest; the config says linux/amd64, root as the user (upstream's
//! images run as root, so a swap where the pod sets no runAsUser still reaches a root driver's socket) and the
//! binary as entrypoint; the single layer holds that binary and nothing else (no shell, no libc); the binary is
//! statically linked (no ELF interpreter) and answers `--version` with the workspace version when run from the
//! extracted layer.

use std::path::{Path, PathBuf};
use std::process::Command;

use csi_sidecars_e2e::{SHIPPED_BINARIES as BINARIES, repo_root};
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
    assert_eq!(names, BINARIES);
    let version = env!("CARGO_PKG_VERSION");

    for (entry, binary) in manifests.iter().zip(BINARIES) {
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
        assert!(!has_interpreter(&std::fs::read(&executable).unwrap()), "{binary} is statically linked");
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
