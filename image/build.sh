#!/usr/bin/env bash
# Builds the sidecar images without a container daemon: statically linked release binaries, one from-scratch
# image per binary (the binary alone, run as a non-root user, no shell), written as one OCI archive.
#
#   image/build.sh            build the binaries, then the archive (make image)
#   image/build.sh --layout   only assemble the archive from binaries already built
#
# Output: target/image/csi-sidecars.oci.tar, an OCI image layout in a tar (what `skopeo copy oci-archive:...`,
# `crane push`, `podman load` and `ctr import` read). Its index names each image by its binary
# (org.opencontainers.image.ref.name), e.g. push one with
#   skopeo copy oci-archive:target/image/csi-sidecars.oci.tar:csi-provisioner docker://REGISTRY/csi-provisioner:TAG
#
# An OCI layout is plain files: each blob (layer tar.gz, config JSON, manifest JSON) stored under its sha256, an
# index.json naming the manifests, and an oci-layout marker; tar, gzip and sha256sum are all it takes. Timestamps
# are fixed and tar entries sorted, so the same binaries give the same digests.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TARGET_TRIPLE=x86_64-unknown-linux-gnu
# The binaries of the image, each with its package.
BINARIES=(csi-provisioner csi-resizer csi-snapshotter snapshot-controller csi-group-snapshotter csi-sidecars)
PACKAGES=(provisioner resizer snapshot-binaries csi-sidecars)
BIN_DIR="${CARGO_TARGET_DIR:-$ROOT/target}/$TARGET_TRIPLE/release"
OUT_DIR="$ROOT/target/image"
ARCHIVE="$OUT_DIR/csi-sidecars.oci.tar"
# The image user: not root, no home, no shell (distroless' "nonroot" numbers).
IMAGE_USER="65532:65532"
EPOCH="1970-01-01T00:00:00Z"

log() { printf '[image] %s\n' "$*" >&2; }

version() {
	sed -n 's/^version = "\(.*\)"$/\1/p' "$ROOT/Cargo.toml" | head -1
}

build_binaries() {
	local args=() p b
	for p in "${PACKAGES[@]}"; do args+=(-p "$p"); done
	for b in "${BINARIES[@]}"; do args+=(--bin "$b"); done
	log "cargo build --release --target $TARGET_TRIPLE (static: +crt-static) ${BINARIES[*]}"
	# --target keeps the static flag off build scripts and proc macros, which must stay dynamic.
	(cd "$ROOT" && RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" \
		cargo build --release --locked --target "$TARGET_TRIPLE" "${args[@]}")
}

sha() { sha256sum "$1" | cut -d' ' -f1; }
size() { stat -c %s "$1"; }

# store FILE -> moves FILE into blobs/sha256/<digest>, prints the digest
store() {
	local digest
	digest="$(sha "$1")"
	mv -f "$1" "$LAYOUT/blobs/sha256/$digest"
	echo "$digest"
}

# image BINARY VERSION -> one image: layer, config, manifest; prints the manifest's index entry
image() {
	local bin="$1" version="$2"
	local root="$WORK/rootfs-$bin" diff_id layer_digest layer_size config config_digest manifest manifest_digest
	mkdir -p "$root"
	install -m 0755 "$BIN_DIR/$bin" "$root/$bin"
	tar --create --file "$WORK/layer.tar" --directory "$root" --sort=name --format=ustar \
		--owner=0 --group=0 --numeric-owner --mtime="@0" "$bin"
	diff_id="$(sha "$WORK/layer.tar")"
	gzip -n -9 <"$WORK/layer.tar" >"$WORK/layer.tar.gz"
	layer_size="$(size "$WORK/layer.tar.gz")"
	layer_digest="$(store "$WORK/layer.tar.gz")"

	config="$WORK/config.json"
	printf '%s' "{\"created\":\"$EPOCH\",\"architecture\":\"amd64\",\"os\":\"linux\",\
\"config\":{\"User\":\"$IMAGE_USER\",\"Entrypoint\":[\"/$bin\"],\"WorkingDir\":\"/\",\
\"Labels\":{\"org.opencontainers.image.title\":\"$bin\",\"org.opencontainers.image.version\":\"$version\",\
\"org.opencontainers.image.licenses\":\"Apache-2.0\"}},\
\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"sha256:$diff_id\"]},\
\"history\":[{\"created\":\"$EPOCH\",\"created_by\":\"image/build.sh: /$bin, static release build\"}]}" >"$config"
	local config_size
	config_size="$(size "$config")"
	config_digest="$(store "$config")"

	manifest="$WORK/manifest.json"
	printf '%s' "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\
\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"digest\":\"sha256:$config_digest\",\
\"size\":$config_size},\
\"layers\":[{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\",\"digest\":\"sha256:$layer_digest\",\
\"size\":$layer_size}],\
\"annotations\":{\"org.opencontainers.image.title\":\"$bin\",\"org.opencontainers.image.version\":\"$version\"}}" \
		>"$manifest"
	local manifest_size
	manifest_size="$(size "$manifest")"
	manifest_digest="$(store "$manifest")"
	printf '%s' "{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"sha256:$manifest_digest\",\
\"size\":$manifest_size,\"platform\":{\"architecture\":\"amd64\",\"os\":\"linux\"},\
\"annotations\":{\"org.opencontainers.image.ref.name\":\"$bin\"}}"
	log "$bin: $(du -h "$BIN_DIR/$bin" | cut -f1) binary, layer $(numfmt --to=iec "$layer_size"), manifest sha256:${manifest_digest:0:12}"
}

assemble() {
	local version b entries=() joined
	version="$(version)"
	for b in "${BINARIES[@]}"; do
		[[ -x "$BIN_DIR/$b" ]] || { log "error: $BIN_DIR/$b is missing (run image/build.sh without --layout)"; exit 1; }
	done
	mkdir -p "$OUT_DIR"
	WORK="$(mktemp -d "$OUT_DIR/.work.XXXXXX")"
	trap 'rm -rf "$WORK"' EXIT
	LAYOUT="$WORK/layout"
	mkdir -p "$LAYOUT/blobs/sha256"
	for b in "${BINARIES[@]}"; do entries+=("$(image "$b" "$version")"); done
	joined="$(IFS=,; echo "${entries[*]}")"
	printf '%s' "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\",\"manifests\":[$joined]}" \
		>"$LAYOUT/index.json"
	printf '%s' '{"imageLayoutVersion":"1.0.0"}' >"$LAYOUT/oci-layout"
	tar --create --file "$ARCHIVE.tmp" --directory "$LAYOUT" --sort=name --format=ustar \
		--owner=0 --group=0 --numeric-owner --mtime="@0" oci-layout index.json blobs
	mv -f "$ARCHIVE.tmp" "$ARCHIVE"
	log "wrote $ARCHIVE ($(du -h "$ARCHIVE" | cut -f1), ${#BINARIES[@]} images, version $version)"
}

case "${1:-}" in
"") build_binaries; assemble ;;
--layout) assemble ;;
*) sed -n '2,8p' "${BASH_SOURCE[0]}" >&2; exit 2 ;;
esac
