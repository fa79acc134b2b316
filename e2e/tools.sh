#!/usr/bin/env bash
# Builds the Go test tools of the e2e suite from the Go module proxy and caches
# the binaries outside the repository. Nothing built here ships.
#
#   e2e/tools.sh build [NAME...]   build (or reuse) the named binaries, default: all but the node's and bench's
#   e2e/tools.sh build node        build (or reuse) the node's binaries
#   e2e/tools.sh path NAME         print the absolute path of NAME (building it if missing)
#   e2e/tools.sh dir NAME          print the directory holding NAME (building it if missing)
#   e2e/tools.sh list              print the known names and their cache paths
#   e2e/tools.sh ldflags NAME      print the -ldflags used for NAME
#
# Names: etcd kube-apiserver kube-controller-manager kubectl csi-sanity helm
#        kubelet kube-scheduler kube-proxy pause (the node of `CLUSTER_NODE=1 e2e/cluster.sh up` and its suite;
#        pause is the pod sandbox, built with `gcc -static` from the kubernetes module's build/pause; `build node`
#        builds these four)
#        e2e.test agnhost ginkgo (Kubernetes' own e2e binary, its test image's program and the Ginkgo CLI that runs
#        e2e.test's specs in parallel, for `make conformance`; `build conformance` builds these three)
#        upstream-csi-provisioner upstream-csi-resizer upstream-csi-snapshotter upstream-snapshot-controller
#        upstream-csi-attacher
#        (upstream's Go sidecars, only for `make bench`: `build` without names leaves them out; name them)
#
# Cache: ${CSI_SIDECARS_CACHE:-$HOME/.cache/csi-sidecars}/bin/<module>-<hash>/NAME, where <hash> covers the
# wrapper module's go.mod, go.sum, the Go version and the build flags, so a fresh clone on the same machine
# reuses the binaries and a version bump rebuilds them. The Go module cache and GOCACHE are the normal ones.
set -euo pipefail

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
GO_DIR="$E2E_DIR/go"
CACHE_ROOT="${CSI_SIDECARS_CACHE:-${HOME:-/root}/.cache/csi-sidecars}"
ALL_NAMES=(etcd kube-apiserver kube-controller-manager kubectl csi-sanity helm)
# Upstream's sidecars, only for `make bench` (side by side with ours); not part of `build` without names.
# The node's binaries (`build node`), only for the node-backed cluster.
NODE_NAMES=(kubelet kube-scheduler kube-proxy pause)
# Kubernetes' storage e2e tests (`build conformance`), only for `make conformance`.
CONFORMANCE_NAMES=(e2e.test agnhost ginkgo)
BENCH_NAMES=(upstream-csi-provisioner upstream-csi-resizer upstream-csi-snapshotter upstream-snapshot-controller
	upstream-csi-attacher)

log() { printf '[tools] %s\n' "$*" >&2; }
die() { printf '[tools] error: %s\n' "$*" >&2; exit 1; }

usage() {
	awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}" >&2
	exit 2
}

# module_of NAME -> wrapper module directory (relative to e2e/go)
module_of() {
	case "$1" in
	etcd) echo etcd ;;
	kube-apiserver | kube-controller-manager | kubectl | kubelet | kube-scheduler | kube-proxy | pause)
		echo k8s
		;;
	e2e.test | agnhost | ginkgo) echo k8s-e2e ;;
	csi-sanity) echo tools/csi-sanity ;;
	helm) echo tools/helm ;;
	upstream-csi-provisioner) echo tools/external-provisioner ;;
	upstream-csi-resizer) echo tools/external-resizer ;;
	upstream-csi-attacher) echo tools/external-attacher ;;
	upstream-csi-snapshotter | upstream-snapshot-controller) echo tools/external-snapshotter ;;
	*) die "unknown tool '$1' (known: ${ALL_NAMES[*]} ${NODE_NAMES[*]} ${CONFORMANCE_NAMES[*]} ${BENCH_NAMES[*]})" ;;
	esac
}

