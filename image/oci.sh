# shellcheck shell=bash
# Writing OCI image archives without a container daemon, sourced by image/build.sh (the release images) and
# e2e/node-images.sh (the test images the node runs).
#
# An OCI layout is plain files: each blob (layer tar.gz, config JSON, manifest JSON) stored under its sha256, an
# index.json naming the manifests, and an oci-layout marker; tar, gzip and sha256sum are all it takes. Timestamps
# are fixed and tar entries sorted, so the same files give the same digests.
#
#   oci_begin WORKDIR                  start a layout in WORKDIR (a scratch directory of the caller's)
#   oci_layer ROOTFS [GZIP_LEVEL]      store ROOTFS (a directory) as a layer, owned by root; sets
#                                      OCI_LAYER="digest size diff_id"
#   oci_image REF USER ENTRYPOINT TITLE VERSION CREATED_BY LAYER...
#                                      one image of the given layers (each a value of OCI_LAYER), named REF in the
#                                      index (org.opencontainers.image.ref.name); ENTRYPOINT is one path
#   oci_write ARCHIVE                  the layout as a tar at ARCHIVE (written beside it, then renamed)

OCI_EPOCH="1970-01-01T00:00:00Z"

oci_sha() { sha256sum "$1" | cut -d' ' -f1; }
oci_size() { stat -c %s "$1"; }

oci_begin() {
	OCI_WORK="$1"
	OCI_LAYOUT="$OCI_WORK/layout"
	OCI_ENTRIES=()
	mkdir -p "$OCI_LAYOUT/blobs/sha256"
}

# oci_store FILE -> moves FILE into blobs/sha256/<digest>, prints the digest
oci_store() {
	local digest
	digest="$(oci_sha "$1")"
	mv -f "$1" "$OCI_LAYOUT/blobs/sha256/$digest"
	echo "$digest"
}

oci_layer() {
	local rootfs="$1" level="${2:-9}" diff_id size digest entries
	# The top-level entries by name, so a layer of one file holds that file alone (no "./" entry).
	mapfile -t entries < <(cd "$rootfs" && LC_ALL=C ls -A | sort)
	tar --create --file "$OCI_WORK/layer.tar" --directory "$rootfs" --sort=name --format=ustar \
		--owner=0 --group=0 --numeric-owner --mtime="@0" -- "${entries[@]}"
	diff_id="$(oci_sha "$OCI_WORK/layer.tar")"
	gzip -n "-$level" <"$OCI_WORK/layer.tar" >"$OCI_WORK/layer.tar.gz"
	rm -f "$OCI_WORK/layer.tar"
	size="$(oci_size "$OCI_WORK/layer.tar.gz")"
	digest="$(oci_store "$OCI_WORK/layer.tar.gz")"
	OCI_LAYER="$digest $size $diff_id"
}

oci_image() {
	local ref="$1" user="$2" entrypoint="$3" title="$4" version="$5" created_by="$6"
	shift 6
	local layer digest size diff_id diff_ids="" descriptors="" config config_size config_digest manifest \
		manifest_size manifest_digest
	for layer in "$@"; do
		read -r digest size diff_id <<<"$layer"
		diff_ids+="${diff_ids:+,}\"sha256:$diff_id\""
		descriptors+="${descriptors:+,}{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\",\
\"digest\":\"sha256:$digest\",\"size\":$size}"
	done
	config="$OCI_WORK/config.json"
	printf '%s' "{\"created\":\"$OCI_EPOCH\",\"architecture\":\"amd64\",\"os\":\"linux\",\
\"config\":{\"User\":\"$user\",\"Entrypoint\":[\"$entrypoint\"],\"WorkingDir\":\"/\",\
\"Labels\":{\"org.opencontainers.image.title\":\"$title\",\"org.opencontainers.image.version\":\"$version\",\
\"org.opencontainers.image.licenses\":\"Apache-2.0\"}},\
\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[$diff_ids]},\
\"history\":[{\"created\":\"$OCI_EPOCH\",\"created_by\":\"$created_by\"}]}" >"$config"
	config_size="$(oci_size "$config")"
	config_digest="$(oci_store "$config")"

	manifest="$OCI_WORK/manifest.json"
	printf '%s' "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\
\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"digest\":\"sha256:$config_digest\",\
\"size\":$config_size},\"layers\":[$descriptors],\
\"annotations\":{\"org.opencontainers.image.title\":\"$title\",\"org.opencontainers.image.version\":\"$version\"}}" \
		>"$manifest"
	manifest_size="$(oci_size "$manifest")"
	manifest_digest="$(oci_store "$manifest")"
	OCI_ENTRIES+=("{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\
\"digest\":\"sha256:$manifest_digest\",\"size\":$manifest_size,\"platform\":{\"architecture\":\"amd64\",\"os\":\"linux\"},\
\"annotations\":{\"org.opencontainers.image.ref.name\":\"$ref\"}}")
	OCI_MANIFEST_DIGEST="$manifest_digest"
}

oci_write() {
	local archive="$1" joined
	joined="$(IFS=,; echo "${OCI_ENTRIES[*]}")"
	printf '%s' "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\",\"manifests\":[$joined]}" \
		>"$OCI_LAYOUT/index.json"
	printf '%s' '{"imageLayoutVersion":"1.0.0"}' >"$OCI_LAYOUT/oci-layout"
	mkdir -p "$(dirname "$archive")"
	tar --create --file "$archive.tmp" --directory "$OCI_LAYOUT" --sort=name --format=ustar \
		--owner=0 --group=0 --numeric-owner --mtime="@0" oci-layout index.json blobs
	mv -f "$archive.tmp" "$archive"
}
