#!/usr/bin/env bash
# The images the node suite runs, built from what `make test` already compiled and imported into the running
# node's containerd (`CLUSTER_NODE=1 e2e/cluster.sh up`); no registry, no container daemon.
#
#   e2e/node-images.sh            build (or reuse) every image and import it
#   e2e/node-images.sh list       print each image's name and what it holds
#   e2e/node-images.sh e2e        also the images Kubernetes' e2e tests ask for (make conformance): busybox and
#                                 agnhost under their registry.k8s.io/e2e-test-images names, and ours under the names
#                                 the CSI mock manifests ask for, the registry swapped: ours.local/sig-storage/<name>:<tag>
#   e2e/node-images.sh upstream   also upstream's sidecars (make conformance's baseline), as upstream.local/<binary>:upstream
#   e2e/node-images.sh csimock    e2e and upstream, and upstream's under the CSI mock manifests' names too:
#                                 upstream.local/sig-storage/<name>:<tag> (make csimock)
#
# Our images: the dev-profile binaries of target/debug (csi-provisioner, csi-resizer, csi-snapshotter,
# snapshot-controller, csi-group-snapshotter, csi-sidecars, csi-attacher, csi-external-health-monitor-controller,
# csi-node-driver-registrar, livenessprobe, hostpath-plugin), each as the release image has it (the binary at /<name> as entrypoint, root
# as the user), debug sections stripped, with a first layer holding the C libraries the binary links (the same
# layer, so stored once). Built this way because `make image`'s static release build costs about 14 minutes cold,
# and a static debug build would compile every dependency a second time for its own target directory; these cost
# only the packing (about 10 s). Named as the charts name them by default: <binary>:<workspace version>.
# Also e2e.local/busybox:1 (Debian's busybox-static, for the test pods' shell). The pod sandbox image is
# cluster.sh's own.
#
# Archives are kept in target/node-images/ and rebuilt when their binary is newer.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN_DIR="${CARGO_TARGET_DIR:-$ROOT/target}/debug"
OUT_DIR="${CARGO_TARGET_DIR:-$ROOT/target}/node-images"
# Ours, in the order they are imported.
OURS=(csi-provisioner csi-resizer csi-snapshotter snapshot-controller csi-group-snapshotter csi-sidecars
	csi-attacher csi-external-health-monitor-controller csi-node-driver-registrar livenessprobe hostpath-plugin)
BUSYBOX_IMAGE=e2e.local/busybox:1
# Upstream's sidecars (`upstream`), built by e2e/tools.sh.
UPSTREAM=(csi-provisioner csi-resizer csi-snapshotter snapshot-controller csi-attacher)
UPSTREAM_REGISTRY=upstream.local
# shellcheck source=image/oci.sh
source "$ROOT/image/oci.sh"

log() { printf '[node-images] %s\n' "$*" >&2; }
die() { printf '[node-images] error: %s\n' "$*" >&2; exit 1; }

version() { sed -n 's/^version = "\(.*\)"$/\1/p' "$ROOT/Cargo.toml" | head -1; }

# libraries BINARY: the shared objects the binary loads (ldd), the dynamic loader included
libraries() {
	ldd "$1" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | sort -u
}

# libs_layer: one layer with the libraries of every binary, at their paths (sets LIBS_LAYER)
libs_layer() {
	local rootfs="$WORK/libs" lib
	mkdir -p "$rootfs"
	for lib in $(for b in "$@"; do libraries "$BIN_DIR/$b"; done | sort -u); do
		mkdir -p "$rootfs$(dirname "$lib")"
		cp -L "$lib" "$rootfs$lib"
	done
	oci_layer "$rootfs" 1
	LIBS_LAYER="$OCI_LAYER"
}

