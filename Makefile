# csi-sidecars — see README.md.
#   make build   release binaries into target/release
#   make test    unit tests + csi-sanity + end-to-end tests against a real control plane, then on a real node
#   make lint    rustfmt and clippy (warnings are errors), and the dependency audit (cargo-deny; ADVISORY_DB=DIR)
#   make image   the sidecar images as an OCI archive in target/image (no container daemon), then its test
#   make demo    the examples story by story on a local control plane (KEEP=1 leaves it running)
#   make bench   ours against upstream's sidecars side by side (docs/benchmarks.md); not part of make test
#   make bench-scale   the same among 50,000 claims, PVs, pods and snapshot contents (BENCH_SCALE_OBJECTS)
#   make chaos   the sidecars under faults, kills and restarts, then nothing leaked or lost (docs/chaos.md)
#   make conformance   Kubernetes' storage e2e suites with our sidecars, then with upstream's (docs/conformance.md)
#   make csimock   Kubernetes' CSI mock tests with our sidecars, then with upstream's (docs/conformance.md)

CARGO ?= cargo
E2E_PACKAGE := csi-sidecars-e2e

.PHONY: fuzz build test unit sanity e2e e2e-tests node-e2e conformance csimock lint tools bench bench-scale chaos cluster-up cluster-down clean image demo

build:
	$(CARGO) build --release --workspace --bins

test: unit sanity e2e node-e2e

# Everything that needs no control plane.
unit:
	$(CARGO) test --workspace --exclude $(E2E_PACKAGE)

# The property tests (modules and files named *prop*) with many more generated cases than make test gives them
# (256 each); FUZZ_CASES sets how many.
FUZZ_CASES ?= 20000
fuzz:
	PROPTEST_CASES=$(FUZZ_CASES) $(CARGO) test --workspace --exclude $(E2E_PACKAGE) --lib prop_tests

# The hostpath plugin against the upstream CSI conformance suite.
sanity: tools
	$(CARGO) build -p hostpath-plugin
	HOSTPATH_PLUGIN=$(CURDIR)/target/debug/hostpath-plugin bash e2e/sanity.sh --ginkgo.no-color
	@# The route a driver author's plugin takes (docs/testing.md#testing-your-own-driver), kept working.
	E2E_PLUGIN_COMMAND="$(CURDIR)/target/debug/hostpath-plugin --endpoint={endpoint} --state-dir={state_dir} --node-id={node_id} --driver-name={driver}" \
		bash e2e/sanity.sh --ginkgo.no-color --ginkgo.focus='Identity Service'

# The suites run a second time with each sidecar as `csi-sidecars --sidecars=<one>` (E2E_SIDECAR_MODE=combined):
# about 2 minutes on 2 cores. Any suite runs that way with E2E_SIDECAR_MODE=combined cargo test --test <suite>.
COMBINED_SUITES := --test provisioner_dynamic --test resizer_static --test snapshot_controller --test snapshotter_sidecar \
	--test volume_attributes_class --test attacher_attach --test attacher_recovery

# Real processes against a real etcd + kube-apiserver + kube-controller-manager.
# The cluster is stopped afterwards whether the tests pass or not.
e2e: tools
	$(CARGO) build --workspace --bins
	bash e2e/cluster.sh up
	status=0; $(CARGO) test -p $(E2E_PACKAGE) || status=$$?; \
	E2E_SIDECAR_MODE=combined $(CARGO) test -p $(E2E_PACKAGE) $(COMBINED_SUITES) || status=$$?; \
	bash e2e/cluster.sh down; exit $$status

# The node suites, on a node-backed cluster of their own (e2e/README.md, "The node"): both charts installed with
# helm --wait and our images as pods, upstream's driver manifests with only the sidecar images swapped, pods writing
# and reading volumes. One test at a time (they share the one node); the cluster is stopped afterwards. A machine
# that lacks what the node needs (`bash e2e/cluster.sh node-check`; README, "Set up") skips them with a message,
# unless E2E_NODE=required (.ci/run sets it). node_conformance is the quick share of `make conformance`: one spec of
# each of Kubernetes' storage suites; node_csimock that of `make csimock`: four of Kubernetes' CSI mock tests.
NODE_SUITES := --test node_charts --test node_dropin --test node_volumes --test node_attach --test node_conformance \
	--test node_csimock

node-e2e: tools
	@if ! bash e2e/cluster.sh node-check; then \
		if [ "$(E2E_NODE)" = required ]; then echo "node-e2e: E2E_NODE=required, but the node cannot run here"; exit 1; fi; \
		echo "node-e2e: SKIPPED, this machine cannot run the node (README, Set up)"; exit 0; \
	fi; \
	set -e; bash e2e/tools.sh build node; bash e2e/tools.sh build conformance; $(CARGO) build --workspace --bins; \
	bash e2e/cluster.sh down; started=$$(date +%s); CLUSTER_NODE=1 bash e2e/cluster.sh up; \
	status=0; bash e2e/node-images.sh e2e || status=$$?; \
	[ $$status -ne 0 ] || $(CARGO) test -p $(E2E_PACKAGE) $(NODE_SUITES) -- --ignored --test-threads=1 || status=$$?; \
	bash e2e/cluster.sh down; echo "node-e2e: $$(( $$(date +%s) - started )) s on the node"; exit $$status

