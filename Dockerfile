# The sidecar images, built in your own pipeline: one from-scratch image per binary, the same as `make image`
# writes into target/image/csi-sidecars.oci.tar (a static binary at /<name>, no shell, user root as upstream's
# distroless images: a deployment that sets no runAsUser reaches a root driver's socket as before the swap).
#
#   docker build --target csi-provisioner -t REGISTRY/csi-provisioner:TAG .
#   (targets: csi-provisioner csi-resizer csi-snapshotter csi-group-snapshotter csi-attacher
#    csi-external-health-monitor-controller livenessprobe csi-node-driver-registrar snapshot-controller csi-sidecars)
#
# buildah, kaniko and `docker buildx` read this file as it is. linux/amd64 only (the static gnu target).

FROM docker.io/library/rust:1-bookworm AS build
# cargo-auditable, the version image/build.sh pins: each binary carries the crates and versions it was built from
# (section .dep-v0, which Trivy, Grype and Syft read), as `make image`'s do.
RUN cargo install --locked --version 0.7.7 cargo-auditable
WORKDIR /src
COPY . .
# --target keeps +crt-static off build scripts and proc macros; the cache mounts only speed up rebuilds.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    RUSTFLAGS="-C target-feature=+crt-static" cargo auditable build --release --locked \
      --target x86_64-unknown-linux-gnu -p provisioner -p resizer -p snapshot-binaries -p attacher \
      -p health-monitor -p node-driver-registrar -p livenessprobe -p csi-sidecars \
      --bin csi-provisioner --bin csi-resizer --bin csi-snapshotter --bin csi-group-snapshotter \
      --bin csi-attacher --bin csi-external-health-monitor-controller --bin livenessprobe --bin csi-node-driver-registrar --bin snapshot-controller \
      --bin csi-sidecars \
 && mkdir /out \
 && cd target/x86_64-unknown-linux-gnu/release \
 && cp csi-provisioner csi-resizer csi-snapshotter csi-group-snapshotter csi-attacher \
       csi-external-health-monitor-controller livenessprobe csi-node-driver-registrar snapshot-controller csi-sidecars /out/

FROM scratch AS csi-provisioner
COPY --from=build --chmod=0755 /out/csi-provisioner /csi-provisioner
USER 0:0
ENTRYPOINT ["/csi-provisioner"]

FROM scratch AS csi-resizer
COPY --from=build --chmod=0755 /out/csi-resizer /csi-resizer
USER 0:0
ENTRYPOINT ["/csi-resizer"]

FROM scratch AS csi-snapshotter
COPY --from=build --chmod=0755 /out/csi-snapshotter /csi-snapshotter
USER 0:0
ENTRYPOINT ["/csi-snapshotter"]

FROM scratch AS csi-group-snapshotter
COPY --from=build --chmod=0755 /out/csi-group-snapshotter /csi-group-snapshotter
USER 0:0
ENTRYPOINT ["/csi-group-snapshotter"]

FROM scratch AS csi-attacher
COPY --from=build --chmod=0755 /out/csi-attacher /csi-attacher
USER 0:0
ENTRYPOINT ["/csi-attacher"]

FROM scratch AS csi-external-health-monitor-controller
COPY --from=build --chmod=0755 /out/csi-external-health-monitor-controller /csi-external-health-monitor-controller
USER 0:0
ENTRYPOINT ["/csi-external-health-monitor-controller"]

FROM scratch AS livenessprobe
COPY --from=build --chmod=0755 /out/livenessprobe /livenessprobe
USER 0:0
ENTRYPOINT ["/livenessprobe"]

FROM scratch AS csi-node-driver-registrar
COPY --from=build --chmod=0755 /out/csi-node-driver-registrar /csi-node-driver-registrar
USER 0:0
ENTRYPOINT ["/csi-node-driver-registrar"]

FROM scratch AS snapshot-controller
COPY --from=build --chmod=0755 /out/snapshot-controller /snapshot-controller
USER 0:0
ENTRYPOINT ["/snapshot-controller"]

FROM scratch AS csi-sidecars
COPY --from=build --chmod=0755 /out/csi-sidecars /csi-sidecars
USER 0:0
ENTRYPOINT ["/csi-sidecars"]
