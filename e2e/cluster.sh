#!/usr/bin/env bash
# A real Kubernetes control plane on loopback for the e2e tests:
# etcd + kube-apiserver + kube-controller-manager (volume controllers), built by e2e/tools.sh.
# With CLUSTER_NODE=1, also a node: containerd, kube-scheduler, kubelet and kube-proxy, the controllers and admission
# a real cluster has, and one Ready node (e2e/cluster-node.sh; one node-backed cluster per machine).
#
#   e2e/cluster.sh up       start the cluster, or reuse a healthy one started earlier (idempotent)
#   e2e/cluster.sh down     stop exactly the processes `up` started and remove the state directory
#   e2e/cluster.sh status   print the state; exit 0 when healthy, 1 when unhealthy, 3 when not started
#   e2e/cluster.sh env      print `export KUBECONFIG=...` for eval
#   e2e/cluster.sh node-check   print what this machine lacks for CLUSTER_NODE=1 (exit 1 when anything)
#   e2e/cluster.sh ctr ARGS...  `ctr` against the node's containerd, in the kubelet's namespace (k8s.io)
#   e2e/cluster.sh restart COMPONENT   stop one component (etcd, kube-apiserver, kube-controller-manager) with
#                           SIGTERM and start it again with the same flags and state; returns once it is healthy
#
# State, certificates and logs live in $CLUSTER_DIR (default e2e/.cluster): kubeconfig, logs/*.log, pids/*.pid;
# logs/audit.log records every request a ServiceAccount makes (the sidecars under test), at Metadata level.
# Authentication: the kubeconfig holds a client certificate with CN=e2e-admin, O=system:masters (RBAC is on, so
# tests can still check other identities through impersonation or ServiceAccount tokens).
#
# Environment (defaults in brackets):
#   CLUSTER_DIR [e2e/.cluster]           CLUSTER_APISERVER_PORT [26443]   CLUSTER_ETCD_PORT [22379]
#   CLUSTER_ETCD_PEER_PORT [22380]       CLUSTER_KCM_PORT [20257]         CLUSTER_TIMEOUT [120] seconds per wait
#   CLUSTER_APISERVER_EXTRA_ARGS, CLUSTER_KCM_EXTRA_ARGS, CLUSTER_ETCD_EXTRA_ARGS: extra flags (word-split)
#   CLUSTER_ETCD_BIN, CLUSTER_APISERVER_BIN, CLUSTER_KCM_BIN: use these binaries instead of e2e/tools.sh's
#   CLUSTER_NODE [0]: 1 for the node; CLUSTER_NODE_NAME [e2e-node]; CLUSTER_NODE_IP [10.250.0.1], added to lo
set -euo pipefail

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CLUSTER_DIR="${CLUSTER_DIR:-$E2E_DIR/.cluster}"
mkdir -p "$(dirname "$CLUSTER_DIR")"
CLUSTER_DIR="$(cd "$(dirname "$CLUSTER_DIR")" && pwd)/$(basename "$CLUSTER_DIR")"
PKI="$CLUSTER_DIR/pki"
LOGS="$CLUSTER_DIR/logs"
PIDS="$CLUSTER_DIR/pids"
KUBECONFIG_FILE="$CLUSTER_DIR/kubeconfig"
STATE_ENV="$CLUSTER_DIR/cluster.env"
TIMEOUT="${CLUSTER_TIMEOUT:-120}"
# Alpha features the sidecars implement and the suites exercise: claims with a dataSourceRef into another namespace
# (the API server drops dataSourceRef.namespace without it).
FEATURE_GATES="CrossNamespaceVolumeDataSource=true"
CONTROL_PLANE=(etcd kube-apiserver kube-controller-manager)
COMPONENTS=("${CONTROL_PLANE[@]}") # start order, stopped in reverse; the node's are added by load_ports
# shellcheck source=e2e/cluster-node.sh
source "$E2E_DIR/cluster-node.sh"

log() { printf '[cluster] %s\n' "$*" >&2; }
die() { printf '[cluster] error: %s\n' "$*" >&2; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

usage() {
	awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}" >&2
	exit 2
}

