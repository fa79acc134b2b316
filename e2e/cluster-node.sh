# shellcheck shell=bash
# The node of `CLUSTER_NODE=1 e2e/cluster.sh up`, sourced by cluster.sh: containerd, kube-scheduler, kubelet and
# kube-proxy beside the control plane, and everything `down` takes away again.
#
# The node uses host-global state, so there is one node-backed cluster per machine: the kubelet's own directory
# (/var/lib/kubelet, where upstream's driver manifests mount it from, bind-mounted onto itself as a shared mount so
# that a driver's mounts propagate), /var/log/pods and /var/log/containers, the /kubepods cgroups, network
# namespaces in /run/netns, iptables rules (kube-proxy's and the kubelet's KUBE-* chains), a bridge for the pods
# and an address on lo for the node. containerd keeps its images and state under $CLUSTER_DIR/node.

NODE_NAME="${CLUSTER_NODE_NAME:-e2e-node}"
# The node's address: on lo, so that it exists on any machine, is not loopback (the apiserver refuses to advertise
# 127.0.0.1 for the `kubernetes` Service, which kube-proxy routes pods to) and goes away with the cluster.
NODE_IP_DEFAULT=10.250.0.1
POD_CIDR=10.244.0.0/24
BRIDGE=e2e-cni0
KUBELET_DIR=/var/lib/kubelet
KUBELET_HEALTHZ_PORT=10248
SCHEDULER_PORT=10259
PROXY_HEALTHZ_PORT=10256
PROXY_METRICS_PORT=10249
# The pod sandbox image: the kubelet's default name, built from pause.c (e2e/tools.sh pause).
SANDBOX_IMAGE=registry.k8s.io/pause:3.10.2
NODE_COMPONENTS=(containerd kube-scheduler kubelet kube-proxy)
# Kernel settings the bridge, kube-proxy or the kubelet change: read before `up`, written back by `down`.
NODE_SYSCTLS=(net.ipv4.ip_forward net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables
	vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys
	kernel.keys.root_maxbytes net.ipv4.conf.all.route_localnet)

node_dir() { echo "$CLUSTER_DIR/node"; }
containerd_socket() { echo "$(node_dir)/containerd/containerd.sock"; }
ctr_k8s() { ctr --address "$(containerd_socket)" --namespace k8s.io "$@"; }

# node_missing: what this machine lacks for the node (one line each), nothing when it has everything.
node_missing() {
	local tool
	[[ "$(id -u)" == 0 ]] || echo "root (the kubelet, containerd and kube-proxy run as root)"
	for tool in containerd containerd-shim-runc-v2 runc ctr iptables ip6tables iptables-save iptables-restore \
		conntrack ip losetup mount umount gcc; do
		command -v "$tool" >/dev/null 2>&1 || echo "$tool"
	done
	[[ -x /usr/lib/cni/bridge && -x /usr/lib/cni/host-local && -x /usr/lib/cni/loopback ]] ||
		echo "CNI plugins in /usr/lib/cni (bridge, host-local, loopback)"
	[[ -d /sys/fs/cgroup/memory ]] || echo "cgroup v1 memory controller at /sys/fs/cgroup/memory"
	# The node suite's images (e2e/node-images.sh): a static busybox for the test pods, objcopy for ours.
	command -v objcopy >/dev/null 2>&1 || echo "objcopy (binutils)"
	{ ldd "$(command -v busybox || echo /nonexistent)" 2>&1 || true; } | grep -q 'not a dynamic executable' ||
		echo "a static busybox (busybox-static)"
	# The e2e tests' glibc image (make conformance and its quick share): dash as its shell, GNU coreutils' dd.
	command -v dash >/dev/null 2>&1 || echo "dash"
	{ dd --version 2>/dev/null || true; } | grep -q coreutils || echo "GNU coreutils' dd (coreutils)"
	grep -qw overlay /proc/filesystems 2>/dev/null || echo "overlay filesystem"
}

# ---------------------------------------------------------------- certificates and configuration

