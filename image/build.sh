#!/usr/bin/env bash
# Builds the sidecar images without a container daemon: statically linked release binaries, one from-scratch
# image per binary (the binary alone, no shell, run as root like upstream's), written as one OCI archive.
#
#   image/build.sh            build the binaries, then the archive (make image)
#   image/build.sh --layout   only assemble the archive from binaries already built
#
# Output: target/image/csi-sidecars.oci.tar, an OCI image layout in a tar (what `skopeo copy oci-archive:...`,
# `crane push`, `podman load` and `ctr import` read). Its index names each image by its binary
# (org.opencontainers.image.ref.name), e.g. push one with
#   skopeo copy oci-archive:target/image/csi-sidecars.oci.tar:csi-provisioner docker://REGISTRY/csi-provisioner:TAG
#
# The archive is written by image/oci.sh (tar, gzip and sha256sum); the same binaries give the same digests.
#
# Each binary carries the list of crates it was built from (name, version, source, dependency edges) in its ELF
# section .dep-v0, written by cargo-auditable: the record Trivy, Grype and Syft read from a Rust binary, so a scanner
# pointed at an image finds the crates without a separate SBOM file. `cargo auditable` is installed from crates.io
# into the cache on first use (about a minute).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TARGET_TRIPLE=x86_64-unknown-linux-gnu
# The binaries of the image, each with its package: every sidecar's description's binary, in the order of
# csi-sidecars' list (crates/csi-sidecars/src/sidecars.rs), then snapshot-controller and csi-sidecars (e2e/tests/
# dockerfile.rs checks it).
BINARIES=(csi-provisioner csi-resizer csi-snapshotter csi-group-snapshotter csi-attacher csi-external-health-monitor-controller
	livenessprobe csi-node-driver-registrar snapshot-controller csi-sidecars)
PACKAGES=(provisioner resizer snapshot-binaries attacher health-monitor node-driver-registrar livenessprobe csi-sidecars)
BIN_DIR="${CARGO_TARGET_DIR:-$ROOT/target}/$TARGET_TRIPLE/release"
OUT_DIR="$ROOT/target/image"
ARCHIVE="$OUT_DIR/csi-sidecars.oci.tar"
# The image user: root, as upstream's images (FROM gcr.io/distroless/static:latest) run, so that a swap in a
# deployment that sets no runAsUser can still connect to a root driver's socket (created 0755 by its umask). The
# charts run the sidecars as 65532 through their securityContext (README, "Swapping images").
IMAGE_USER="0:0"
AUDITABLE_VERSION=0.7.7
AUDITABLE_ROOT="${CSI_SIDECARS_CACHE:-${HOME:-/root}/.cache/csi-sidecars}/cargo/cargo-auditable-$AUDITABLE_VERSION"
# shellcheck source=image/oci.sh
source "$ROOT/image/oci.sh"

log() { printf '[image] %s\n' "$*" >&2; }

version() {
	sed -n 's/^version = "\(.*\)"$/\1/p' "$ROOT/Cargo.toml" | head -1
}

install_auditable() {
	[[ -x "$AUDITABLE_ROOT/bin/cargo-auditable" ]] && return
	log "installing cargo-auditable $AUDITABLE_VERSION from crates.io into $AUDITABLE_ROOT"
	cargo install --locked --quiet --version "$AUDITABLE_VERSION" --root "$AUDITABLE_ROOT" cargo-auditable
}

build_binaries() {
	local args=() p b
	for p in "${PACKAGES[@]}"; do args+=(-p "$p"); done
	for b in "${BINARIES[@]}"; do args+=(--bin "$b"); done
	install_auditable
	log "cargo auditable build --release --target $TARGET_TRIPLE (static: +crt-static) ${BINARIES[*]}"
	# --target keeps the static flag off build scripts and proc macros, which must stay dynamic. cargo-auditable
	# wraps rustc for the workspace's crates only, so the dependencies' artifacts are those of a plain build.
	(cd "$ROOT" && PATH="$AUDITABLE_ROOT/bin:$PATH" RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" \
		cargo auditable build --release --locked --target "$TARGET_TRIPLE" "${args[@]}")
}

# image BINARY VERSION: one image, the binary alone at /BINARY (in the archive being written)
image() {
	local bin="$1" version="$2" root="$WORK/rootfs-$1" digest size _
	mkdir -p "$root"
	install -m 0755 "$BIN_DIR/$bin" "$root/$bin"
	oci_layer "$root"
	oci_image "$bin" "$IMAGE_USER" "/$bin" "$bin" "$version" "image/build.sh: /$bin, static release build" "$OCI_LAYER"
	read -r digest size _ <<<"$OCI_LAYER"
	log "$bin: $(du -h "$BIN_DIR/$bin" | cut -f1) binary, layer $(numfmt --to=iec "$size"), manifest sha256:${OCI_MANIFEST_DIGEST:0:12}"
}

assemble() {
	local version b
	version="$(version)"
	for b in "${BINARIES[@]}"; do
		[[ -x "$BIN_DIR/$b" ]] || { log "error: $BIN_DIR/$b is missing (run image/build.sh without --layout)"; exit 1; }
	done
	mkdir -p "$OUT_DIR"
	WORK="$(mktemp -d "$OUT_DIR/.work.XXXXXX")"
	trap 'rm -rf "$WORK"' EXIT
	oci_begin "$WORK"
	for b in "${BINARIES[@]}"; do image "$b" "$version"; done
	oci_write "$ARCHIVE"
	log "wrote $ARCHIVE ($(du -h "$ARCHIVE" | cut -f1), ${#BINARIES[@]} images, version $version)"
}

case "${1:-}" in
"") build_binaries; assemble ;;
--layout) assemble ;;
*) sed -n '2,8p' "${BASH_SOURCE[0]}" >&2; exit 2 ;;
esac