load_ports() {
	# A running cluster keeps the ports it was started with, whatever the environment says now.
	if [[ -f "$STATE_ENV" ]]; then
		# shellcheck disable=SC1090
		source "$STATE_ENV"
	else
		APISERVER_PORT="${CLUSTER_APISERVER_PORT:-26443}"
		ETCD_PORT="${CLUSTER_ETCD_PORT:-22379}"
		ETCD_PEER_PORT="${CLUSTER_ETCD_PEER_PORT:-22380}"
		KCM_PORT="${CLUSTER_KCM_PORT:-20257}"
		NODE="${CLUSTER_NODE:-0}"
		NODE_IP="${CLUSTER_NODE_IP:-$NODE_IP_DEFAULT}"
	fi
	NODE="${NODE:-0}"
	COMPONENTS=("${CONTROL_PLANE[@]}")
	[[ "$NODE" != 1 ]] || COMPONENTS+=("${NODE_COMPONENTS[@]}")
}

# ---------------------------------------------------------------- processes

pid_of() { [[ -f "$PIDS/$1.pid" ]] && cat "$PIDS/$1.pid" || true; }

# is_ours PID: the process is alive and is one we started (its command line names our state directory),
# so a recycled pid is never killed.
is_ours() {
	local pid="$1"
	[[ -n "$pid" && -r "/proc/$pid/cmdline" ]] || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$CLUSTER_DIR/" || return 1
	alive "$pid"
}

# start NAME BINARY ARGS...: run detached in its own session; the pid file is written by the process itself
# (before exec), so it is right whether or not setsid had to fork.
start() {
	local name="$1"
	shift
	mkdir -p "$LOGS" "$PIDS"
	# shellcheck disable=SC2016 # $$ and $@ belong to the inner shell
	setsid bash -c 'echo $$ >"$0"; exec "$@"' "$PIDS/$name.pid" "$@" \
		</dev/null >>"$LOGS/$name.log" 2>&1 8>&- 9>&- &
	local i
	for i in $(seq 50); do
		[[ -s "$PIDS/$name.pid" ]] && return 0
		sleep 0.1
	done
	die "$name did not start (no pid file)"
}