# Kubernetes' own storage e2e tests (e2e.test's External Storage suites, e2e/conformance/test-driver.yaml) against
# hostpath-plugin behind our sidecars, then behind upstream's (built from the module proxy), on a node-backed cluster
# of its own; reports in target/conformance/. CONFORMANCE_ARGS: --side=ours|upstream|both, --quick, --procs=N.
CONFORMANCE_ARGS ?=
conformance: tools
	bash e2e/cluster.sh node-check
	bash e2e/tools.sh build node
	bash e2e/tools.sh build conformance
	bash e2e/tools.sh build $(BENCH_TOOLS)
	$(CARGO) build --workspace --bins
	bash e2e/cluster.sh down
	CLUSTER_NODE=1 bash e2e/cluster.sh up
	status=0; bash e2e/node-images.sh e2e && bash e2e/node-images.sh upstream || status=$$?; \
	[ $$status -ne 0 ] || $(CURDIR)/target/debug/conformance $(CONFORMANCE_ARGS) || status=$$?; \
	bash e2e/cluster.sh down; exit $$status

# Kubernetes' CSI mock tests (e2e.test's test/e2e/storage/csimock): the specs where e2e.test itself is the CSI driver,
# reached through hostpath-plugin --proxy-endpoint in the mock pod, with our sidecars, then with upstream's (built
# from the module proxy), on a node-backed cluster of its own; reports in target/csimock/. CSIMOCK_ARGS:
# --side=ours|upstream|both, --quick, --procs=N.
CSIMOCK_ARGS ?=
csimock: tools
	bash e2e/cluster.sh node-check
	bash e2e/tools.sh build node
	bash e2e/tools.sh build conformance
	bash e2e/tools.sh build $(BENCH_TOOLS)
	$(CARGO) build --workspace --bins
	bash e2e/cluster.sh down
	CLUSTER_NODE=1 bash e2e/cluster.sh up
	status=0; bash e2e/node-images.sh csimock || status=$$?; \
	[ $$status -ne 0 ] || $(CURDIR)/target/debug/csimock $(CSIMOCK_ARGS) || status=$$?; \
	bash e2e/cluster.sh down; exit $$status

# Only the tests, against a cluster that is already up (for iterating).
e2e-tests:
	$(CARGO) build --workspace --bins
	$(CARGO) test -p $(E2E_PACKAGE)

# Go-built test tools (etcd, kube-apiserver, kube-controller-manager, csi-sanity, helm), cached.
tools:
	bash e2e/tools.sh build

# Upstream's Go sidecars the bench runs beside ours (e2e/tools.sh builds them from the Go module proxy).
BENCH_TOOLS := upstream-csi-provisioner upstream-csi-resizer upstream-csi-snapshotter upstream-snapshot-controller \
	upstream-csi-attacher
# The PV binder of kube-controller-manager must not be what the bench measures (its default is 20 requests/s).
BENCH_KCM_ARGS := --kube-api-qps=1000 --kube-api-burst=2000
# Only the release binaries the bench runs (the shipped profile; chaos, demo and the rest are not linked for it).
BENCH_BINS := --bin csi-bench --bin csi-provisioner --bin csi-resizer --bin csi-snapshotter --bin snapshot-controller \
	--bin csi-attacher --bin csi-sidecars --bin hostpath-plugin --bin csictl

# Release binaries against a fresh control plane whose controller manager has raised limits; the cluster is
# stopped afterwards. Sizes and rounds: BENCH_* variables (docs/benchmarks.md). Writes target/bench/.
bench: tools
	bash e2e/tools.sh build $(BENCH_TOOLS)
	$(CARGO) build --release $(BENCH_BINS)
	bash e2e/cluster.sh down
	CLUSTER_KCM_EXTRA_ARGS="$(BENCH_KCM_ARGS)" bash e2e/cluster.sh up
	status=0; E2E_PROFILE=release $(CURDIR)/target/release/csi-bench || status=$$?; bash e2e/cluster.sh down; exit $$status

# The `scale` scenario alone (docs/benchmarks.md), on a fresh control plane like `bench`; writes
# target/bench/scale.{json,md,svg}.
bench-scale:
	BENCH_SCENARIOS=scale BENCH_OUTPUT=scale $(MAKE) bench

# The fault suite on a fresh control plane of its own (its kube-apiserver is restarted mid-run); the cluster is
# stopped afterwards. Sizes: CHAOS_* variables (docs/chaos.md). A reduced run is part of make test.
chaos: tools
	$(CARGO) build --workspace --bins
	bash e2e/cluster.sh down
	bash e2e/cluster.sh up
	status=0; $(CURDIR)/target/debug/chaos || status=$$?; bash e2e/cluster.sh down; exit $$status

# CLUSTER_NODE=1 make cluster-up: with a node (containerd, kubelet, kube-scheduler, kube-proxy).
cluster-up:
	bash e2e/cluster.sh up

cluster-down:
	bash e2e/cluster.sh down

# Static release binaries, one from-scratch image each, written as target/image/csi-sidecars.oci.tar by
# image/build.sh (tar + gzip + sha256sum, no daemon), then checked by e2e/tests/image.rs.
image:
	bash image/build.sh
	$(CARGO) test -p $(E2E_PACKAGE) --test image -- --include-ignored

# The examples, story by story, on the local control plane with hostpath-plugin and every sidecar as processes
# (e2e/src/bin/demo.rs). KEEP=1 leaves it all running and prints how to use and stop it.
demo: tools
	$(CARGO) build --workspace --bins
	$(CARGO) run --quiet -p $(E2E_PACKAGE) --bin demo

# cargo-deny's advisories check reads ADVISORY_DB (default ../shared/advisory-db), offline (e2e/cargo-deny.sh).
lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	bash e2e/cargo-deny.sh

clean:
	-bash e2e/cluster.sh down
	$(CARGO) clean