# package_of NAME -> main package import path
package_of() {
	case "$1" in
	etcd) echo go.etcd.io/etcd/server/v3 ;;
	kube-apiserver | kube-controller-manager | kubectl | kubelet | kube-scheduler | kube-proxy)
		echo "k8s.io/kubernetes/cmd/$1"
		;;
	pause) echo k8s.io/kubernetes/build/pause/linux/pause.c ;;
	e2e.test) echo k8s.io/kubernetes/test/e2e ;;
	agnhost) echo k8s.io/kubernetes/test/images/agnhost ;;
	ginkgo) echo github.com/onsi/ginkgo/v2/ginkgo ;;
	csi-sanity) echo github.com/kubernetes-csi/csi-test/v5/cmd/csi-sanity ;;
	helm) echo helm.sh/helm/v3/cmd/helm ;;
	upstream-csi-provisioner) echo github.com/kubernetes-csi/external-provisioner/v6/cmd/csi-provisioner ;;
	upstream-csi-resizer) echo github.com/kubernetes-csi/external-resizer/v2/cmd/csi-resizer ;;
	upstream-csi-attacher) echo github.com/kubernetes-csi/external-attacher/v4/cmd/csi-attacher ;;
	upstream-csi-snapshotter) echo github.com/kubernetes-csi/external-snapshotter/v8/cmd/csi-snapshotter ;;
	upstream-snapshot-controller) echo github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller ;;
	esac
}

# mod_version MODULE_DIR MODULE_PATH -> the version the wrapper's go.mod selects (read from go.mod, no go call)
mod_version() {
	awk -v m="$2" '$1 == m && $2 ~ /^v/ { print $2; exit } $1 == "require" && $2 == m { print $3; exit }' \
		"$GO_DIR/$1/go.mod"
}

# ldflags_of NAME -> -X flags that make --version / /version report the real release
ldflags_of() {
	local name="$1" v
	case "$name" in
	kube-apiserver | kube-controller-manager | kubectl | kubelet | kube-scheduler | kube-proxy | e2e.test)
		v="$(mod_version "$(module_of "$name")" k8s.io/kubernetes)"
		local major minor date pkg flags=""
		major="${v#v}"; major="${major%%.*}"
		minor="${v#v*.}"; minor="${minor%%.*}"
		# The release time recorded by the module proxy keeps the build reproducible.
		date="$(k8s_release_time "$v")"
		for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
			flags+=" -X $pkg.gitVersion=$v -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
			flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$date -X $pkg.gitCommit="
		done
		echo "$flags"
		;;
	csi-sanity)
		echo "-X main.VERSION=$(mod_version tools/csi-sanity github.com/kubernetes-csi/csi-test/v5)"
		;;
	helm)
		# Same variables helm's Makefile sets; the k8s version comes from the client-go helm selects.
		local cg major minor
		v="$(mod_version tools/helm helm.sh/helm/v3)"
		cg="$(mod_version tools/helm k8s.io/client-go)" # v0.MINOR.PATCH
		major=1; minor="${cg#v0.}"; minor="${minor%%.*}"
		echo "-X helm.sh/helm/v3/internal/version.version=$v -X helm.sh/helm/v3/internal/version.gitTreeState=clean" \
			"-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=$major -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$minor" \
			"-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=$major -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$minor"
		;;
	etcd | pause | agnhost | ginkgo) echo "" ;; # etcd's version is a constant in its api module; pause is C
	upstream-csi-provisioner) echo "-X main.version=$(mod_version tools/external-provisioner github.com/kubernetes-csi/external-provisioner/v6)" ;;
	upstream-csi-resizer) echo "-X main.version=$(mod_version tools/external-resizer github.com/kubernetes-csi/external-resizer/v2)" ;;
	upstream-csi-attacher) echo "-X main.version=$(mod_version tools/external-attacher github.com/kubernetes-csi/external-attacher/v4)" ;;
	upstream-csi-snapshotter | upstream-snapshot-controller)
		echo "-X main.version=$(mod_version tools/external-snapshotter github.com/kubernetes-csi/external-snapshotter/v8)"
		;;
	esac
}

k8s_release_time() {
	local info t=""
	info="$(cd "$GO_DIR/k8s" && go mod download -json "k8s.io/kubernetes@$1" 2>/dev/null |
		sed -n 's/^[[:space:]]*"Info": "\(.*\)",$/\1/p')"
	[[ -n "$info" && -f "$info" ]] && t="$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$info")"
	echo "${t:-1970-01-01T00:00:00Z}"
}

GO_VERSION=""
go_version() {
	[[ -n "$GO_VERSION" ]] || GO_VERSION="$(go env GOVERSION)"
	echo "$GO_VERSION"
}

# The flags every build uses; part of the cache key.
BUILD_FLAGS=(-trimpath -buildvcs=false -mod=readonly)
RECIPE=1 # bump to force a rebuild of everything after changing how binaries are built

# key_of NAME -> cache key of NAME's wrapper module
key_of() {
	local mod
	mod="$(module_of "$1")"
	{
		echo "recipe=$RECIPE go=$(go_version) cgo=0 flags=${BUILD_FLAGS[*]} ldflags=-s -w"
		cat "$GO_DIR/$mod/go.mod" "$GO_DIR/$mod/go.sum"
	} | sha256sum | cut -c1-16 | sed "s|^|${mod//\//-}-|"
}