# alive PID: the process exists and is not a finished zombie. While a process exits, its command line reads
# empty and its main thread may already be a zombie while other threads still hold the listening sockets, so
# waiting for exit relies on neither.
alive() {
	[[ -d "/proc/$1" ]] || return 1
	[[ "$(awk '/^State:/ { print $2 }' "/proc/$1/status" 2>/dev/null)" != Z ]] && return 0
	local tasks=("/proc/$1/task/"*)
	((${#tasks[@]} > 1))
}

# stop NAME [SIGNAL]: SIGTERM (or SIGNAL), SIGKILL after 10 s; returns once the process is gone.
stop() {
	local name="$1" sig="${2:-TERM}" pid i
	pid="$(pid_of "$name")"
	if is_ours "$pid"; then
		kill -"$sig" "$pid" 2>/dev/null || true
		for i in $(seq 100); do
			alive "$pid" || break
			sleep 0.1
		done
		if alive "$pid"; then
			log "$name (pid $pid) ignored SIG$sig for 10 s, sending SIGKILL"
			kill -KILL "$pid" 2>/dev/null || true
			for i in $(seq 100); do
				alive "$pid" || break
				sleep 0.1
			done
		fi
		if alive "$pid"; then
			log "warning: $name (pid $pid) is still running after SIGKILL"
		else
			log "stopped $name (pid $pid)"
		fi
	fi
	rm -f "$PIDS/$name.pid"
}

stop_all() {
	local i
	for ((i = ${#COMPONENTS[@]} - 1; i >= 0; i--)); do stop "${COMPONENTS[i]}" "$@"; done
}

tail_log() {
	local name="$1"
	if [[ -s "$LOGS/$name.log" ]]; then
		printf '[cluster] ---- last 40 lines of %s ----\n' "$LOGS/$name.log" >&2
		tail -n 40 "$LOGS/$name.log" >&2
		printf '[cluster] ---- end of %s ----\n' "$name.log" >&2
	else
		log "($LOGS/$name.log is empty or missing)"
	fi
}

# ---------------------------------------------------------------- health

curl_admin() {
	curl -sS --max-time 5 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" "$@"
}

healthy() {
	case "$1" in
	etcd) curl -s --max-time 5 "http://127.0.0.1:$ETCD_PORT/health" 2>/dev/null | grep -q '"health":"true"' ;;
	kube-apiserver) [[ "$(curl_admin "https://127.0.0.1:$APISERVER_PORT/readyz" 2>/dev/null)" == ok ]] ;;
	kube-controller-manager) [[ "$(curl -sk --max-time 5 "https://127.0.0.1:$KCM_PORT/healthz" 2>/dev/null)" == ok ]] ;;
	*) node_healthy "$1" ;;
	esac
}

# probe NAME: one line, "healthy" or why not (a single request: with etcd gone, /readyz takes 4 s to answer)
probe() {
	local name="$1" pid out
	pid="$(pid_of "$name")"
	if [[ -z "$pid" ]]; then
		echo "not started (no pid file)"
		return
	elif ! is_ours "$pid"; then
		echo "DEAD: pid $pid is not running (see $LOGS/$name.log)"
		return
	fi
	case "$name" in
	etcd)
		out="$(curl -sS --max-time 5 "http://127.0.0.1:$ETCD_PORT/health" 2>&1 || true)"
		[[ "$out" == *'"health":"true"'* ]] && out=ok
		;;
	kube-apiserver)
		out="$(curl_admin "https://127.0.0.1:$APISERVER_PORT/readyz?verbose" 2>&1 || true)"
		[[ "$out" == *"readyz check passed"* ]] && out=ok || out="$(echo "$out" | grep -v '^\[+\]')"
		;;
	kube-controller-manager) out="$(curl -sSk --max-time 5 "https://127.0.0.1:$KCM_PORT/healthz" 2>&1 || true)" ;;
	*) out="$(node_probe "$name")" ;;
	esac
	if [[ "$out" == ok ]]; then
		echo healthy
	else
		echo "pid $pid running but unhealthy: $(echo "$out" | tr '\n' ' ' | cut -c1-300)"
	fi
}

wait_healthy() {
	local name="$1" t0 pid
	t0="$(now)"
	pid="$(pid_of "$name")"
	while ! healthy "$name"; do
		# The process writes its pid file itself, and while it execs its binary /proc/PID/cmdline can read empty: so
		# during startup only "is it still alive" counts (is_ours, which checks the command line, is for stopping).
		[[ -n "$pid" ]] || pid="$(pid_of "$name")"
		if [[ -n "$pid" ]] && ! alive "$pid"; then
			log "$name (pid $pid) exited during startup"
			tail_log "$name"
			return 1
		fi
		if awk -v a="$t0" -v b="$(now)" -v t="$TIMEOUT" 'BEGIN { exit !(b - a > t) }'; then
			log "$name not healthy after ${TIMEOUT} s: $(probe "$name")"
			tail_log "$name"
			return 1
		fi
		sleep 0.25
	done
	log "$name ready in $(since "$t0") s (pid $pid)"
}

# ---------------------------------------------------------------- setup

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# check_ports [GRACE]: every port is free (waiting up to GRACE seconds for ports of processes just stopped)
check_ports() {
	local grace="${1:-0}" bad=0 var port who t0
	t0="$(now)"
	local vars=(ETCD_PORT ETCD_PEER_PORT APISERVER_PORT KCM_PORT)
	# The node's ports are fixed (one node-backed cluster per machine); 10250 is the kubelet's API.
	local KUBELET_PORT=10250
	[[ "$NODE" != 1 ]] || vars+=(KUBELET_PORT KUBELET_HEALTHZ_PORT SCHEDULER_PORT PROXY_HEALTHZ_PORT PROXY_METRICS_PORT)
	for var in "${vars[@]}"; do
		port="${!var}"
		if ! [[ "$port" =~ ^[0-9]+$ ]] || ((port < 1 || port > 65535)); then
			die "CLUSTER_$var='$port' is not a port number"
		fi
		while port_busy "$port" && awk -v a="$t0" -v b="$(now)" -v g="$grace" 'BEGIN { exit !(b - a < g) }'; do
			sleep 0.2
		done
		if port_busy "$port"; then
			who="$(ss -Hltnp "sport = :$port" 2>/dev/null | grep -o 'users:(.*)' | head -n1 || true)"
			case "$var" in
			ETCD_PORT | ETCD_PEER_PORT | APISERVER_PORT | KCM_PORT) var="CLUSTER_$var" ;;
			*) var="the node's ${var,,}" ;;
			esac
			log "port 127.0.0.1:$port ($var) is already in use${who:+ by $who}"
			bad=1
		fi
	done
	((bad == 0)) || die "busy port(s): stop whatever uses them or choose others, e.g. CLUSTER_APISERVER_PORT=36443"
}