node_gen_pki() {
	(
		cd "$PKI"
		local name subject
		# The kubelet's client certificate (the Node authorizer knows it by CN and group), and the apiserver's for
		# the kubelet (logs, exec).
		for name in node kubelet-client; do
			case "$name" in
			node) subject="/O=system:nodes/CN=system:node:$NODE_NAME" ;;
			kubelet-client) subject="/O=system:masters/CN=kube-apiserver-kubelet-client" ;;
			esac
			openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$name.key" 2>/dev/null
			openssl req -new -key "$name.key" -subj "$subject" -out "$name.csr"
			printf '%s\n' "basicConstraints=CA:FALSE" "keyUsage=critical,digitalSignature" \
				"extendedKeyUsage=clientAuth" >"$name.ext"
			openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
				-extfile "$name.ext" -out "$name.crt" 2>/dev/null
		done
		rm -f ./*.csr ./*.ext ./*.srl
		chmod 600 ./*.key
	) || die "node certificate generation with openssl failed"
}

node_write_configs() {
	local dir
	dir="$(node_dir)"
	mkdir -p "$dir/containerd" "$dir/cni/net.d" "$dir/cni/ipam"
	write_kubeconfig "$dir/kubelet.kubeconfig" kubelet node
	# containerd 1.6 (Debian): the CRI plugin with runc and cgroupfs (cgroup v1), its CNI configuration here, and
	# restrict_oom_score_adj because root on these machines lacks CAP_SYS_RESOURCE (runc fails on a negative
	# oom_score_adj otherwise).
	cat >"$dir/containerd/config.toml" <<EOF
version = 2
root = "$dir/containerd/root"
state = "$dir/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "$dir/containerd/containerd.sock"
[ttrpc]
  address = "$dir/containerd/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$dir/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$SANDBOX_IMAGE"
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$dir/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$dir/cni/net.d"
    max_conf_num = 1
EOF
	# One bridge, addresses from host-local, no masquerade (nothing outside the machine is reachable anyway), so the
	# CNI plugins write no iptables rules.
	cat >"$dir/cni/net.d/10-e2e.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "csi-sidecars-e2e",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$dir/cni/ipam",
        "ranges": [[{"subnet": "$POD_CIDR"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "loopback"}
  ]
}
EOF
	# cgroup v1 needs failCgroupV1: false (and cgroupfs, as containerd's runc); no eviction and no image garbage
	# collection, since no image can be pulled again here.
	cat >"$dir/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$dir/containerd/containerd.sock
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
readOnlyPort: 0
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: $PKI/ca.crt
authorization:
  mode: Webhook
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
failSwapOn: false
evictionHard:
  memory.available: "1%"
  nodefs.available: "1%"
  nodefs.inodesFree: "1%"
  imagefs.available: "1%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
rotateCertificates: false
serverTLSBootstrap: false
podPidsLimit: -1
EOF
	cat >"$dir/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: $KUBECONFIG_FILE
hostnameOverride: $NODE_NAME
mode: iptables
clusterCIDR: $POD_CIDR
healthzBindAddress: 127.0.0.1:$PROXY_HEALTHZ_PORT
metricsBindAddress: 127.0.0.1:$PROXY_METRICS_PORT
iptables:
  localhostNodePorts: false
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
EOF
}

# ---------------------------------------------------------------- host state

# node_prepare_host: what the processes need from the host, each step undone by node_clean_host.
node_prepare_host() {
	local dir s
	dir="$(node_dir)"
	for s in "${NODE_SYSCTLS[@]}"; do
		printf '%s=%s\n' "$s" "$(sysctl -n "$s" 2>/dev/null || echo -)"
	done >"$dir/sysctl.saved"
	nft_tables >"$dir/nft-tables.saved"
	# Host directories the node's tools make (network namespaces; util-linux's table of mounts it made shared).
	for s in /run/netns /run/mount; do [[ -d "$s" ]] || echo "$s"; done >"$dir/dirs.made"
	# Bridged pod traffic goes through iptables (a Service's reply to a pod on the same bridge).
	sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null || true
	ip addr add "$NODE_IP/32" dev lo 2>/dev/null || true
	mkdir -p "$KUBELET_DIR"
	# A driver's mounts under the kubelet's directory reach the host and the pods only through a shared mount
	# (the machine's / is private here).
	if ! mount_point_of "$KUBELET_DIR"; then
		mount --bind "$KUBELET_DIR" "$KUBELET_DIR"
	fi
	mount --make-rshared "$KUBELET_DIR"
}

mount_point_of() { awk -v p="$1" '$5 == p { found = 1 } END { exit !found }' /proc/self/mountinfo; }

# mounts_under DIR...: every mount point at or below the DIRs, deepest first.
mounts_under() {
	awk '{ print $5 }' /proc/self/mountinfo | while read -r point; do
		point="$(printf '%b' "$point")" # mountinfo escapes spaces as \040
		for d in "$@"; do
			if [[ "$point" == "$d" || "$point" == "$d"/* ]]; then
				echo "$point"
				break
			fi
		done
	done | awk '{ print length($0) "\t" $0 }' | sort -rn | cut -f2- | uniq
}

unmount_all_under() {
	local point
	while read -r point; do
		[[ -n "$point" ]] || continue
		umount "$point" 2>/dev/null || umount -l "$point" 2>/dev/null || log "warning: could not unmount $point"
	done < <(mounts_under "$@")
}

# node_stop_pods: every container and sandbox containerd runs for the kubelet, killed and deleted (the kubelet is
# already stopped, so nothing starts them again).
node_stop_pods() {
	local sock ids id
	sock="$(containerd_socket)"
	[[ -S "$sock" ]] && ctr --address "$sock" version >/dev/null 2>&1 || return 0
	mapfile -t ids < <(ctr_k8s tasks list -q 2>/dev/null)
	for id in "${ids[@]}"; do ctr_k8s tasks kill --signal SIGKILL "$id" >/dev/null 2>&1 || true; done
	# containerd's CRI deletes a task once its process has exited; what it has not deleted after 10 s goes here.
	for _ in $(seq 100); do
		[[ -z "$(ctr_k8s tasks list -q 2>/dev/null)" ]] && break
		sleep 0.1
	done
	for id in $(ctr_k8s tasks list -q 2>/dev/null); do ctr_k8s tasks delete --force "$id" >/dev/null 2>&1 || true; done
	mapfile -t ids < <(ctr_k8s containers list -q 2>/dev/null)
	for id in "${ids[@]}"; do ctr_k8s containers delete "$id" >/dev/null 2>&1 || true; done
	((${#ids[@]} == 0)) || log "removed ${#ids[@]} containers"
}

# node_stop_shims: containerd's shims of this node that outlived it (they name its socket on their command line).
node_stop_shims() {
	local pid sock
	sock="$(containerd_socket)"
	for pid in $(pgrep -f containerd-shim-runc-v2 2>/dev/null || true); do
		tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "-address $sock" || continue
		kill -KILL "$pid" 2>/dev/null || true
	done
}

# iptables_without_ours SAVE_TOOL RESTORE_TOOL: every KUBE-* and CNI-* chain, and every rule that jumps to one,
# taken out of the tables that have them; all other rules are written back as they were.
iptables_without_ours() {
	local save="$1" restore="$2" rules
	command -v "$save" >/dev/null 2>&1 || return 0
	rules="$("$save" 2>/dev/null)" || return 0
	grep -qE '(^:|-j |-A )(KUBE-|CNI-)' <<<"$rules" || return 0
	awk '
		/^:(KUBE-|CNI-)/ { next }
		/^-A (KUBE-|CNI-)/ { next }
		/ -j (KUBE-|CNI-)/ { next }
		/ --jump (KUBE-|CNI-)/ { next }
		{ print }
	' <<<"$rules" | "$restore" || log "warning: $restore could not write back the rules without KUBE-* and CNI-*"
}

# nft_tables: the nftables tables there are (iptables-nft makes one per table it is asked to change)
nft_tables() {
	command -v nft >/dev/null 2>&1 || return 0
	nft list tables 2>/dev/null | sed 's/^table //' | sort
}

# nft_remove_made_empty: the tables made since `up` that hold no rule any more (iptables-nft leaves them behind)
nft_remove_made_empty() {
	local saved="$1" table
	command -v nft >/dev/null 2>&1 && [[ -f "$saved" ]] || return 0
	while read -r table; do
		[[ -n "$table" ]] || continue
		grep -qxF "$table" "$saved" && continue
		# Anything but the table, its chains' heads and braces is a rule ($table is "family name", split on purpose).
		# shellcheck disable=SC2086
		nft list table $table 2>/dev/null | grep -vqE '^[[:space:]]*(table .*\{|chain .*\{|type .*;|\}|)$' ||
			nft delete table $table 2>/dev/null || true
	done < <(nft_tables)
}

# node_clean_host: the node's processes are gone; take away what they and node_prepare_host left on the host.
node_clean_host() {
	local dir loop back s value
	dir="$(node_dir)"
	unmount_all_under "$KUBELET_DIR" "$dir" /run/netns /var/run/netns /run/containerd/io.containerd.grpc.v1.cri
	# Loop devices over files of the node (block volumes of a driver).
	while read -r loop back; do
		[[ -n "$loop" ]] || continue
		if [[ "$back" == "$dir"/* || "$back" == "$KUBELET_DIR"/* ]]; then
			losetup -d "$loop" 2>/dev/null || log "warning: could not detach $loop ($back)"
		fi
	done < <(losetup --list --noheadings --output NAME,BACK-FILE 2>/dev/null || true)
	# Network namespaces the CRI made for pods (their veths go with them), then the bridge and the node's address.
	rm -f /run/netns/cni-* 2>/dev/null || true
	ip link del "$BRIDGE" 2>/dev/null || true
	ip addr del "$NODE_IP/32" dev lo 2>/dev/null || true
	iptables_without_ours iptables-save iptables-restore
	iptables_without_ours ip6tables-save ip6tables-restore
	iptables_without_ours iptables-legacy-save iptables-legacy-restore
	iptables_without_ours ip6tables-legacy-save ip6tables-legacy-restore
	nft_remove_made_empty "$dir/nft-tables.saved"
	if [[ -f "$dir/dirs.made" ]]; then
		while read -r s; do rm -rf "${s:?}"; done <"$dir/dirs.made"
	fi
	# The pods' cgroups, deepest first (empty once their processes are gone).
	for s in /sys/fs/cgroup/*/kubepods; do
		[[ -d "$s" ]] && find "$s" -depth -type d -exec rmdir {} + 2>/dev/null
		[[ -d "$s" ]] && log "warning: $s is not empty"
	done
	if [[ -f "$dir/sysctl.saved" ]]; then
		while IFS='=' read -r s value; do
			[[ "$value" == - ]] || sysctl -qw "$s=$value" 2>/dev/null || true
		done <"$dir/sysctl.saved"
	fi
	rm -rf "$KUBELET_DIR" /var/log/pods /var/log/containers
	# containerd's shim sockets (in the same place whatever its configuration).
	rm -rf /run/containerd/s /run/containerd/io.containerd.grpc.v1.cri /run/containerd/io.containerd.runtime.v2.task
	rmdir /run/containerd 2>/dev/null || true
	rm -rf "$dir"
}

