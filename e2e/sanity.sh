#!/usr/bin/env bash
# Runs the upstream CSI conformance suite (csi-sanity) against hostpath-plugin, or against a driver author's own
# plugin. Builds nothing itself.
#
#   HOSTPATH_PLUGIN=path/to/hostpath-plugin CSI_SANITY=path/to/csi-sanity bash e2e/sanity.sh [csi-sanity flags...]
#   E2E_PLUGIN_COMMAND='/path/to/plugin --endpoint={endpoint} --nodeid={node_id}' bash e2e/sanity.sh
#
# HOSTPATH_PLUGIN  the plugin binary (default: target/release/hostpath-plugin)
# HOSTPATH_PLUGIN_FLAGS  more flags for it, e.g. '--node-mounts --attach-required' (real mounts need root)
# E2E_PLUGIN_COMMAND  another plugin's command line instead, with the e2e harness's placeholders ({endpoint},
#                  {socket}, {driver}, {node_id}, {state_dir}; docs/testing.md#testing-your-own-driver); {driver} is
#                  E2E_PLUGIN_DRIVER or sanity.csi.e2e
# SANITY_MUTABLE_PARAMETERS  the YAML of mutable parameters csi-sanity's ModifyVolume tests use (default: the
#                  hostpath-plugin's, e2e/sanity/mutable-parameters.yaml)
# CSI_SANITY       the csi-sanity binary (default: `bash e2e/tools.sh path csi-sanity`)
# KEEP_SANITY_TMP  set to 1 to keep the socket, state and mount directories for inspection
#
# Extra arguments go to csi-sanity, e.g. --ginkgo.focus='Node Service' or --ginkgo.v.
# The plugin runs on a socket in a temporary directory with a fresh state directory. All suites run,
# Node included: by default its node service keeps books instead of mounting, so it needs no
# privileges (with HOSTPATH_PLUGIN_FLAGS=--node-mounts it mounts, as root). The exit status is csi-sanity's.
set -euo pipefail

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$E2E_DIR")"

log() { printf '[sanity] %s\n' "$*" >&2; }
die() { printf '[sanity] error: %s\n' "$*" >&2; exit 1; }

plugin="${HOSTPATH_PLUGIN:-$ROOT/target/release/hostpath-plugin}"
read -r -a plugin_words <<<"${E2E_PLUGIN_COMMAND:-}"
read -r -a hostpath_flags <<<"${HOSTPATH_PLUGIN_FLAGS:-}"
if [[ ${#plugin_words[@]} -eq 0 ]]; then
	[[ -x "$plugin" ]] || die "hostpath-plugin not found at $plugin (build it with 'cargo build --release -p hostpath-plugin' or set HOSTPATH_PLUGIN)"
fi

if [[ -n "${CSI_SANITY:-}" ]]; then
	sanity="$CSI_SANITY"
elif [[ -f "$E2E_DIR/tools.sh" ]]; then
	sanity="$(bash "$E2E_DIR/tools.sh" path csi-sanity)" || die "e2e/tools.sh could not provide csi-sanity"
else
	die "csi-sanity not found: set CSI_SANITY, or provide e2e/tools.sh"
fi
[[ -x "$sanity" ]] || die "csi-sanity is not executable: $sanity"

work="$(mktemp -d "${TMPDIR:-/tmp}/hostpath-sanity.XXXXXX")"
socket="$work/csi.sock"
plugin_log="$work/plugin.log"
mkdir -p "$work/mount" "$work/staging"
plugin_pid=""

cleanup() {
	local status=$?
	if [[ -n "$plugin_pid" ]] && kill -0 "$plugin_pid" 2>/dev/null; then
		kill -TERM "$plugin_pid" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$plugin_pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$plugin_pid" 2>/dev/null || true
	fi
	if [[ $status -ne 0 && -f "$plugin_log" ]]; then
		log "plugin log (last 100 lines of $plugin_log):"
		tail -n 100 "$plugin_log" >&2 || true
	fi
	if [[ "${KEEP_SANITY_TMP:-}" == 1 ]]; then
		log "kept $work"
	else
		rm -rf "$work"
	fi
	exit $status
}
trap cleanup EXIT

if [[ ${#plugin_words[@]} -gt 0 ]]; then
	# Word by word, no shell: the same rules as the e2e harness's.
	mkdir -p "$work/state"
	command=()
	for word in "${plugin_words[@]}"; do
		word="${word//\{endpoint\}/unix://$socket}"
		word="${word//\{socket\}/$socket}"
		word="${word//\{driver\}/${E2E_PLUGIN_DRIVER:-sanity.csi.e2e}}"
		word="${word//\{node_id\}/sanity-node}"
		word="${word//\{state_dir\}/$work/state}"
		command+=("$word")
	done
	log "plugin: ${command[*]}"
	log "csi-sanity: $sanity"
	"${command[@]}" >"$plugin_log" 2>&1 &
else
	log "plugin: $plugin"
	log "csi-sanity: $sanity"
	"$plugin" \
		--endpoint="unix://$socket" \
		--state-dir="$work/state" \
		--node-id=sanity-node \
		--v=4 \
		"${hostpath_flags[@]}" \
		>"$plugin_log" 2>&1 &
fi
plugin_pid=$!

for _ in $(seq 100); do
	[[ -S "$socket" ]] && break
	kill -0 "$plugin_pid" 2>/dev/null || die "the plugin exited before creating its socket"
	sleep 0.1
done
[[ -S "$socket" ]] || die "no socket at $socket after 10 s"

status=0
"$sanity" \
	--csi.endpoint="unix://$socket" \
	--csi.mountdir="$work/mount/target-parent" \
	--csi.stagingdir="$work/staging/stage" \
	--csi.testvolumemutableparameters="${SANITY_MUTABLE_PARAMETERS:-$E2E_DIR/sanity/mutable-parameters.yaml}" \
	"$@" || status=$?
log "csi-sanity exited with $status"
exit $status