binary() {
	local name="$1" override="$2"
	if [[ -n "$override" ]]; then
		[[ -x "$override" ]] || die "$override (from the environment) is not an executable"
		echo "$override"
	else
		bash "$E2E_DIR/tools.sh" path "$name" || die "could not build $name (see above)"
	fi
}

gen_pki() {
	mkdir -p "$PKI"
	(
		cd "$PKI"
		# One CA signs the serving certificate and the admin client certificate; EC P-256, PKCS#8 keys.
		openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out ca.key 2>/dev/null
		openssl req -x509 -new -key ca.key -subj "/CN=csi-sidecars-e2e-ca" -days 3650 -out ca.crt \
			-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
		openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out apiserver.key 2>/dev/null
		openssl req -new -key apiserver.key -subj "/CN=kube-apiserver" -out apiserver.csr
		printf '%s\n' "basicConstraints=CA:FALSE" "keyUsage=critical,digitalSignature" \
			"extendedKeyUsage=serverAuth" \
			"subjectAltName=IP:127.0.0.1,IP:10.0.0.1,IP:$NODE_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local" \
			>apiserver.ext
		openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
			-extfile apiserver.ext -out apiserver.crt 2>/dev/null
		openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out admin.key 2>/dev/null
		openssl req -new -key admin.key -subj "/O=system:masters/CN=e2e-admin" -out admin.csr
		printf '%s\n' "basicConstraints=CA:FALSE" "keyUsage=critical,digitalSignature" \
			"extendedKeyUsage=clientAuth" >admin.ext
		openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
			-extfile admin.ext -out admin.crt 2>/dev/null
		# ServiceAccount token signing key (RS256).
		openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out sa.key 2>/dev/null
		openssl pkey -in sa.key -pubout -out sa.pub
		rm -f ./*.csr ./*.ext ./*.srl
		chmod 600 ./*.key
	) || die "certificate generation with openssl failed"
}

# write_kubeconfig FILE USER CERT: a self-contained kubeconfig for the client certificate pki/CERT.{crt,key}
write_kubeconfig() {
	local file="$1" user="$2" cert="$3" b64="base64 -w0"
	(
		umask 077
		cat >"$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: csi-sidecars-e2e
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority-data: $($b64 <"$PKI/ca.crt")
users:
- name: $user
  user:
    client-certificate-data: $($b64 <"$PKI/$cert.crt")
    client-key-data: $($b64 <"$PKI/$cert.key")
contexts:
- name: csi-sidecars-e2e
  context:
    cluster: csi-sidecars-e2e
    user: $user
current-context: csi-sidecars-e2e
EOF
	)
}

# ---------------------------------------------------------------- components (cmd_up and cmd_restart)

# start_etcd BINARY, start_apiserver BINARY, start_kcm BINARY: start one component with its flags.
start_etcd() {
	local peer="http://127.0.0.1:$ETCD_PEER_PORT" client="http://127.0.0.1:$ETCD_PORT"
	# shellcheck disable=SC2086
	start etcd "$1" --name=e2e --data-dir="$CLUSTER_DIR/etcd" \
		--listen-client-urls="$client" --advertise-client-urls="$client" \
		--listen-peer-urls="$peer" --initial-advertise-peer-urls="$peer" --initial-cluster="e2e=$peer" \
		--initial-cluster-state=new --unsafe-no-fsync --log-level=warn ${CLUSTER_ETCD_EXTRA_ARGS:-}
}

start_apiserver() {
	# Without a node: loopback only, no `kubernetes` Endpoints, no ServiceAccount admission (no token controller).
	# With one: the `kubernetes` Service routes (kube-proxy) to the node's address, pods get their ServiceAccount's
	# token, the kubelet is authorized as a node, and logs and exec reach it.
	local mode=(--bind-address=127.0.0.1 --advertise-address=127.0.0.1 --endpoint-reconciler-type=none
		--authorization-mode=RBAC --disable-admission-plugins=ServiceAccount)
	if [[ "$NODE" == 1 ]]; then
		mode=(--bind-address=0.0.0.0 --advertise-address="$NODE_IP" --endpoint-reconciler-type=lease
			--authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction
			--kubelet-preferred-address-types=InternalIP
			--kubelet-client-certificate="$PKI/kubelet-client.crt" --kubelet-client-key="$PKI/kubelet-client.key")
	fi
	# shellcheck disable=SC2086
	start kube-apiserver "$1" \
		--etcd-servers="http://127.0.0.1:$ETCD_PORT" \
		--secure-port="$APISERVER_PORT" "${mode[@]}" \
		--service-cluster-ip-range=10.0.0.0/24 \
		--cert-dir="$CLUSTER_DIR/apiserver-certs" \
		--tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
		--client-ca-file="$PKI/ca.crt" \
		--service-account-issuer=https://kubernetes.default.svc \
		--service-account-signing-key-file="$PKI/sa.key" --service-account-key-file="$PKI/sa.pub" \
		--allow-privileged=true \
		--feature-gates="$FEATURE_GATES" \
		--audit-policy-file="$CLUSTER_DIR/audit-policy.yaml" --audit-log-path="$LOGS/audit.log" \
		--audit-log-maxbackup=0 --audit-log-mode=blocking \
		${CLUSTER_APISERVER_EXTRA_ARGS:-}
}

start_kcm() {
	# Without a node, the volume controllers the sidecars meet; with one, every controller a real cluster runs by
	# default (ServiceAccounts and their tokens, kube-root-ca.crt, node lifecycle, workloads, endpoint slices,
	# attach/detach, ...).
	local mode=(--controllers=persistentvolume-binder-controller,persistentvolume-protection-controller,persistentvolumeclaim-protection-controller,volumeattributesclass-protection-controller,persistentvolume-expander-controller,namespace-controller,garbage-collector-controller,resourcequota-controller)
	if [[ "$NODE" == 1 ]]; then
		mode=(--controllers='*' --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt")
	fi
	# shellcheck disable=SC2086
	start kube-controller-manager "$1" \
		--kubeconfig="$KUBECONFIG_FILE" \
		--authentication-kubeconfig="$KUBECONFIG_FILE" --authorization-kubeconfig="$KUBECONFIG_FILE" \
		"${mode[@]}" \
		--leader-elect=false \
		--bind-address=127.0.0.1 --secure-port="$KCM_PORT" --cert-dir="$CLUSTER_DIR/kcm-certs" \
		--use-service-account-credentials=false \
		--feature-gates="$FEATURE_GATES" \
		${CLUSTER_KCM_EXTRA_ARGS:-}
}

# ---------------------------------------------------------------- verbs

cmd_up() {
	local t0 etcd_bin apiserver_bin kcm_bin c node_bins=()
	t0="$(now)"
	load_ports
	if [[ "${CLUSTER_NODE:-}" == 1 && "$NODE" != 1 && -f "$STATE_ENV" ]]; then
		die "the cluster in $CLUSTER_DIR runs without a node: \`bash e2e/cluster.sh down\` first, then CLUSTER_NODE=1 up"
	fi
	if [[ "$NODE" == 1 ]]; then
		local missing
		missing="$(node_missing)"
		[[ -z "$missing" ]] || die "the node needs what this machine lacks (README, \"Set up\"): $(echo "$missing" | paste -sd, -)"
	fi
	if [[ -d "$PIDS" ]] && compgen -G "$PIDS/*.pid" >/dev/null; then
		local -A state=()
		local bad=0
		for c in "${COMPONENTS[@]}"; do
			state[$c]="$(probe "$c")"
			[[ "${state[$c]}" == healthy ]] || bad=1
		done
		if ((bad == 0)) && [[ -s "$KUBECONFIG_FILE" ]]; then
			log "reusing the healthy cluster at https://127.0.0.1:$APISERVER_PORT (checked in $(since "$t0") s)"
			if [[ -n "${CLUSTER_APISERVER_PORT:-}" && "$CLUSTER_APISERVER_PORT" != "$APISERVER_PORT" ]]; then
				log "note: CLUSTER_APISERVER_PORT=$CLUSTER_APISERVER_PORT is ignored while this cluster runs (down first)"
			fi
			log "KUBECONFIG=$KUBECONFIG_FILE"
			return 0
		fi
		log "the cluster in $CLUSTER_DIR is not healthy:"
		for c in "${COMPONENTS[@]}"; do log "  $c: ${state[$c]}"; done
		for c in "${COMPONENTS[@]}"; do
			[[ "${state[$c]}" == healthy ]] || tail_log "$c"
		done
		log "restarting the whole cluster (its data is discarded)"
		[[ "$NODE" != 1 ]] || node_down
		stop_all KILL
		remove_state
		load_ports
		check_ports 10
	else
		# What a node of this state directory left behind (a crash, a reboot) goes first.
		[[ "$NODE" != 1 ]] || node_down
		remove_state
		load_ports
		check_ports
	fi

	etcd_bin="$(binary etcd "${CLUSTER_ETCD_BIN:-}")"
	apiserver_bin="$(binary kube-apiserver "${CLUSTER_APISERVER_BIN:-}")"
	kcm_bin="$(binary kube-controller-manager "${CLUSTER_KCM_BIN:-}")"
	if [[ "$NODE" == 1 ]]; then
		node_bins=("$(command -v containerd)")
		for c in kube-scheduler kubelet kube-proxy; do node_bins+=("$(binary "$c" "")"); done
	fi

	mkdir -p "$CLUSTER_DIR" "$LOGS" "$PIDS"
	cat >"$STATE_ENV" <<EOF
APISERVER_PORT=$APISERVER_PORT
ETCD_PORT=$ETCD_PORT
ETCD_PEER_PORT=$ETCD_PEER_PORT
KCM_PORT=$KCM_PORT
NODE=$NODE
NODE_IP=$NODE_IP
EOF
	gen_pki
	[[ "$NODE" != 1 ]] || node_gen_pki
	write_kubeconfig "$KUBECONFIG_FILE" e2e-admin admin
	# Every request a ServiceAccount (a sidecar under test) makes, once answered: what the sidecars cost the API
	# server (e2e/tests/api_requests.rs counts them per claim) and which calls RBAC refused (code 403).
	cat >"$CLUSTER_DIR/audit-policy.yaml" <<'POLICY'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
  - level: Metadata
    userGroups: ["system:serviceaccounts"]
  - level: None
POLICY
	log "state in $CLUSTER_DIR (pki, logs, pids) prepared at +$(since "$t0") s"

	start_etcd "$etcd_bin"
	wait_healthy etcd || { stop_all; die "etcd failed to start"; }
	start_apiserver "$apiserver_bin"
	wait_healthy kube-apiserver || { stop_all; die "kube-apiserver failed to start"; }
	start_kcm "$kcm_bin"
	wait_healthy kube-controller-manager || { stop_all; die "kube-controller-manager failed to start"; }
	if [[ "$NODE" == 1 ]]; then
		node_up "${node_bins[@]}" || { node_down; stop_all; die "the node failed to start"; }
	fi

	log "cluster up in $(since "$t0") s: https://127.0.0.1:$APISERVER_PORT ($(version_line))"
	log "KUBECONFIG=$KUBECONFIG_FILE"
}

version_line() {
	curl_admin "https://127.0.0.1:$APISERVER_PORT/version" 2>/dev/null |
		sed -n 's/.*"gitVersion": *"\([^"]*\)".*/kube-apiserver \1/p' || true
}

cmd_down() {
	load_ports
	[[ "$NODE" != 1 ]] || node_down
	if [[ -d "$PIDS" ]]; then
		stop_all
	else
		log "no cluster state in $CLUSTER_DIR"
	fi
	remove_state
	log "down: removed $CLUSTER_DIR"
}

# remove_state: the state directory, after unmounting anything still mounted inside it (a node's containers), so
# that removing it never reaches into a mounted filesystem.
remove_state() {
	unmount_all_under "$CLUSTER_DIR"
	rm -rf "$CLUSTER_DIR"
}

cmd_status() {
	load_ports
	if [[ ! -d "$PIDS" ]] || ! compgen -G "$PIDS/*.pid" >/dev/null; then
		echo "cluster: not started ($CLUSTER_DIR has no pid files)"
		return 3
	fi
	local c ok=0 st
	for c in "${COMPONENTS[@]}"; do
		st="$(probe "$c")"
		if [[ "$st" == healthy ]]; then
			echo "$c: healthy (pid $(pid_of "$c"))"
		else
			echo "$c: $st"
			ok=1
		fi
	done
	echo "endpoints: apiserver https://127.0.0.1:$APISERVER_PORT, etcd http://127.0.0.1:$ETCD_PORT" \
		"(peer $ETCD_PEER_PORT), kcm https://127.0.0.1:$KCM_PORT"
	echo "kubeconfig: $KUBECONFIG_FILE"
	if [[ "$NODE" == 1 ]]; then
		if node_ready; then echo "node: $NODE_NAME Ready ($NODE_IP)"; else echo "node: $NODE_NAME NOT Ready"; ok=1; fi
	fi
	if ((ok == 0)); then
		echo "cluster: healthy ($(version_line))"
	else
		echo "cluster: UNHEALTHY (logs in $LOGS)"
	fi
	return "$ok"
}

# cmd_restart COMPONENT: the running cluster keeps its state; only that process is replaced (what a static pod
# restart or a crash-looping component does to the sidecars).
cmd_restart() {
	local name="$1" t0 bin
	t0="$(now)"
	load_ports
	[[ -s "$KUBECONFIG_FILE" ]] || die "no cluster in $CLUSTER_DIR (run up first)"
	case "$name" in
	etcd) bin="$(binary etcd "${CLUSTER_ETCD_BIN:-}")" ;;
	kube-apiserver) bin="$(binary kube-apiserver "${CLUSTER_APISERVER_BIN:-}")" ;;
	kube-controller-manager) bin="$(binary kube-controller-manager "${CLUSTER_KCM_BIN:-}")" ;;
	*) die "restart: unknown component '$name' (one of: ${COMPONENTS[*]})" ;;
	esac
	stop "$name"
	case "$name" in
	etcd) start_etcd "$bin" ;;
	kube-apiserver) start_apiserver "$bin" ;;
	kube-controller-manager) start_kcm "$bin" ;;
	esac
	wait_healthy "$name" || die "$name did not come back"
	log "restarted $name in $(since "$t0") s"
}

cmd_env() {
	echo "export KUBECONFIG=$KUBECONFIG_FILE"
}

verb="${1:-}"
[[ $# -gt 0 ]] && shift
if [[ "$verb" == restart ]]; then
	[[ $# -eq 1 ]] || usage
elif [[ "$verb" == ctr ]]; then
	load_ports
	[[ "$NODE" == 1 ]] || die "no node in $CLUSTER_DIR (CLUSTER_NODE=1 bash e2e/cluster.sh up)"
	exec ctr --address "$(containerd_socket)" --namespace k8s.io "$@"
else
	[[ $# -eq 0 ]] || usage
fi
case "$verb" in
up | down | restart)
	# `up`, `down` and `restart` never run concurrently for the same state directory.
	exec 8>"$CLUSTER_DIR.lock"
	flock 8
	"cmd_$verb" "$@"
	;;
status) cmd_status ;;
env) cmd_env ;;
node-check)
	missing="$(node_missing)"
	[[ -n "$missing" ]] || { echo "node: this machine has what CLUSTER_NODE=1 needs"; exit 0; }
	echo "node: missing $(echo "$missing" | paste -sd, -)"
	exit 1
	;;
*) usage ;;
esac