bin_dir_of() {
	echo "$CACHE_ROOT/bin/$(key_of "$1")"
}

build_one() {
	local name="$1" mod pkg dir out ldflags start end
	mod="$(module_of "$name")"
	pkg="$(package_of "$name")"
	dir="$(bin_dir_of "$name")"
	out="$dir/$name"
	mkdir -p "$dir"
	# One builder per binary at a time (parallel test runs may ask together).
	exec 9>"$dir/.$name.lock"
	flock 9
	if [[ -x "$out" ]]; then
		log "$name: cached at $out"
		exec 9>&-
		return 0
	fi
	ldflags="-s -w $(ldflags_of "$name")"
	# e2e.test is a package's test binary.
	local verb=(build)
	[[ "$name" != e2e.test ]] || verb=(test -c)
	log "$name: building $pkg (module e2e/go/$mod) ..."
	start=$(date +%s)
	if [[ "$name" == pause ]]; then
		build_pause "$out.tmp.$$" || { rm -f "$out.tmp.$$"; exec 9>&-; die "pause: gcc -static failed"; }
	elif ! (cd "$GO_DIR/$mod" && CGO_ENABLED=0 go "${verb[@]}" "${BUILD_FLAGS[@]}" -ldflags "$ldflags" \
		-o "$out.tmp.$$" "$pkg"); then
		rm -f "$out.tmp.$$"
		exec 9>&-
		die "$name: go build failed"
	fi
	mv -f "$out.tmp.$$" "$out"
	end=$(date +%s)
	log "$name: built in $((end - start)) s -> $out ($(du -h "$out" | cut -f1))"
	exec 9>&-
}

# build_pause OUT: the pod sandbox's one process, from the pause.c of the kubernetes release the wrapper module
# pins, with the flags of its build/pause/Makefile (static, so the image needs nothing else).
build_pause() {
	local v dir tag
	command -v gcc >/dev/null 2>&1 || die "pause: gcc is needed (apt-get install gcc libc6-dev)"
	v="$(mod_version k8s k8s.io/kubernetes)"
	dir="$(cd "$GO_DIR/k8s" && go mod download -json "k8s.io/kubernetes@$v" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
	[[ -f "$dir/build/pause/linux/pause.c" ]] || die "pause: no build/pause/linux/pause.c in k8s.io/kubernetes@$v"
	tag="$(sed -n 's/^TAG ?= //p' "$dir/build/pause/Makefile")"
	gcc -Os -Wall -Werror -static -DVERSION="v$tag-csi-sidecars" -o "$1" "$dir/build/pause/linux/pause.c" && strip "$1"
}

require_go() {
	command -v go >/dev/null 2>&1 || die "go not found in PATH (Go 1.26+ is needed to build the e2e tools)"
}

cmd="${1:-}"
[[ $# -gt 0 ]] && shift
case "$cmd" in
build)
	require_go
	[[ $# -gt 0 ]] || set -- "${ALL_NAMES[@]}"
	[[ "$*" != node ]] || set -- "${NODE_NAMES[@]}"
	[[ "$*" != conformance ]] || set -- "${CONFORMANCE_NAMES[@]}"
	for n in "$@"; do module_of "$n" >/dev/null; done
	total_start=$(date +%s)
	for n in "$@"; do build_one "$n"; done
	log "done in $(($(date +%s) - total_start)) s (cache: $CACHE_ROOT/bin)"
	;;
path | dir)
	[[ $# -eq 1 ]] || usage
	require_go
	module_of "$1" >/dev/null
	d="$(bin_dir_of "$1")"
	[[ -x "$d/$1" ]] || build_one "$1"
	if [[ "$cmd" == path ]]; then echo "$d/$1"; else echo "$d"; fi
	;;
ldflags)
	[[ $# -eq 1 ]] || usage
	module_of "$1" >/dev/null
	echo "-s -w $(ldflags_of "$1")"
	;;
list)
	require_go
	for n in "${ALL_NAMES[@]}" "${NODE_NAMES[@]}" "${CONFORMANCE_NAMES[@]}" "${BENCH_NAMES[@]}"; do
		d="$(bin_dir_of "$n")"
		if [[ -x "$d/$n" ]]; then s=built; else s=missing; fi
		printf '%-24s %-8s %s\n' "$n" "$s" "$d/$n"
	done
	;;
*) usage ;;
esac