# build_ours NAME...: one archive per binary (rebuilt only when the binary is newer than it)
build_ours() {
	local version b stale=() archive
	version="$(version)"
	for b in "$@"; do
		archive="$OUT_DIR/$b.oci.tar"
		[[ -f "$archive" && "$archive" -nt "$BIN_DIR/$b" ]] || stale+=("$b")
	done
	((${#stale[@]} > 0)) || return 0
	for b in "${stale[@]}"; do
		WORK="$(mktemp -d "$OUT_DIR/.work.XXXXXX")"
		oci_begin "$WORK"
		libs_layer "$b"
		mkdir -p "$WORK/rootfs"
		objcopy --strip-debug "$BIN_DIR/$b" "$WORK/rootfs/$b"
		chmod 0755 "$WORK/rootfs/$b"
		oci_layer "$WORK/rootfs" 1
		oci_image "$version" "0:0" "/$b" "$b" "$version" "e2e/node-images.sh: /$b, dev profile, debug info stripped" \
			"$LIBS_LAYER" "$OCI_LAYER"
		oci_write "$OUT_DIR/$b.oci.tar"
		rm -rf "$WORK"
		log "$b: $(du -h "$OUT_DIR/$b.oci.tar" | cut -f1) archive"
	done
}

# busybox_rootfs DIR: Debian's busybox-static at /bin/busybox with a link per applet, and a /tmp
busybox_rootfs() {
	local bb applet
	bb="$(command -v busybox || true)"
	[[ -n "$bb" ]] || die "busybox not found (apt-get install busybox-static)"
	{ ldd "$bb" 2>&1 || true; } | grep -q 'not a dynamic executable' || die "$bb is not statically linked (apt-get install busybox-static)"
	mkdir -p "$1/bin" "$1/tmp"
	chmod 1777 "$1/tmp"
	install -m 0755 "$bb" "$1/bin/busybox"
	for applet in $("$bb" --list); do
		[[ "$applet" == busybox ]] || ln -s busybox "$1/bin/$applet"
	done
}

# build_busybox ARCHIVE TAG [gnu-dd]: the test pods' shell image, its ref named TAG; with gnu-dd, the host's GNU
# coreutils dd and dash as /bin/sh (with the C libraries they link) in place of busybox's
build_busybox() {
	local archive="$1" lib dd
	[[ -f "$archive" && "$archive" -nt "$(command -v busybox)" && "$archive" -nt "${BASH_SOURCE[0]}" ]] && return 0
	WORK="$(mktemp -d "$OUT_DIR/.work.XXXXXX")"
	oci_begin "$WORK"
	busybox_rootfs "$WORK/rootfs"
	if [[ "${3:-}" == gnu-dd ]]; then
		dd="$(command -v dd)"
		dd --version | grep -q coreutils || die "$dd is not GNU coreutils' dd"
		command -v dash >/dev/null || die "dash not found (apt-get install dash)"
		rm -f "$WORK/rootfs/bin/dd" "$WORK/rootfs/bin/sh"
		install -m 0755 "$dd" "$WORK/rootfs/bin/dd"
		install -m 0755 "$(command -v dash)" "$WORK/rootfs/bin/sh"
		for lib in $(libraries "$dd"; libraries "$(command -v dash)"); do
			mkdir -p "$WORK/rootfs$(dirname "$lib")"
			cp -L "$lib" "$WORK/rootfs$lib"
		done
	fi
	oci_layer "$WORK/rootfs" 1
	oci_image "$2" "0:0" /bin/sh busybox "$(busybox | head -1 | awk '{print $2}')" \
		"e2e/node-images.sh: Debian's busybox-static" "$OCI_LAYER"
	oci_write "$archive"
	rm -rf "$WORK"
}

# build_agnhost ARCHIVE TAG: Kubernetes' agnhost (e2e/tools.sh builds it from the kubernetes module) at /agnhost, its
# entrypoint, beside busybox's applets (the image upstream builds has a shell too)
build_agnhost() {
	local archive="$1" binary
	binary="$(bash "$ROOT/e2e/tools.sh" path agnhost)"
	[[ -f "$archive" && "$archive" -nt "$binary" ]] && return 0
	WORK="$(mktemp -d "$OUT_DIR/.work.XXXXXX")"
	oci_begin "$WORK"
	busybox_rootfs "$WORK/rootfs"
	install -m 0755 "$binary" "$WORK/rootfs/agnhost"
	oci_layer "$WORK/rootfs" 1
	oci_image "$2" "0:0" /agnhost agnhost "$2" "e2e/node-images.sh: agnhost from k8s.io/kubernetes/test/images" \
		"$OCI_LAYER"
	oci_write "$archive"
	rm -rf "$WORK"
}

# e2e_image NAME ID -> the reference Kubernetes' e2e tests use for their image ID (BusyBox, Agnhost), read from
# test/utils/image/manifest.go of the kubernetes release e2e/go/k8s-e2e pins
e2e_image() {
	local v dir tag
	v="$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit } $1 == "require" && $2 == "k8s.io/kubernetes" { print $3; exit }' \
		"$ROOT/e2e/go/k8s-e2e/go.mod")"
	dir="$(cd "$ROOT/e2e/go/k8s-e2e" && go mod download -json "k8s.io/kubernetes@$v" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
	tag="$(sed -n "s/.*configs\[$2\] = Config{list.PromoterE2eRegistry, \"$1\", \"\([^\"]*\)\"}.*/\1/p" \
		"$dir/test/utils/image/manifest.go")"
	[[ -n "$tag" ]] || die "no e2e image $1 in k8s.io/kubernetes@$v test/utils/image/manifest.go"
	echo "registry.k8s.io/e2e-test-images/$1:$tag"
}

# normalized NAME: the name as the kubelet asks containerd for it (csi-provisioner:0.1.0 is
# docker.io/library/csi-provisioner:0.1.0)
normalized() {
	local name="$1" first="${1%%/*}"
	if [[ "$name" != */* ]]; then
		echo "docker.io/library/$name"
	elif [[ "$first" != *.* && "$first" != *:* && "$first" != localhost ]]; then
		echo "docker.io/$name"
	else
		echo "$name"
	fi
}

# import ARCHIVE NAME: into the node's containerd, as NAME (repository:tag; the archive's ref is the tag)
import() {
	local name
	name="$(normalized "$2")"
	bash "$ROOT/e2e/cluster.sh" ctr images import --base-name "${name%:*}" "$1" >/dev/null ||
		die "importing $2 failed (is the node up? CLUSTER_NODE=1 bash e2e/cluster.sh up)"
}

present() {
	local b present=()
	for b in "${OURS[@]}"; do
		[[ -x "$BIN_DIR/$b" ]] || die "$BIN_DIR/$b is missing (cargo build --workspace --bins)"
		present+=("$b")
	done
	echo "${present[@]}"
}

cmd_build() {
	local t0 names b version
	t0=$(date +%s)
	mkdir -p "$OUT_DIR"
	trap 'rm -rf "$OUT_DIR"/.work.*' EXIT
	read -ra names <<<"$(present)"
	build_ours "${names[@]}"
	build_busybox "$OUT_DIR/busybox.oci.tar" "${BUSYBOX_IMAGE##*:}"
	version="$(version)"
	for b in "${names[@]}"; do import "$OUT_DIR/$b.oci.tar" "$b:$version"; done
	import "$OUT_DIR/busybox.oci.tar" "$BUSYBOX_IMAGE"
	log "${#names[@]} images of ours, and $BUSYBOX_IMAGE imported in $(($(date +%s) - t0)) s"
}

cmd_list() {
	local b version
	version="$(version)"
	for b in $(present); do printf '%-40s %s\n' "$b:$version" "target/debug/$b (dev profile)"; done
	printf '%-40s %s\n' "$BUSYBOX_IMAGE" "Debian's busybox-static"
}

# The e2e tests' images that busybox's rootfs stands in for (name, image ID in manifest.go, extra): busybox itself,
# and two the storage tests only run shell commands in: glibc-dns-testing (upstream's is Debian with a shell; the
# tests' dd asks for GNU options, oflag=nocache, so GNU coreutils' dd replaces busybox's, and Debian's dash is
# /bin/sh, since busybox's shell runs its own applets before anything on PATH) and nginx (the exec test runs a script
# from the volume with /bin/sh).
E2E_SHELL_IMAGES=("busybox BusyBox -" "glibc-dns-testing GlibcDnsTesting gnu-dd" "nginx Nginx -")

# cmd_e2e: the e2e tests' images (E2E_SHELL_IMAGES and agnhost), named as the tests ask for them
cmd_e2e() {
	local pair name id extra ref agnhost imported=()
	mkdir -p "$OUT_DIR"
	trap 'rm -rf "$OUT_DIR"/.work.*' EXIT
	for pair in "${E2E_SHELL_IMAGES[@]}"; do
		read -r name id extra <<<"$pair"
		ref="$(e2e_image "$name" "$id")"
		build_busybox "$OUT_DIR/e2e-$name.oci.tar" "${ref##*:}" "$extra"
		import "$OUT_DIR/e2e-$name.oci.tar" "$ref"
		imported+=("$ref")
	done
	agnhost="$(e2e_image agnhost Agnhost)"
	build_agnhost "$OUT_DIR/e2e-agnhost.oci.tar" "${agnhost##*:}"
	import "$OUT_DIR/e2e-agnhost.oci.tar" "$agnhost"
	log "${imported[*]} $agnhost imported"
}

# cmd_upstream: upstream's Go sidecars (e2e/tools.sh upstream-*, static) as upstream.local/<binary>:upstream, each
# the binary at /<binary> as upstream's images have it, run as root. The module proxy does not serve
# node-driver-registrar and livenessprobe, so ours stand in under the same registry (a chart with
# image.registry=upstream.local then runs upstream's controller sidecars beside our node pod's two).
cmd_upstream() {
	local b binary archive
	mkdir -p "$OUT_DIR"
	trap 'rm -rf "$OUT_DIR"/.work.*' EXIT
	for b in "${UPSTREAM[@]}"; do
		binary="$(bash "$ROOT/e2e/tools.sh" path "upstream-$b")"
		archive="$OUT_DIR/upstream-$b.oci.tar"
		if ! [[ -f "$archive" && "$archive" -nt "$binary" ]]; then
			WORK="$(mktemp -d "$OUT_DIR/.work.XXXXXX")"
			oci_begin "$WORK"
			mkdir -p "$WORK/rootfs"
			install -m 0755 "$binary" "$WORK/rootfs/$b"
			oci_layer "$WORK/rootfs" 1
			oci_image upstream "0:0" "/$b" "$b" "$("$binary" --version 2>&1 | awk '{print $NF; exit}')" \
				"e2e/node-images.sh: upstream's $b from the Go module proxy" "$OCI_LAYER"
			oci_write "$archive"
			rm -rf "$WORK"
		fi
		import "$archive" "$UPSTREAM_REGISTRY/$b:upstream"
	done
	for b in csi-node-driver-registrar livenessprobe; do
		bash "$ROOT/e2e/cluster.sh" ctr images tag --force "$(normalized "$b:$(version)")" \
			"$UPSTREAM_REGISTRY/$b:upstream" >/dev/null
	done
	log "upstream's ${UPSTREAM[*]} imported as $UPSTREAM_REGISTRY/<binary>:upstream (registrar and livenessprobe: ours)"
}

# mock_images [REPOSITORY] -> `NAME:TAG` of every registry.k8s.io/REPOSITORY image (default sig-storage) in the CSI
# mock manifests compiled into the e2e.test that e2e/go/k8s-e2e pins (test/e2e/testing-manifests/storage-csi/mock/)
mock_images() {
	local v dir
	v="$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit } $1 == "require" && $2 == "k8s.io/kubernetes" { print $3; exit }' \
		"$ROOT/e2e/go/k8s-e2e/go.mod")"
	dir="$(cd "$ROOT/e2e/go/k8s-e2e" && go mod download -json "k8s.io/kubernetes@$v" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
	sed -n "s|^[[:space:]]*image: registry.k8s.io/${1:-sig-storage}/\\([^[:space:]]*\\)\$|\\1|p" \
		"$dir"/test/e2e/testing-manifests/storage-csi/mock/*.yaml | sort -u
}

# cmd_mock SIDE: each sig-storage image of the CSI mock manifests under SIDE's registry, which e2e.test's
# KUBE_TEST_REPO_LIST (sigStorageRegistry) picks: ours.local/sig-storage/NAME:TAG is our binary of that name
# (hostpathplugin is hostpath-plugin, which runs there as the proxy of e2e.test's mock driver),
# upstream.local/sig-storage/NAME:TAG upstream's sidecar where the module proxy serves it, else ours (as `upstream`
# does; run that first). With ours, also the mock pod's busybox under the tag csi-mock-proxy.yaml pins.
cmd_mock() {
	local side="$1" image name tag ours source
	for image in $(mock_images); do
		name="${image%%:*}" tag="${image#*:}"
		ours="$name"
		[[ "$name" != hostpathplugin ]] || ours=hostpath-plugin
		[[ -x "$BIN_DIR/$ours" ]] || die "no binary of ours for the mock manifests' $name ($BIN_DIR/$ours)"
		source="$(normalized "$ours:$(version)")"
		if [[ "$side" == upstream && " ${UPSTREAM[*]} " == *" $ours "* ]]; then
			source="$UPSTREAM_REGISTRY/$ours:upstream"
		fi
		bash "$ROOT/e2e/cluster.sh" ctr images tag --force "$source" "$side.local/sig-storage/$name:$tag" >/dev/null
	done
	log "the CSI mock manifests' $(mock_images | paste -sd ' ') imported as $side.local/sig-storage/<name>:<tag>"
	[[ "$side" == ours ]] || return 0
	for image in $(mock_images e2e-test-images); do
		[[ "$image" == busybox:* ]] || die "the mock manifests ask for registry.k8s.io/e2e-test-images/$image"
		bash "$ROOT/e2e/cluster.sh" ctr images tag --force "$(e2e_image busybox BusyBox)" \
			"registry.k8s.io/e2e-test-images/$image" >/dev/null
		log "registry.k8s.io/e2e-test-images/$image: Debian's busybox-static"
	done
}

case "${1:-}" in
"") cmd_build ;;
list) cmd_list ;;
e2e) cmd_build && cmd_e2e && cmd_mock ours ;;
upstream) cmd_build && cmd_upstream ;;
csimock) cmd_build && cmd_e2e && cmd_mock ours && cmd_upstream && cmd_mock upstream ;;
*) sed -n '2,13p' "${BASH_SOURCE[0]}" >&2; exit 2 ;;
esac