# ---------------------------------------------------------------- processes

start_containerd() {
	start containerd "$1" --config "$(node_dir)/containerd/config.toml" --log-level warn
}

start_scheduler() {
	start kube-scheduler "$1" --kubeconfig="$KUBECONFIG_FILE" \
		--authentication-kubeconfig="$KUBECONFIG_FILE" --authorization-kubeconfig="$KUBECONFIG_FILE" \
		--leader-elect=false --bind-address=127.0.0.1 --secure-port="$SCHEDULER_PORT" \
		--cert-dir="$CLUSTER_DIR/scheduler-certs"
}

start_kubelet() {
	local dir
	dir="$(node_dir)"
	start kubelet "$1" --config="$dir/kubelet.yaml" --kubeconfig="$dir/kubelet.kubeconfig" \
		--hostname-override="$NODE_NAME" --node-ip="$NODE_IP" --root-dir="$KUBELET_DIR" \
		--cert-dir="$dir/kubelet-pki" --v=1
}

start_kube_proxy() {
	start kube-proxy "$1" --config="$(node_dir)/kube-proxy.yaml"
}

node_healthy() {
	case "$1" in
	containerd) ctr --address "$(containerd_socket)" version >/dev/null 2>&1 ;;
	kube-scheduler) [[ "$(curl -sk --max-time 5 "https://127.0.0.1:$SCHEDULER_PORT/healthz" 2>/dev/null)" == ok ]] ;;
	kubelet) [[ "$(curl -s --max-time 5 "http://127.0.0.1:$KUBELET_HEALTHZ_PORT/healthz" 2>/dev/null)" == ok ]] ;;
	kube-proxy) curl -sf --max-time 5 "http://127.0.0.1:$PROXY_HEALTHZ_PORT/healthz" >/dev/null 2>&1 ;;
	esac
}

node_probe() {
	if node_healthy "$1"; then echo ok; else echo "its health endpoint does not answer ok"; fi
}

node_ready() {
	curl_admin "https://127.0.0.1:$APISERVER_PORT/api/v1/nodes/$NODE_NAME" 2>/dev/null |
		tr -d ' \n' | grep -q '"type":"Ready","status":"True"'
}

# node_import_pause: the sandbox image, one static binary, written and imported under the kubelet's default name.
node_import_pause() {
	local pause work
	pause="$(binary pause "")"
	work="$(node_dir)/pause-image"
	mkdir -p "$work/rootfs"
	install -m 0755 "$pause" "$work/rootfs/pause"
	(
		# shellcheck source=image/oci.sh
		source "$E2E_DIR/../image/oci.sh"
		oci_begin "$work"
		oci_layer "$work/rootfs"
		oci_image "${SANDBOX_IMAGE##*:}" "65535:65535" /pause pause "${SANDBOX_IMAGE##*:}" \
			"e2e/tools.sh: pause.c of the kubernetes release" "$OCI_LAYER"
		oci_write "$work/pause.oci.tar"
	)
	ctr_k8s images import --base-name "${SANDBOX_IMAGE%:*}" "$work/pause.oci.tar" >/dev/null ||
		die "importing $SANDBOX_IMAGE into containerd failed"
	rm -rf "$work"
}

# node_up BINARIES...: the node's processes after the control plane, then one Ready node.
node_up() {
	local containerd_bin="$1" scheduler_bin="$2" kubelet_bin="$3" proxy_bin="$4" t0
	t0="$(now)"
	node_gen_pki
	node_write_configs
	node_prepare_host
	start_containerd "$containerd_bin"
	wait_healthy containerd || return 1
	node_import_pause
	start_scheduler "$scheduler_bin"
	start_kubelet "$kubelet_bin"
	start_kube_proxy "$proxy_bin"
	wait_healthy kube-scheduler || return 1
	wait_healthy kubelet || return 1
	wait_healthy kube-proxy || return 1
	local t1
	t1="$(now)"
	while ! node_ready; do
		if awk -v a="$t1" -v b="$(now)" -v t="$TIMEOUT" 'BEGIN { exit !(b - a > t) }'; then
			log "node $NODE_NAME not Ready after ${TIMEOUT} s"
			tail_log kubelet
			return 1
		fi
		sleep 0.25
	done
	log "node $NODE_NAME ($NODE_IP) Ready in $(since "$t0") s"
}

# node_down: the node's processes stopped, its pods killed, the host cleaned. Safe to repeat, and safe after a
# crash (whatever is left of a node of this state directory is taken away).
node_down() {
	local t0
	t0="$(now)"
	stop kube-proxy
	stop kubelet
	stop kube-scheduler
	node_stop_pods
	stop containerd
	node_stop_shims
	node_clean_host
	log "node taken down in $(since "$t0") s"
}
